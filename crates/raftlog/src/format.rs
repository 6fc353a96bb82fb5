//! The on-disk format of raftlog files: every constant, and the encoders and
//! decoders of the fixed-size headers. The spec is `docs/format/raftlog.md`;
//! change neither without the other.
//!
//! The file header, the record headers and the end marker are the shared
//! record-file format of `strata-log` (`docs/format/record_file.md`); this
//! module names raftlog's instance of it (magic, versions, the queue as the
//! file kind) and keeps raftlog's own constants. All integers are
//! little-endian.

use strata_codec::DecodeError;
use strata_log::record::FileFormat;
/// The shared record-file pieces, re-exported where raftlog's users have
/// always found them.
pub use strata_log::record::{
    HeaderCheck, RecordHeader, CODEC_LZ4, CODEC_NONE, END_MARKER, FILE_HEADER_LEN,
    RECORD_HEADER_LEN, RECORD_PAYLOAD_MAX,
};

/// The first 8 bytes of every raftlog file.
pub const FILE_MAGIC: [u8; 8] = *b"STRATARL";
/// The format version this code writes. Readers accept exactly the versions listed
/// in [`SUPPORTED_VERSIONS`]. Version 1 (28-byte record headers without
/// `synced_end`) was never released and is refused.
pub const FORMAT_VERSION: u16 = 2;
/// Versions this code can read.
pub const SUPPORTED_VERSIONS: &[u16] = &[2];
/// The record-file format of raftlog files (`docs/format/record_file.md`):
/// the file kind byte is the [`Queue`].
pub const FORMAT: FileFormat = FileFormat {
    magic: FILE_MAGIC,
    name: "raftlog",
    version: FORMAT_VERSION,
    supported_versions: SUPPORTED_VERSIONS,
};

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
/// Engine-wide, written by purge before it removes append files: every append
/// file below a sequence number was purged. Its group field is 0.
pub const TAG_PURGED_BELOW: u8 = 6;

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
    /// The file after this one in its queue.
    pub fn next(self) -> FileId {
        FileId {
            queue: self.queue,
            seq: self.seq + 1,
        }
    }

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
    FORMAT.encode_header(id.queue as u8, id.to_u64())
}

/// Decodes and verifies a file header; returns the file's id and format version.
pub fn decode_file_header(bytes: &[u8]) -> Result<(FileId, u16), DecodeError> {
    let h = FORMAT.decode_header(bytes)?;
    let id = FileId::from_u64(h.file_id)
        .ok_or_else(|| DecodeError::invalid("file id", 12, "unknown queue"))?;
    if id.queue as u8 != h.kind {
        return Err(DecodeError::invalid(
            "file id",
            12,
            "queue byte disagrees with id",
        ));
    }
    Ok((id, h.version))
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
}
