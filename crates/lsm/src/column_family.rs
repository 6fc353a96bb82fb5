//! Column families: independent key spaces of one engine that share its
//! write-ahead log, so one [`crate::WriteBatch`] can change several of them
//! atomically. Each column family has its own memtables and SST files.
//!
//! Only the identifiers live here for now; the registry of column families
//! (names, options, creation and drop in the manifest) comes with versions.

/// The identifier of a column family, as written in a batch and the manifest.
pub type ColumnFamilyId = u32;

/// The column family every engine has from the start; it cannot be dropped.
pub const DEFAULT_COLUMN_FAMILY: ColumnFamilyId = 0;
