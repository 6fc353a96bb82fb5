//! Segmented record files: the on-disk format raftlog's log files and the
//! lsm's write-ahead log and manifest share (`docs/format/record_file.md`).
//!
//! A file is a 24-byte header (an owner's magic, a format version, a one-byte
//! file kind and a 64-bit file id), then records, each a 32-byte checksummed
//! header and a payload (LZ4-compressed when that pays), then an end marker of
//! 32 zero bytes written with every append. Each record header names the file
//! (a record left in a recycled file reads as the clean end, not as data) and
//! how far the file was synced when it was written (`synced_end`), which lets
//! a reader tell a power cut's unsynced tail from damage to synced data.
//!
//! - [`format`]: constants and the header codecs.
//! - [`scan`]: the pure scanner over a file's bytes.
//! - [`append`]: the appender that writes records and tracks `synced_end`.
//!
//! Owners keep what is their own: file names, payload codecs, what they add
//! after the records (raftlog's index section and trailer), and how they
//! judge a damaged end under a [`RecoveryMode`].

pub mod append;
pub mod format;
pub mod scan;

use serde::{Deserialize, Serialize};

pub use append::{Appender, PreparedRecord};
pub use format::{
    FileFormat, FileHeader, HeaderCheck, RecordHeader, CODEC_LZ4, CODEC_NONE, END_MARKER,
    FILE_HEADER_LEN, RECORD_HEADER_LEN, RECORD_PAYLOAD_MAX,
};
pub use scan::{
    decode_file_header_of, judge_sealed_end, scan_file, scan_records, synced_past, verify_payload,
    RawRecord, RecordScan, ScanEnd, ScannedRecord,
};

/// What recovery does with damaged records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryMode {
    /// Any damaged record fails `open`.
    AbsoluteConsistency,
    /// A damaged record at the very end of a sequence's last file, in bytes
    /// no later record says were synced, is taken for a torn write and cut
    /// off; damage anywhere else fails `open`.
    #[default]
    TolerateTailCorruption,
    /// Damage anywhere cuts the data at that point; `open` succeeds and
    /// reports every cut.
    TolerateAnyCorruption,
}

#[cfg(test)]
mod tests;
