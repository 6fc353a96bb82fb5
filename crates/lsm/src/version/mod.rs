//! Versions: the immutable set of SST files of a column family, the edits
//! that change it, and the builder that applies edits outside any lock.
//!
//! A [`Version`] is a value: levels 0..N of [`FileMeta`]s, each level a
//! persistent ordered set ([`Level`]), the blob files their references
//! point into ([`BlobFileMeta`]), plus the manifest watermarks (log
//! number, next file number, last seqno). A flush, compaction or ingestion
//! describes its change as a [`VersionEdit`]; a [`VersionBuilder`] applies
//! edits to a clone of the current version, which shares every node the
//! edits do not touch, and yields the next version. The installer
//! (`crate::read_state`) publishes it with one pointer swap.
//!
//! Invariants of a version (checked by [`Version::check`], debug-asserted
//! after each build):
//! - every file number appears once, in one level, and `files` (the number
//!   index) and the levels agree;
//! - L0 is newest first; L1+ are sorted by smallest user key with disjoint
//!   user-key ranges (see `level.rs`);
//! - every file number is below `next_file_number`.
//!
//! Concurrency contract: a `Version` is immutable once built; any number of
//! threads read it through `Arc<Version>` without locks. The files it holds
//! are deleted only after every version, snapshot and iterator holding them
//! is dropped (see `file_meta.rs`).

mod blob_file;
mod builder;
mod edit;
mod error;
mod file_meta;
mod format;
mod level;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use imbl::OrdMap;
use smallvec::SmallVec;

pub use blob_file::{BlobFileDesc, BlobFileMeta};
pub use builder::{BuiltVersion, VersionBuilder};
pub use edit::VersionEdit;
pub use error::EditError;
pub use file_meta::{FileDesc, FileMeta, FileNumber, ObsoleteFile, ObsoleteFiles};
pub use level::Level;

/// The files a point lookup asks, in order, with their levels: inline for
/// a handful (L0 files and one per level), so a read allocates nothing here.
pub type FilesForKey<'a> = SmallVec<[(u8, &'a Arc<FileMeta>); 16]>;

use crate::column_family::ColumnFamilyId;
use crate::key::SeqNo;

/// The default number of levels, as in LevelDB and RocksDB.
pub const NUM_LEVELS_DEFAULT: usize = 7;

/// The most levels a version may have; levels are a `u8` in edits.
pub const NUM_LEVELS_MAX: usize = 16;

/// What a version's SSTs reference in one blob file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlobLive {
    /// Value bytes referenced: the file's live bytes.
    pub bytes: u64,
    /// SSTs that reference it. At zero the version drops the blob file.
    pub files: u64,
}

/// Where a file is in a version: its level and its shared metadata.
#[derive(Debug, Clone)]
pub(crate) struct Placed {
    level: u8,
    file: Arc<FileMeta>,
}

/// An immutable set of SST files of one column family, by level.
#[derive(Debug, Clone)]
pub struct Version {
    cf: ColumnFamilyId,
    /// L0 overlapping, L1+ sorted; cloned in O(1) per level.
    levels: Vec<Level>,
    /// Every file by number: finds a deleted file's level and order key,
    /// and refuses a number added twice, in O(log n).
    files: OrdMap<FileNumber, Placed>,
    /// Every blob file the SSTs above may reference, by number.
    blob_files: OrdMap<FileNumber, Arc<BlobFileMeta>>,
    /// What the SSTs above reference in each blob file: exact, kept by the
    /// builder from each added and deleted SST's `blob_refs`.
    blob_live: OrdMap<FileNumber, BlobLive>,
    log_number: u64,
    next_file_number: FileNumber,
    last_seqno: SeqNo,
    /// Given to the metadata of every file added through this version.
    queue: ObsoleteFiles,
}

impl Version {
    /// Returns an empty version of `num_levels` levels (1 to
    /// [`NUM_LEVELS_MAX`]) for column family `cf`; the files that edits add
    /// to it and its successors queue their numbers on `queue` once removed
    /// and unreachable.
    pub fn new(
        cf: ColumnFamilyId,
        num_levels: usize,
        queue: ObsoleteFiles,
    ) -> crate::Result<Version> {
        if num_levels == 0 || num_levels > NUM_LEVELS_MAX {
            return Err(crate::Error::InvalidArgument(format!(
                "{num_levels} levels: must be 1 to {NUM_LEVELS_MAX}"
            )));
        }
        let levels = (0..num_levels)
            .map(|l| {
                if l == 0 {
                    Level::overlapping()
                } else {
                    Level::sorted()
                }
            })
            .collect();
        Ok(Version {
            cf,
            levels,
            files: OrdMap::new(),
            blob_files: OrdMap::new(),
            blob_live: OrdMap::new(),
            log_number: 0,
            next_file_number: 1,
            last_seqno: 0,
            queue,
        })
    }

    /// Returns the column family whose files these are.
    pub fn column_family(&self) -> ColumnFamilyId {
        self.cf
    }

    /// Returns the number of levels.
    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// Returns the WAL number below which no log holds unflushed data.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Returns the next file number to allocate: above every file's number.
    pub fn next_file_number(&self) -> FileNumber {
        self.next_file_number
    }

    /// Returns the last sequence number the manifest recorded.
    pub fn last_seqno(&self) -> SeqNo {
        self.last_seqno
    }

    /// Returns level `level`, if the version has it.
    pub fn level(&self, level: usize) -> Option<&Level> {
        self.levels.get(level)
    }

    /// Returns the number of files in `level` (0 past the last level).
    pub fn level_len(&self, level: usize) -> usize {
        self.levels.get(level).map_or(0, Level::len)
    }

    /// Returns the bytes of the files in `level` (0 past the last level).
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels.get(level).map_or(0, Level::bytes)
    }

    /// Returns the number of files in all levels.
    pub fn total_files(&self) -> usize {
        self.files.len()
    }

    /// Returns the level and metadata of file `number`, if the version has it.
    pub fn file(&self, number: FileNumber) -> Option<(u8, &Arc<FileMeta>)> {
        self.files.get(&number).map(|p| (p.level, &p.file))
    }

    /// Returns blob file `number`, if the version has it.
    pub fn blob_file(&self, number: FileNumber) -> Option<&Arc<BlobFileMeta>> {
        self.blob_files.get(&number)
    }

    /// Iterates every blob file, by number.
    pub fn blob_files(&self) -> impl Iterator<Item = &Arc<BlobFileMeta>> + '_ {
        self.blob_files.values()
    }

    /// Returns the number of blob files.
    pub fn blob_file_count(&self) -> usize {
        self.blob_files.len()
    }

    /// Returns what the version's SSTs reference in blob file `number`
    /// (zero when none does).
    pub fn blob_live(&self, number: FileNumber) -> BlobLive {
        self.blob_live.get(&number).copied().unwrap_or_default()
    }

    /// Iterates every file with its level: L0 newest first, then each level
    /// by smallest key.
    pub fn iter(&self) -> impl Iterator<Item = (u8, &Arc<FileMeta>)> + '_ {
        self.levels
            .iter()
            .enumerate()
            .flat_map(|(l, level)| level.iter().map(move |f| (l as u8, f)))
    }

    /// Returns the files whose user-key range contains `user_key` (inline,
    /// no allocation for a handful), in the
    /// order a point lookup must ask them: L0 newest first, then at most one
    /// file per level from L1 down.
    pub fn files_for_key(&self, user_key: &[u8]) -> FilesForKey<'_> {
        let mut out = FilesForKey::new();
        for (l, level) in self.levels.iter().enumerate() {
            level.files_containing(user_key, |f| out.push((l as u8, f)));
        }
        out
    }

    /// Returns the files of `level` whose user-key range meets `[start, end]`
    /// (inclusive; `None` unbounded), in the level's order. Empty past the
    /// last level.
    pub fn files_in_range(
        &self,
        level: usize,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Vec<&Arc<FileMeta>> {
        let mut out = Vec::new();
        if let Some(l) = self.levels.get(level) {
            l.files_overlapping(start, end, &mut out);
        }
        out
    }

    /// Checks every invariant in full (O(files)); returns what is wrong.
    pub fn check(&self) -> Result<(), String> {
        let mut count = 0;
        for (l, level) in self.levels.iter().enumerate() {
            level.check().map_err(|e| format!("level {l}: {e}"))?;
            count += level.len();
            for f in level.iter() {
                self.check_placed(l as u8, f)?;
            }
        }
        if count != self.files.len() {
            return Err(format!(
                "levels hold {count} files, the number index {}",
                self.files.len()
            ));
        }
        for (&n, b) in &self.blob_files {
            if n != b.number() || n >= self.next_file_number || self.files.contains_key(&n) {
                return Err(format!("blob file {n} is misplaced or its number reused"));
            }
        }
        let mut live: std::collections::BTreeMap<FileNumber, BlobLive> = Default::default();
        for (_, f) in self.iter() {
            for &(blob, bytes) in &f.desc().blob_refs {
                let e = live.entry(blob).or_default();
                e.bytes += bytes;
                e.files += 1;
            }
        }
        let kept: std::collections::BTreeMap<FileNumber, BlobLive> =
            self.blob_live.iter().map(|(k, v)| (*k, *v)).collect();
        if live != kept {
            return Err(format!(
                "blob references: the SSTs hold {live:?}, the version counts {kept:?}"
            ));
        }
        if let Some(n) = live.keys().find(|n| !self.blob_files.contains_key(n)) {
            return Err(format!(
                "an SST references blob file {n}, not in the version"
            ));
        }
        if let Some(n) = self.blob_files.keys().find(|n| !live.contains_key(n)) {
            return Err(format!("blob file {n} is referenced by no SST"));
        }
        Ok(())
    }

    /// Checks the invariants of one level only: what a build touched.
    pub(crate) fn check_level(&self, level: usize) -> Result<(), String> {
        let l = &self.levels[level];
        l.check().map_err(|e| format!("level {level}: {e}"))?;
        l.iter().try_for_each(|f| self.check_placed(level as u8, f))
    }

    fn check_placed(&self, level: u8, f: &Arc<FileMeta>) -> Result<(), String> {
        match self.files.get(&f.number()) {
            Some(p) if p.level == level && Arc::ptr_eq(&p.file, f) => {}
            _ => {
                return Err(format!(
                    "file {} in level {level} is not so indexed",
                    f.number()
                ))
            }
        }
        if f.number() >= self.next_file_number {
            return Err(format!(
                "file {} not below next file number {}",
                f.number(),
                self.next_file_number
            ));
        }
        Ok(())
    }
}
