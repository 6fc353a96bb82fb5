//! The write-ahead log: every write batch is appended here, as one record of
//! a record file (`docs/format/record_file.md`, `docs/format/wal.md`), before
//! it reaches a memtable; replay after a crash rebuilds the memtables.
//!
//! Files are named `{number:016x}.wal`; numbers come from the engine's shared
//! file-number space (SSTs and manifests take numbers too), so they ascend
//! but are not consecutive.
//!
//! Invariants:
//! - A WAL file the writers left is closed durably (sync, an empty-batch
//!   marker, sync) by the WAL thread (`keeper/`), and a later file is
//!   synced only after that: a file before the last without its marker was
//!   caught by a power cut before its close, and no later file holds a
//!   synced write; replay stops after it. Damage in a file with its marker
//!   is damage to synced data.
//! - A file's header and end marker, and its directory entry, are durable
//!   before [`WalWriter::create`] returns: a last file that cannot show a
//!   header was never given a record.
//! - A recycled file is renamed to its WAL name only once its new header
//!   and end marker are durable, so no WAL name ever shows an old header;
//!   its old records name the old file's id and read as the clean end.
//! - Replay applies a prefix of the records, in order: it never applies a
//!   record after a damaged one.

mod keeper;
mod replay;
mod writer;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

use strata_log::record::FileFormat;

pub(crate) use keeper::{WalKeeper, ALLOCATE_AHEAD};
pub use replay::replay;
pub use writer::WalWriter;

/// The record-file format of WAL files.
pub const WAL_FORMAT: FileFormat = FileFormat {
    magic: *b"STRATAWL",
    name: "lsm WAL",
    version: 1,
    supported_versions: &[1],
};
/// The file kind byte of every WAL file (the format has one kind).
pub const WAL_FILE_KIND: u8 = 0;
/// Payloads at least this large are LZ4-compressed when that saves an eighth.
/// A write of one 1 KiB value is one payload: compressing it halves the WAL's
/// share of the bytes written when values compress 2:1.
pub const WAL_COMPRESS_MIN_BYTES: usize = 512;

const SUFFIX: &str = ".wal";

/// The name of the pool file: an obsolete WAL file kept to be made into the
/// next one (`keeper/`). Its records are all obsolete: an open removes it.
pub const POOL_FILE_NAME: &str = "recycled.wal";

/// The name of WAL file `number`: 16 lowercase hex digits and `.wal`.
pub fn wal_file_name(number: u64) -> String {
    format!("{number:016x}{SUFFIX}")
}

/// Parses a name made by [`wal_file_name`]; any other name is `None`.
pub fn parse_wal_file_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(SUFFIX)?;
    // Exactly what `wal_file_name` writes: `from_str_radix` alone would take
    // a sign or upper case, and two names would then mean one number.
    if stem.len() != 16 || !stem.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    u64::from_str_radix(stem, 16).ok()
}

/// Where replay stopped reading a file, and why: the end of a power cut's
/// unsynced tail, or (in `TolerateAnyCorruption`) damage it stepped over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalCut {
    /// The file.
    pub path: PathBuf,
    /// Where its data stopped being used.
    pub offset: u64,
    /// What was found there.
    pub reason: String,
}

/// What a replay did.
#[derive(Debug, Clone, Default)]
pub struct WalReplay {
    /// The numbers of the files whose records were replayed (or that were
    /// found empty), ascending. Files after a stop are not listed.
    pub files: Vec<u64>,
    /// Records passed to the caller.
    pub records: u64,
    /// Every cut, in order.
    pub cuts: Vec<WalCut>,
}
