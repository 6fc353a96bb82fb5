//! The frozen constants and fixed-layout pieces of the SST format: block
//! handles, the block trailer, compression tags and the footer. The spec is
//! `docs/format/sst.md`; change nothing here without it.
//!
//! Invariants:
//! - Every tag below is on disk: never reuse a retired value.
//! - The footer is exactly [`FOOTER_LEN`] bytes at the very end of the file.
//! - A block handle's `size` excludes the 5-byte trailer that follows it.

use strata_codec::{crc32c, put_varint, varint_len, DecodeError, Reader};

/// The 8 bytes that end every SST file ("STRATSST"), checked before anything
/// else so that a file of another kind is refused rather than misread.
pub const MAGIC: u64 = u64::from_le_bytes(*b"STRATSST");

/// The format version this code writes and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;

/// Bytes after every stored block: `{ u8 compression | u32 crc32c }`.
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Bytes of the footer.
pub const FOOTER_LEN: usize = 52;

/// The most bytes a block may hold once decompressed. The writer never
/// produces more (see `MAX_ENTRY_LEN` and `MAX_BLOCK_SIZE`); a reader refuses
/// larger claims before allocating anything.
pub const MAX_BLOCK_LEN: u64 = 64 << 20;

/// The largest key plus value the writer accepts in one entry.
pub const MAX_ENTRY_LEN: usize = 32 << 20;

/// The largest target block size (and index partition size) options accept.
pub const MAX_BLOCK_SIZE: usize = 16 << 20;

const _: () = assert!((MAX_BLOCK_SIZE + MAX_ENTRY_LEN + 64) as u64 <= MAX_BLOCK_LEN);
const _: () = assert!(FOOTER_LEN == 4 * 8 + 1 + 3 + 4 + 4 + 8);

/// How a block's stored bytes are compressed. The discriminant is the
/// trailer's first byte.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Compression {
    /// Stored as is.
    #[default]
    None = 0,
    /// `varint raw_len | LZ4 block`.
    Lz4 = 1,
    /// `varint raw_len | zstd frame`.
    Zstd = 2,
}

impl Compression {
    /// The compression of a trailer byte, if it names one.
    pub fn from_u8(b: u8) -> Option<Compression> {
        match b {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            2 => Some(Compression::Zstd),
            _ => None,
        }
    }
}

/// Where a stored block lies: its offset in the file and the size of its
/// stored bytes (trailer excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BlockHandle {
    /// Offset of the block's first byte.
    pub offset: u64,
    /// Bytes of the stored block, without its trailer.
    pub size: u64,
}

impl BlockHandle {
    /// Appends `{ varint offset | varint size }`.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        put_varint(out, self.offset);
        put_varint(out, self.size);
    }

    /// The encoded bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20);
        self.encode_to(&mut out);
        out
    }

    /// Decodes a handle that must fill `bytes` exactly, in the shortest
    /// encoding (so every handle has exactly one byte string).
    pub fn decode(bytes: &[u8]) -> Result<BlockHandle, DecodeError> {
        let mut r = Reader::new(bytes);
        let offset = r.varint()?;
        let size = r.varint()?;
        if !r.is_empty() {
            return Err(DecodeError::invalid(
                "block handle",
                r.position(),
                "trailing bytes",
            ));
        }
        if varint_len(offset) + varint_len(size) != bytes.len() {
            return Err(DecodeError::invalid(
                "block handle",
                0,
                "varint not in its shortest form",
            ));
        }
        Ok(BlockHandle { offset, size })
    }

    /// The offset just past the block's trailer, if it does not overflow.
    pub fn end(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// The kind of index the footer's index handle points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum IndexKind {
    /// One index block: separator -> data block handle.
    Single = 0,
    /// A top-level index block: separator -> index partition handle; each
    /// partition maps separators to data block handles.
    Partitioned = 1,
}

/// The fixed-size end of every SST file.
///
/// ```text
/// { u64 meta_index.offset | u64 meta_index.size | u64 index.offset | u64 index.size
///   | u8 index_kind | 3 zero bytes | u32 format_version | u32 crc32c(bytes 0..40) | u64 magic }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The meta-index block (names the filter, properties, range deletions).
    pub meta_index: BlockHandle,
    /// The index block (or the top level of a partitioned index).
    pub index: BlockHandle,
    /// Whether the index is partitioned.
    pub index_kind: IndexKind,
}

impl Footer {
    /// The footer's bytes.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut out = [0u8; FOOTER_LEN];
        out[0..8].copy_from_slice(&self.meta_index.offset.to_le_bytes());
        out[8..16].copy_from_slice(&self.meta_index.size.to_le_bytes());
        out[16..24].copy_from_slice(&self.index.offset.to_le_bytes());
        out[24..32].copy_from_slice(&self.index.size.to_le_bytes());
        out[32] = self.index_kind as u8;
        out[36..40].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        let crc = crc32c(&out[0..40]);
        out[40..44].copy_from_slice(&crc.to_le_bytes());
        out[44..52].copy_from_slice(&MAGIC.to_le_bytes());
        out
    }

    /// Decodes the last [`FOOTER_LEN`] bytes of a file. Checks, in order: the
    /// length, the magic (is this an SST at all?), the version (can we read
    /// it?), the checksum, then each field.
    pub fn decode(bytes: &[u8]) -> Result<Footer, DecodeError> {
        if bytes.len() != FOOTER_LEN {
            return Err(DecodeError::invalid(
                "footer",
                0,
                format!("{} bytes, want {FOOTER_LEN}", bytes.len()),
            ));
        }
        let mut r = Reader::new(bytes);
        let meta_offset = r.u64()?;
        let meta_size = r.u64()?;
        let index_offset = r.u64()?;
        let index_size = r.u64()?;
        let kind = r.u8()?;
        let reserved = r.bytes(3)?;
        let version = r.u32()?;
        let crc = r.u32()?;
        let magic = r.u64()?;
        if magic != MAGIC {
            return Err(DecodeError::invalid(
                "magic",
                44,
                format!("{magic:#018x} is not an SST file's"),
            ));
        }
        if version != FORMAT_VERSION {
            return Err(DecodeError::invalid(
                "format version",
                36,
                format!("version {version} is not supported (this build reads {FORMAT_VERSION})"),
            ));
        }
        if crc != crc32c(&bytes[0..40]) {
            return Err(DecodeError::invalid("footer", 40, "checksum mismatch"));
        }
        let index_kind = match kind {
            0 => IndexKind::Single,
            1 => IndexKind::Partitioned,
            k => return Err(DecodeError::invalid("index kind", 32, format!("{k}"))),
        };
        if reserved != [0, 0, 0] {
            return Err(DecodeError::invalid(
                "footer",
                33,
                "reserved bytes not zero",
            ));
        }
        Ok(Footer {
            meta_index: BlockHandle {
                offset: meta_offset,
                size: meta_size,
            },
            index: BlockHandle {
                offset: index_offset,
                size: index_size,
            },
            index_kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_round_trips_and_refuses_other_versions_and_magic() {
        let f = Footer {
            meta_index: BlockHandle {
                offset: 1000,
                size: 20,
            },
            index: BlockHandle {
                offset: 900,
                size: 95,
            },
            index_kind: IndexKind::Partitioned,
        };
        let bytes = f.encode();
        assert_eq!(Footer::decode(&bytes).unwrap(), f);
        let mut v2 = bytes;
        v2[36] = 2;
        let e = Footer::decode(&v2).unwrap_err().to_string();
        assert!(e.contains("version 2"), "{e}");
        let mut other = bytes;
        other[51] ^= 1;
        assert!(Footer::decode(&other)
            .unwrap_err()
            .to_string()
            .contains("magic"));
        for i in 0..40 {
            let mut b = bytes;
            b[i] ^= 0x10;
            assert!(Footer::decode(&b).is_err(), "flip at {i} accepted");
        }
    }

    #[test]
    fn handle_round_trip_and_trailing_bytes() {
        let h = BlockHandle {
            offset: u64::MAX,
            size: 3,
        };
        assert_eq!(BlockHandle::decode(&h.encode()).unwrap(), h);
        let mut b = h.encode();
        b.push(0);
        assert!(BlockHandle::decode(&b).is_err());
        assert_eq!(h.end(), None);
        // 53 written as `b5 00` instead of `35`.
        assert!(BlockHandle::decode(&[0xb5, 0x00, 0x23]).is_err());
    }
}
