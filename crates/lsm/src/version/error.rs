//! `EditError`: why a builder refused a version edit. A refused edit changes
//! nothing: the builder keeps the state it had before the edit, and the
//! installed version is never touched by a builder at all.

use super::FileNumber;
use crate::column_family::ColumnFamilyId;

/// Why an edit cannot apply to a version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The edit names a level the version does not have.
    #[error("level {level} out of range: the version has {levels} levels")]
    LevelOutOfRange {
        /// The level the edit names.
        level: u8,
        /// How many levels the version has.
        levels: usize,
    },
    /// The edit deletes a file that is not in that level.
    #[error("file {number} is not in level {level}")]
    DeleteMissing {
        /// The level the edit names.
        level: u8,
        /// The file the edit deletes.
        number: FileNumber,
    },
    /// The edit deletes a blob file the version does not hold.
    #[error("blob file {number} is not in the version")]
    BlobMissing {
        /// The blob file the edit deletes.
        number: FileNumber,
    },
    /// The edit adds a number the version already holds.
    #[error("file {number} is already in level {level}")]
    DuplicateNumber {
        /// The level that holds the number.
        level: u8,
        /// The file number added twice.
        number: FileNumber,
    },
    /// The edit adds a file to L1+ whose user-key range meets another
    /// file's in that level.
    #[error("file {number} overlaps file {other} in level {level}")]
    Overlap {
        /// The level.
        level: u8,
        /// The added file.
        number: FileNumber,
        /// The file already there.
        other: FileNumber,
    },
    /// The added file's description is inconsistent.
    #[error("invalid file: {0}")]
    InvalidFile(String),
    /// An added file's number is not below the next file number, so it
    /// could be handed out again.
    #[error("file {number} is not below the next file number {next}")]
    NumberNotAllocated {
        /// The added file.
        number: FileNumber,
        /// The next file number after the edit.
        next: FileNumber,
    },
    /// The log number would go backwards.
    #[error("{field} would go backwards: {from} -> {to}")]
    WentBackwards {
        /// Which watermark.
        field: &'static str,
        /// Its value in the version.
        from: u64,
        /// The edit's value.
        to: u64,
    },
    /// The edit belongs to another column family.
    #[error("edit of column family {found} applied to column family {expected}")]
    ColumnFamily {
        /// The version's column family.
        expected: ColumnFamilyId,
        /// The edit's.
        found: ColumnFamilyId,
    },
}
