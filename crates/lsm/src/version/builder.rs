//! `VersionBuilder`: applies version edits to a copy of an immutable
//! version, outside any lock, and yields the next version.
//!
//! The copy shares everything with its base: each level and the number index
//! are persistent B-trees, so cloning the version is O(levels) `Arc` clones
//! and each added or deleted file copies O(log n) nodes of one level. An
//! edit that adds one file and deletes one in a level of 100,000 costs a few
//! microseconds, whatever the file count (`benches/version_install.rs`).
//!
//! Rules an edit must follow (else [`EditError`], and the builder keeps the
//! state it had before that edit):
//! - it belongs to the version's column family; its levels exist;
//! - a deleted file is in the level the edit names;
//! - an added number is not in the version (after the edit's deletions:
//!   deleting and adding the same number moves the file, and the moved file
//!   keeps its `Arc<FileMeta>`, so it must be described identically);
//! - an added L1+ file does not meet another file's user-key range there;
//! - added numbers are below the next file number (after the edit);
//! - the log number never goes backwards. The next file number and the last
//!   seqno are raised to the edit's, never lowered: concurrent jobs record
//!   them when they prepare their edits and may install in another order.
//!
//! Invariants: the base version is never modified; [`VersionBuilder::build`]
//! debug-asserts the invariants of every level the edits touched.
//!
//! Concurrency contract: a builder is owned by one thread and takes no lock.
//! Two builders on the same base would each miss the other's edits: the
//! installer (`crate::read_state`) serializes them by building under the
//! manifest lock against the version current at that moment.

use std::collections::HashMap;
use std::sync::Arc;

use super::{BlobFileMeta, EditError, FileMeta, FileNumber, Placed, Version, VersionEdit};

/// Applies edits to a base version; see the module doc.
#[derive(Debug)]
pub struct VersionBuilder {
    base: Arc<Version>,
    next: Version,
    /// Files deleted by the applied edits and not re-added (moved): the
    /// installer marks them obsolete once the new version is published.
    removed: HashMap<FileNumber, Arc<FileMeta>>,
    /// Blob files deleted by the applied edits.
    removed_blobs: Vec<Arc<BlobFileMeta>>,
    touched: Vec<bool>,
}

/// A built version and the files it no longer holds.
#[derive(Debug)]
pub struct BuiltVersion {
    /// The new version.
    pub version: Arc<Version>,
    /// The files the edits removed (moves excluded), to be marked obsolete
    /// when, and only when, `version` is installed.
    pub removed: Vec<Arc<FileMeta>>,
    /// The blob files the edits removed, likewise.
    pub removed_blobs: Vec<Arc<BlobFileMeta>>,
}

impl VersionBuilder {
    /// Starts from `base`, which stays unchanged.
    pub fn new(base: &Arc<Version>) -> VersionBuilder {
        VersionBuilder {
            base: base.clone(),
            next: (**base).clone(),
            removed: HashMap::new(),
            removed_blobs: Vec::new(),
            touched: vec![false; base.num_levels()],
        }
    }

    /// Returns the version the builder started from.
    pub fn base(&self) -> &Arc<Version> {
        &self.base
    }

    /// Applies one edit: all of it, or (on error) none of it.
    pub fn apply(&mut self, edit: &VersionEdit) -> Result<(), EditError> {
        // A clone is O(levels): the trees are shared until written.
        let mut next = self.next.clone();
        let mut removed = Vec::new();
        let mut touched = Vec::new();
        apply_to(&mut next, edit, &self.removed, &mut removed, &mut touched)?;
        let mut removed_blobs = apply_blobs(&mut next, edit)?;
        let released = removed
            .iter()
            .flat_map(|f| f.desc().blob_refs.iter().map(|&(b, _)| b))
            .chain(edit.added_blob_files.iter().map(|b| b.number));
        settle_blobs(&mut next, edit, released, &mut removed_blobs)?;
        self.next = next;
        self.removed_blobs.extend(removed_blobs);
        for file in removed {
            self.removed.insert(file.number(), file);
        }
        for (level, number) in touched {
            self.touched[usize::from(level)] = true;
            if let Some(n) = number {
                self.removed.remove(&n);
            }
        }
        Ok(())
    }

    /// Returns the new version and the files it removed.
    pub fn build(self) -> BuiltVersion {
        if cfg!(debug_assertions) {
            for (level, touched) in self.touched.iter().enumerate() {
                if *touched {
                    if let Err(e) = self.next.check_level(level) {
                        panic!("built version breaks an invariant: {e}");
                    }
                }
            }
            debug_assert_eq!(
                self.next.files.len(),
                self.next.levels.iter().map(|l| l.len()).sum::<usize>()
            );
        }
        BuiltVersion {
            version: Arc::new(self.next),
            removed: self.removed.into_values().collect(),
            removed_blobs: self.removed_blobs,
        }
    }
}

/// Applies `edit` to `v`. Deleted files go to `removed`; `touched` gets each
/// level written and, for an add that reuses an earlier deletion's `Arc`
/// (a move), that number.
fn apply_to(
    v: &mut Version,
    edit: &VersionEdit,
    earlier: &HashMap<FileNumber, Arc<FileMeta>>,
    removed: &mut Vec<Arc<FileMeta>>,
    touched: &mut Vec<(u8, Option<FileNumber>)>,
) -> Result<(), EditError> {
    if edit.column_family != v.cf {
        return Err(EditError::ColumnFamily {
            expected: v.cf,
            found: edit.column_family,
        });
    }
    if let Some(to) = edit.log_number {
        // Only flushes move it, in memtable order: a lower one is a bug.
        if to < v.log_number {
            return Err(EditError::WentBackwards {
                field: "log number",
                from: v.log_number,
                to,
            });
        }
        v.log_number = to;
    }
    // Jobs record these watermarks when they prepare their edits and install
    // in any order (a flush prepared before an ingestion may install after
    // it), so each edit can only raise them.
    if let Some(n) = edit.next_file_number {
        v.next_file_number = v.next_file_number.max(n);
    }
    if let Some(s) = edit.last_seqno {
        v.last_seqno = v.last_seqno.max(s);
    }
    // This edit's deletions by number: an add looks its number up here (a
    // move). A linear search made an edit replacing n files cost n^2 (a
    // full compaction of 10,000 files: 330 ms under the installer lock).
    let mut deleted: HashMap<FileNumber, Arc<FileMeta>> =
        HashMap::with_capacity(edit.deleted.len());
    let levels = v.levels.len();
    let check_level = |level: u8| {
        if usize::from(level) < levels {
            Ok(())
        } else {
            Err(EditError::LevelOutOfRange { level, levels })
        }
    };
    for &(level, number) in &edit.deleted {
        check_level(level)?;
        let missing = EditError::DeleteMissing { level, number };
        let placed = match v.files.get(&number) {
            Some(p) if p.level == level => p.file.clone(),
            _ => return Err(missing),
        };
        v.files.remove(&number);
        count_refs(v, &placed.desc().blob_refs, false);
        let found = v.levels[usize::from(level)].remove(&placed);
        debug_assert!(found, "the number index and the levels agree");
        touched.push((level, None));
        deleted.insert(number, placed);
    }
    for (level, desc) in &edit.added {
        let level = *level;
        check_level(level)?;
        desc.validate().map_err(EditError::InvalidFile)?;
        if let Some(p) = v.files.get(&desc.number) {
            return Err(EditError::DuplicateNumber {
                level: p.level,
                number: desc.number,
            });
        }
        if desc.number >= v.next_file_number {
            return Err(EditError::NumberNotAllocated {
                number: desc.number,
                next: v.next_file_number,
            });
        }
        // A move: the file was deleted by this edit or an earlier one of
        // this build; keep its `Arc` so that old versions and the new one
        // share one owner of the file.
        let moved = deleted
            .remove(&desc.number)
            .or_else(|| earlier.get(&desc.number).cloned());
        let file = match moved {
            // Out of L0, a new placement over the same file: the reader
            // kept for L0 stays with the versions that hold the file there.
            Some(f) if f.desc() == desc => f.placed(level),
            Some(_) => {
                return Err(EditError::InvalidFile(format!(
                    "file {} moved with a different description",
                    desc.number
                )))
            }
            None => Arc::new(FileMeta::at_level(desc.clone(), v.queue.clone(), level)),
        };
        v.levels[usize::from(level)].insert(level, file.clone())?;
        count_refs(v, &desc.blob_refs, true);
        v.files.insert(desc.number, Placed { level, file });
        touched.push((level, Some(desc.number)));
    }
    removed.extend(deleted.into_values());
    Ok(())
}

/// Applies the blob-file part of `edit` to `v` (after its SST part, so the
/// next file number is the edit's); returns the blob files it removed.
fn apply_blobs(v: &mut Version, edit: &VersionEdit) -> Result<Vec<Arc<BlobFileMeta>>, EditError> {
    let mut removed = Vec::new();
    for &number in &edit.deleted_blob_files {
        if let Some(live) = v.blob_live.get(&number) {
            return Err(EditError::InvalidFile(format!(
                "blob file {number} is still referenced by {} files",
                live.files
            )));
        }
        match v.blob_files.remove(&number) {
            Some(b) => removed.push(b),
            None => return Err(EditError::BlobMissing { number }),
        }
    }
    for desc in &edit.added_blob_files {
        desc.validate().map_err(EditError::InvalidFile)?;
        if v.blob_files.contains_key(&desc.number) || v.files.contains_key(&desc.number) {
            return Err(EditError::InvalidFile(format!(
                "blob file {} reuses a number the version holds",
                desc.number
            )));
        }
        if desc.number >= v.next_file_number {
            return Err(EditError::NumberNotAllocated {
                number: desc.number,
                next: v.next_file_number,
            });
        }
        let meta = Arc::new(BlobFileMeta::new(*desc, v.queue.clone()));
        v.blob_files.insert(desc.number, meta);
    }
    Ok(removed)
}

/// Adds (or removes) one SST's references to the version's live counts.
fn count_refs(v: &mut Version, refs: &[(FileNumber, u64)], add: bool) {
    for &(blob, bytes) in refs {
        let mut live = v.blob_live.get(&blob).copied().unwrap_or_default();
        if add {
            live.bytes += bytes;
            live.files += 1;
        } else {
            debug_assert!(
                live.files > 0 && live.bytes >= bytes,
                "blob {blob} counted below zero"
            );
            live.bytes = live.bytes.saturating_sub(bytes);
            live.files = live.files.saturating_sub(1);
        }
        if live.files == 0 {
            v.blob_live.remove(&blob);
        } else {
            v.blob_live.insert(blob, live);
        }
    }
}

/// After an edit: every referenced blob file must be in the version, and
/// a blob file the edit left without references leaves it (it is garbage
/// whole; its last reader's drop deletes it). The rule is a function of
/// the edits, so replaying the manifest reaches the same blob files.
/// `released` are the blob files the edit's deleted SSTs referenced and
/// the ones it added: the only ones it can have left unreferenced.
fn settle_blobs(
    v: &mut Version,
    edit: &VersionEdit,
    released: impl Iterator<Item = FileNumber>,
    removed: &mut Vec<Arc<BlobFileMeta>>,
) -> Result<(), EditError> {
    for (_, d) in &edit.added {
        if let Some(&(b, _)) = d
            .blob_refs
            .iter()
            .find(|(b, _)| !v.blob_files.contains_key(b))
        {
            return Err(EditError::InvalidFile(format!(
                "file {} references blob file {b}, which the version does not hold",
                d.number
            )));
        }
    }
    for n in released {
        if !v.blob_live.contains_key(&n) {
            if let Some(b) = v.blob_files.remove(&n) {
                removed.push(b);
            }
        }
    }
    Ok(())
}
