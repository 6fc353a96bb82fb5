//! The on-disk format of raftlog files: every constant, and the encoders and
//! decoders of the fixed-size headers. The spec is `docs/format/raftlog.md`;
//! change neither without the other.
//!
//! All integers are little-endian.

use strata_codec::{crc32c, DecodeError, Reader};

/// The first 8 bytes of every raftlog file.
pub const FILE_MAGIC: [u8; 8] = *b"STRATARL";
/// The format version this code writes. Readers accept exactly the versions listed
/// in [`SUPPORTED_VERSIONS`]. Version 1 (28-byte record headers without
/// `synced_end`) was never released and is refused.
pub const FORMAT_VERSION: u16 = 2;
/// Versions this code can read.
pub const SUPPORTED_VERSIONS: &[u16] = &[2];
/// `{ magic[8] | u16 version | u8 queue | u8 reserved=0 | u64 file_id | u32 crc32c(bytes 0..20) }`
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

/// Item tags inside a batch payload. Tags are never reused.
pub const TAG_ENTRIES: u8 = 1;
/// A key-value put.
pub const TAG_PUT: u8 = 2;
/// A key-value delete.
pub const TAG_DELETE: u8 = 3;
/// Drops a group's entries below an index.
pub const TAG_COMPACT_TO: u8 = 4;
/// Removes a group and all it holds.
pub const TAG_REMOVE_GROUP: u8 = 5;

const _: () = assert!(FILE_HEADER_LEN == 8 + 2 + 1 + 1 + 8 + 4);
const _: () = assert!(RECORD_HEADER_LEN == 4 + 8 + 4 + 4 + 4 + 4 + 1 + 3);

/// Which sequence of files a file belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Queue {
    /// Where every `write` goes.
    Append = 1,
    /// Where purge copies the live data of lagging groups.
    Rewrite = 2,
}

impl Queue {
    /// The file-name suffix of this queue's files.
    pub fn suffix(self) -> &'static str {
        match self {
            Queue::Append => "raftlog",
            Queue::Rewrite => "rewrite",
        }
    }

    fn from_u8(v: u8) -> Option<Queue> {
        match v {
            1 => Some(Queue::Append),
            2 => Some(Queue::Rewrite),
            _ => None,
        }
    }
}

/// A file's identity: its queue and sequence number, packed as
/// `queue << 56 | seq`. It salts every record checksum of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    /// The queue.
    pub queue: Queue,
    /// The sequence number within the queue, starting at 1.
    pub seq: u64,
}

/// Sequence numbers use the low 56 bits of a file id.
pub const SEQ_MAX: u64 = (1 << 56) - 1;

impl FileId {
    /// Returns the id as stored on disk.
    pub fn to_u64(self) -> u64 {
        debug_assert!(self.seq <= SEQ_MAX);
        ((self.queue as u64) << 56) | self.seq
    }

    /// Parses an id as stored on disk.
    pub fn from_u64(v: u64) -> Option<FileId> {
        let queue = Queue::from_u8((v >> 56) as u8)?;
        Some(FileId {
            queue,
            seq: v & SEQ_MAX,
        })
    }

    /// Returns the file name: 16 hex digits of the sequence and the queue suffix.
    pub fn file_name(self) -> String {
        format!("{:016x}.{}", self.seq, self.queue.suffix())
    }

    /// Parses a file name made by [`FileId::file_name`].
    pub fn parse_file_name(name: &str) -> Option<FileId> {
        let (stem, suffix) = name.split_once('.')?;
        let queue = match suffix {
            "raftlog" => Queue::Append,
            "rewrite" => Queue::Rewrite,
            _ => return None,
        };
        if stem.len() != 16 {
            return None;
        }
        let seq = u64::from_str_radix(stem, 16).ok()?;
        (1..=SEQ_MAX)
            .contains(&seq)
            .then_some(FileId { queue, seq })
    }
}

impl std::fmt::Display for FileId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.file_name())
    }
}

/// Prefix of the names of purged files kept for reuse.
pub const RECYCLE_PREFIX: &str = "recycle-";
/// Name of the lock file that keeps two engines out of one directory.
pub const LOCK_FILE_NAME: &str = "LOCK";

/// Encodes the header that starts every file.
pub fn encode_file_header(id: FileId) -> [u8; FILE_HEADER_LEN] {
    // { magic[8] | u16 version | u8 queue | u8 0 | u64 file_id | u32 crc }
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(&FILE_MAGIC);
    h[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[10] = id.queue as u8;
    h[12..20].copy_from_slice(&id.to_u64().to_le_bytes());
    let crc = crc32c(&h[..20]);
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Decodes and verifies a file header; returns the file's id and format version.
pub fn decode_file_header(bytes: &[u8]) -> Result<(FileId, u16), DecodeError> {
    let mut r = Reader::new(bytes);
    let magic = r.bytes(8)?;
    if magic != FILE_MAGIC {
        return Err(DecodeError::invalid("file magic", 0, "not a raftlog file"));
    }
    let version = r.u16()?;
    let queue = r.u8()?;
    if r.u8()? != 0 {
        return Err(DecodeError::invalid(
            "file header",
            11,
            "reserved byte is not zero",
        ));
    }
    let raw_id = r.u64()?;
    let crc = r.u32()?;
    if crc != crc32c(&bytes[..20]) {
        return Err(DecodeError::invalid("file header checksum", 20, "mismatch"));
    }
    if !SUPPORTED_VERSIONS.contains(&version) {
        return Err(DecodeError::invalid(
            "format version",
            8,
            format!("version {version} is not supported (this build reads {SUPPORTED_VERSIONS:?})"),
        ));
    }
    let id = FileId::from_u64(raw_id)
        .ok_or_else(|| DecodeError::invalid("file id", 12, "unknown queue"))?;
    if id.queue as u8 != queue {
        return Err(DecodeError::invalid(
            "file id",
            12,
            "queue byte disagrees with id",
        ));
    }
    Ok((id, version))
}

/// The fixed header in front of every batch record.
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
    /// this record was written. Recovery uses it to tell damage in synced data
    /// from pages of an unsynced tail that a power cut kept or lost in any
    /// order (`docs/format/raftlog.md`).
    pub synced_end: u32,
    /// [`CODEC_NONE`] or [`CODEC_LZ4`].
    pub codec: u8,
}

/// What the bytes at a record position turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderCheck {
    /// A valid header of this file.
    Valid(RecordHeader),
    /// All zeros: preallocated space, the clean end of the written data.
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

    #[test]
    fn file_header_round_trip() {
        let id = FileId {
            queue: Queue::Rewrite,
            seq: 42,
        };
        let h = encode_file_header(id);
        assert_eq!(decode_file_header(&h).unwrap(), (id, FORMAT_VERSION));
        for i in 0..FILE_HEADER_LEN {
            let mut bad = h;
            bad[i] ^= 0x10;
            assert!(decode_file_header(&bad).is_err(), "flip at {i} accepted");
        }
    }

    #[test]
    fn file_names_round_trip() {
        let id = FileId {
            queue: Queue::Append,
            seq: 0xabc,
        };
        assert_eq!(id.file_name(), "0000000000000abc.raftlog");
        assert_eq!(FileId::parse_file_name(&id.file_name()), Some(id));
        assert_eq!(FileId::parse_file_name("0000000000000000.raftlog"), None);
        assert_eq!(FileId::parse_file_name("abc.raftlog"), None);
        assert_eq!(FileId::parse_file_name("LOCK"), None);
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
        assert_eq!(
            RecordHeader::check(&[0; RECORD_HEADER_LEN], 7),
            HeaderCheck::Zeros
        );
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
