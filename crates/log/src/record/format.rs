//! The bytes of a record file: its constants and the codecs of the two fixed
//! headers. The spec is `docs/format/record_file.md`; change neither without
//! the other.
//!
//! All integers are little-endian.

use strata_codec::{crc32c, DecodeError, Reader};

/// `{ magic[8] | u16 version | u8 kind | u8 reserved=0 | u64 file_id | u32 crc32c(bytes 0..20) }`
pub const FILE_HEADER_LEN: usize = 24;
/// `{ u32 header_crc | u64 file_id | u32 stored_len | u32 raw_len | u32 payload_crc | u32 synced_end | u8 codec | u8[3] 0 }`
pub const RECORD_HEADER_LEN: usize = 32;
/// Written after the last record of every append: 32 zero bytes, the clean end of
/// the data. The next append overwrites it. Without it, the bytes after the last
/// record of a recycled file would be the middle of an old record: damage, not an end.
pub const END_MARKER: [u8; RECORD_HEADER_LEN] = [0; RECORD_HEADER_LEN];
/// The largest payload a record may declare, compressed or not. Bounds what a
/// hostile header can make a reader allocate.
pub const RECORD_PAYLOAD_MAX: u32 = 1 << 30;

/// Payload stored as is.
pub const CODEC_NONE: u8 = 0;
/// Payload stored as one raw LZ4 block of `raw_len` bytes.
pub const CODEC_LZ4: u8 = 1;

const _: () = assert!(FILE_HEADER_LEN == 8 + 2 + 1 + 1 + 8 + 4);
const _: () = assert!(RECORD_HEADER_LEN == 4 + 8 + 4 + 4 + 4 + 4 + 1 + 3);

/// What tells one kind of record file from another: its magic and the format
/// versions its owner writes and reads. Each owner (raftlog, the lsm's WAL,
/// its manifest) numbers its versions on its own, since a version covers the
/// payloads and whatever else the owner puts in its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileFormat {
    /// The first 8 bytes of every file of this kind.
    pub magic: [u8; 8],
    /// Names the kind in errors ("not a raftlog file").
    pub name: &'static str,
    /// The version this code writes.
    pub version: u16,
    /// The versions this code reads.
    pub supported_versions: &'static [u16],
}

/// A decoded file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    /// The format version the file was written in.
    pub version: u16,
    /// The owner's one-byte file kind (raftlog's queue).
    pub kind: u8,
    /// The file's identity; it salts every record header of the file (see
    /// [`RecordHeader::file_id`]).
    pub file_id: u64,
}

impl FileFormat {
    /// Encodes the header that starts every file of this format.
    pub fn encode_header(&self, kind: u8, file_id: u64) -> [u8; FILE_HEADER_LEN] {
        // { magic[8] | u16 version | u8 kind | u8 0 | u64 file_id | u32 crc }
        let mut h = [0u8; FILE_HEADER_LEN];
        h[..8].copy_from_slice(&self.magic);
        h[8..10].copy_from_slice(&self.version.to_le_bytes());
        h[10] = kind;
        h[12..20].copy_from_slice(&file_id.to_le_bytes());
        let crc = crc32c(&h[..20]);
        h[20..24].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Decodes and verifies the file header at the start of `bytes`: magic,
    /// reserved byte, checksum and a supported version, in that order.
    pub fn decode_header(&self, bytes: &[u8]) -> Result<FileHeader, DecodeError> {
        let mut r = Reader::new(bytes);
        let magic = r.bytes(8)?;
        if magic != self.magic {
            return Err(DecodeError::invalid(
                "file magic",
                0,
                format!("not a {} file", self.name),
            ));
        }
        let version = r.u16()?;
        let kind = r.u8()?;
        if r.u8()? != 0 {
            return Err(DecodeError::invalid(
                "file header",
                11,
                "reserved byte is not zero",
            ));
        }
        let file_id = r.u64()?;
        let crc = r.u32()?;
        if crc != crc32c(&bytes[..20]) {
            return Err(DecodeError::invalid("file header checksum", 20, "mismatch"));
        }
        if !self.supported_versions.contains(&version) {
            return Err(DecodeError::invalid(
                "format version",
                8,
                format!(
                    "version {version} is not supported (this build reads {:?})",
                    self.supported_versions
                ),
            ));
        }
        Ok(FileHeader {
            version,
            kind,
            file_id,
        })
    }
}

/// The fixed header in front of every record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// The file the record was written into (binds the record to that file).
    pub file_id: u64,
    /// Bytes of payload stored after the header.
    pub stored_len: u32,
    /// Bytes of payload after decompression.
    pub raw_len: u32,
    /// CRC-32C of the stored payload bytes.
    pub payload_crc: u32,
    /// Every byte of the file before this offset was durable (synced) before
    /// this record was written. Readers use it to tell damage in synced data
    /// from pages of an unsynced tail that a power cut kept or lost in any
    /// order (`docs/format/record_file.md`).
    pub synced_end: u32,
    /// [`CODEC_NONE`] or [`CODEC_LZ4`].
    pub codec: u8,
}

/// What the bytes at a record position turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderCheck {
    /// A valid header of this file.
    Valid(RecordHeader),
    /// All zeros: the end marker or preallocated space, the clean end of the
    /// written data.
    Zeros,
    /// A valid header of another file: left over in a recycled file, so the
    /// clean end of the written data.
    Stale,
    /// Not a valid header: a torn write or corruption.
    Invalid(&'static str),
}

impl RecordHeader {
    /// Encodes the header; `header_crc` covers bytes 4..32, including the file id.
    pub fn encode(&self) -> [u8; RECORD_HEADER_LEN] {
        // { u32 header_crc | u64 file_id | u32 stored_len | u32 raw_len | u32 payload_crc | u32 synced_end | u8 codec | u8[3] 0 }
        let mut h = [0u8; RECORD_HEADER_LEN];
        h[4..12].copy_from_slice(&self.file_id.to_le_bytes());
        h[12..16].copy_from_slice(&self.stored_len.to_le_bytes());
        h[16..20].copy_from_slice(&self.raw_len.to_le_bytes());
        h[20..24].copy_from_slice(&self.payload_crc.to_le_bytes());
        h[24..28].copy_from_slice(&self.synced_end.to_le_bytes());
        h[28] = self.codec;
        let crc = crc32c(&h[4..]);
        h[..4].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Classifies the 32 bytes at a record position of the file `file_id`.
    pub fn check(bytes: &[u8; RECORD_HEADER_LEN], file_id: u64) -> HeaderCheck {
        if bytes.iter().all(|b| *b == 0) {
            return HeaderCheck::Zeros;
        }
        let word =
            |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        if word(0) != crc32c(&bytes[4..]) {
            return HeaderCheck::Invalid("record header checksum mismatch");
        }
        let mut id = [0u8; 8];
        id.copy_from_slice(&bytes[4..12]);
        let id = u64::from_le_bytes(id);
        if id != file_id {
            return HeaderCheck::Stale;
        }
        let h = RecordHeader {
            file_id: id,
            stored_len: word(12),
            raw_len: word(16),
            payload_crc: word(20),
            synced_end: word(24),
            codec: bytes[28],
        };
        if bytes[29..32] != [0, 0, 0] {
            return HeaderCheck::Invalid("reserved bytes are not zero");
        }
        if h.stored_len > RECORD_PAYLOAD_MAX || h.raw_len > RECORD_PAYLOAD_MAX {
            return HeaderCheck::Invalid("record length over the format's limit");
        }
        match h.codec {
            // LZ4 expands at most 255 times: a larger claim is a hostile header
            // that would make a reader allocate for nothing.
            CODEC_LZ4 if h.raw_len as u64 > h.stored_len as u64 * 255 + 64 => {
                HeaderCheck::Invalid("compressed length claims an impossible expansion")
            }
            CODEC_NONE if h.raw_len != h.stored_len => {
                HeaderCheck::Invalid("uncompressed record with two lengths")
            }
            CODEC_NONE | CODEC_LZ4 => HeaderCheck::Valid(h),
            _ => HeaderCheck::Invalid("unknown codec"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST: FileFormat = FileFormat {
        magic: *b"STRATATS",
        name: "test",
        version: 3,
        supported_versions: &[2, 3],
    };

    #[test]
    fn file_header_round_trip_and_every_flip_refused() {
        let h = TEST.encode_header(5, 0x0500_0000_0000_002a);
        let want = FileHeader {
            version: 3,
            kind: 5,
            file_id: 0x0500_0000_0000_002a,
        };
        assert_eq!(TEST.decode_header(&h).unwrap(), want);
        for i in 0..FILE_HEADER_LEN {
            let mut bad = h;
            bad[i] ^= 0x10;
            assert!(TEST.decode_header(&bad).is_err(), "flip at {i} accepted");
        }
        assert!(TEST.decode_header(&h[..FILE_HEADER_LEN - 1]).is_err());
        let other = FileFormat {
            magic: *b"STRATAOT",
            ..TEST
        };
        assert!(other.decode_header(&h).is_err());
    }

    #[test]
    fn record_header_classification() {
        let h = RecordHeader {
            file_id: 7,
            stored_len: 10,
            raw_len: 10,
            payload_crc: 99,
            synced_end: 24,
            codec: CODEC_NONE,
        };
        let bytes = h.encode();
        assert_eq!(RecordHeader::check(&bytes, 7), HeaderCheck::Valid(h));
        assert_eq!(RecordHeader::check(&bytes, 8), HeaderCheck::Stale);
        assert_eq!(RecordHeader::check(&END_MARKER, 7), HeaderCheck::Zeros);
        for i in 0..RECORD_HEADER_LEN {
            let mut bad = bytes;
            bad[i] ^= 1;
            assert!(
                matches!(RecordHeader::check(&bad, 7), HeaderCheck::Invalid(_)),
                "flip at {i} accepted"
            );
        }
    }
}
