//! The manifest: the log of every change to the engine's set of files and
//! column families, as records of a record file
//! (`docs/format/record_file.md`, `docs/format/manifest.md`). Replaying it
//! from the start rebuilds the current state; `CURRENT` names the manifest
//! in use.
//!
//! Invariants:
//! - Every append is synced before it returns: only the last record of the
//!   manifest `CURRENT` names can be a write a crash cut short, and such a
//!   record was never acknowledged.
//! - One append is one record, so it survives a crash whole or not at all.
//! - `CURRENT` names a manifest only after that manifest (with its snapshot
//!   record) and its directory entry are durable; the switch is a rename of a
//!   synced `CURRENT.tmp`, itself followed by a directory sync.

mod payload;
mod read;
mod writer;

use std::path::PathBuf;

use strata_log::record::FileFormat;

use crate::column_family::ColumnFamilyId;
use crate::version::VersionEdit;

pub use payload::{decode_records, encode_records, COLUMN_FAMILY_NAME_BYTES_MAX};
pub use read::read_current;
pub use writer::ManifestWriter;

/// The record-file format of manifest files.
pub const MANIFEST_FORMAT: FileFormat = FileFormat {
    magic: *b"STRATAMF",
    name: "lsm manifest",
    version: 1,
    supported_versions: &[1],
};
/// The file kind byte of every manifest file (the format has one kind).
pub const MANIFEST_FILE_KIND: u8 = 0;
/// The file that names the manifest in use.
pub const CURRENT_FILE_NAME: &str = "CURRENT";
/// Where a new `CURRENT` is written before it is renamed over the old one.
pub const CURRENT_TMP_FILE_NAME: &str = "CURRENT.tmp";

const PREFIX: &str = "MANIFEST-";

/// The name of manifest file `number`: `MANIFEST-` and 16 lowercase hex digits.
pub fn manifest_file_name(number: u64) -> String {
    format!("{PREFIX}{number:016x}")
}

/// Parses a name made by [`manifest_file_name`]; any other name is `None`.
pub fn parse_manifest_file_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix(PREFIX)?;
    // Exactly what `manifest_file_name` writes: `from_str_radix` alone would
    // take a sign or upper case.
    if hex.len() != 16 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// One change the manifest records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManifestRecord {
    /// A change to a column family's files and the engine's watermarks.
    Edit(VersionEdit),
    /// A column family comes into being.
    CreateColumnFamily {
        /// Its id.
        id: ColumnFamilyId,
        /// Its name: 1 to [`COLUMN_FAMILY_NAME_BYTES_MAX`] bytes of UTF-8.
        name: String,
    },
    /// A column family goes away.
    DropColumnFamily {
        /// Its id.
        id: ColumnFamilyId,
    },
}

/// Where reading the manifest stopped short of its end: the last append,
/// torn by a crash and never acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestCut {
    /// Where the torn record starts.
    pub offset: u64,
    /// What was found there.
    pub reason: String,
}

/// The manifest `CURRENT` names, read back.
#[derive(Debug, Clone)]
pub struct ManifestContents {
    /// The manifest's number.
    pub number: u64,
    /// Its path.
    pub path: PathBuf,
    /// Every record, in order: the snapshot's, then each append's.
    pub records: Vec<ManifestRecord>,
    /// The torn last append that was left out, if any.
    pub cut: Option<ManifestCut>,
}
