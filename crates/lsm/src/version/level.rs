//! `Level`: the files of one level of a version, as a persistent ordered set
//! (`imbl::OrdSet`, a B-tree whose nodes of up to 64 entries are shared by
//! `Arc`). Cloning a level is one `Arc` clone; adding or removing a file
//! copies only the nodes on its path, O(log n) of them, so a version that
//! changes a few files in a level of 100,000 shares all the rest with the
//! version it was built from.
//!
//! Why a B-tree set rather than a `Vec` of `Arc`'d chunks: the chunk list
//! itself would be copied at each change (n/128 pointers, growing with the
//! file count), and the set also keeps the order without shifting.
//!
//! Two orders:
//! - L0 ([`Level::overlapping`]): files may overlap; ordered newest first, by
//!   largest seqno descending, then file number descending. A flushed or
//!   ingested file takes seqnos above every older L0 file's, so this is age.
//! - L1+ ([`Level::sorted`]): files are ordered by smallest user key and
//!   their user-key ranges are disjoint (`prev.largest.user_key <
//!   next.smallest.user_key`), so at most one file of the level can hold a
//!   given user key and a lookup is one descent of the tree.
//!
//! Invariants (checked by [`Level::check`], debug-asserted after each build):
//! - the order above holds, and in L1+ ranges are disjoint;
//! - `bytes` is the sum of the files' sizes.
//!
//! Concurrency contract: a `Level` is a value; once in a published version
//! it is never mutated (the builder mutates its own copy-on-write clone).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use imbl::OrdSet;

use super::{EditError, FileMeta};

/// An L0 entry: ordered newest first.
#[derive(Debug, Clone)]
struct ByAge(Arc<FileMeta>);

impl ByAge {
    fn rank(&self) -> (std::cmp::Reverse<u64>, std::cmp::Reverse<u64>) {
        let d = self.0.desc();
        (
            std::cmp::Reverse(d.largest_seqno),
            std::cmp::Reverse(d.number),
        )
    }
}

impl Ord for ByAge {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}
impl PartialOrd for ByAge {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for ByAge {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for ByAge {}

/// An L1+ entry: ordered by smallest user key, which is unique in a level
/// whose ranges are disjoint. `Borrow<[u8]>` lets the set be searched by a
/// user key; it agrees with `Ord` as `Borrow` requires.
#[derive(Debug, Clone)]
struct ByKey(Arc<FileMeta>);

impl Borrow<[u8]> for ByKey {
    fn borrow(&self) -> &[u8] {
        self.0.smallest().user_key()
    }
}
impl Ord for ByKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .smallest()
            .user_key()
            .cmp(other.0.smallest().user_key())
    }
}
impl PartialOrd for ByKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for ByKey {}

#[derive(Debug, Clone)]
enum Files {
    Overlapping(OrdSet<ByAge>),
    Sorted(OrdSet<ByKey>),
}

/// The files of one level.
#[derive(Debug, Clone)]
pub struct Level {
    files: Files,
    /// In L1+, the files that may hold range tombstones (`FileDesc::
    /// range_tombstones`), so that an iterator finds them without visiting
    /// the others; empty in L0, whose files an iterator opens anyway.
    with_tombstones: OrdSet<ByKey>,
    /// The sum of the files' sizes.
    bytes: u64,
}

impl Level {
    /// Returns an empty L0: overlapping files, newest first.
    pub fn overlapping() -> Level {
        Level {
            files: Files::Overlapping(OrdSet::new()),
            with_tombstones: OrdSet::new(),
            bytes: 0,
        }
    }

    /// Returns an empty L1+ level: disjoint files, by smallest user key.
    pub fn sorted() -> Level {
        Level {
            files: Files::Sorted(OrdSet::new()),
            with_tombstones: OrdSet::new(),
            bytes: 0,
        }
    }

    /// Returns the number of files.
    pub fn len(&self) -> usize {
        match &self.files {
            Files::Overlapping(s) => s.len(),
            Files::Sorted(s) => s.len(),
        }
    }

    /// Returns true when the level holds no file.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns the total size of the level's files in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Iterates the files in the level's order (L0 newest first, L1+ by
    /// smallest key).
    pub fn iter(&self) -> Box<dyn Iterator<Item = &Arc<FileMeta>> + '_> {
        match &self.files {
            Files::Overlapping(s) => Box::new(s.iter().map(|e| &e.0)),
            Files::Sorted(s) => Box::new(s.iter().map(|e| &e.0)),
        }
    }

    /// Calls `visit` on each file whose user-key range contains `user_key`:
    /// in L0 all of them, newest first (a scan: L0 is kept small by
    /// compaction); in L1+ at most one, found by one tree descent.
    pub fn files_containing<'a>(
        &'a self,
        user_key: &[u8],
        mut visit: impl FnMut(&'a Arc<FileMeta>),
    ) {
        match &self.files {
            Files::Overlapping(s) => s
                .iter()
                .map(|e| &e.0)
                .filter(|f| f.desc().contains_user_key(user_key))
                .for_each(visit),
            Files::Sorted(s) => {
                if let Some(e) = s.get_prev(user_key) {
                    if e.0.desc().contains_user_key(user_key) {
                        visit(&e.0);
                    }
                }
            }
        }
    }

    /// Appends to `out` the files whose user-key range meets `[start, end]`
    /// (inclusive; `None` unbounded), in the level's order.
    pub fn files_overlapping<'a>(
        &'a self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        out: &mut Vec<&'a Arc<FileMeta>>,
    ) {
        self.collect_overlapping(start, end, false, out)
    }

    /// Calls `visit` on each file of L0 (an overlapping level) whose
    /// user-key range meets `[start, end]` (inclusive; `None` unbounded),
    /// newest first, without collecting them: every iterator's creation
    /// walks L0, and the vector was an allocation apiece. Stops at the
    /// first error. A sorted level visits nothing (its files are one
    /// source, opened as a cursor reaches them).
    pub fn try_for_each_overlapping_l0<'a, E>(
        &'a self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        mut visit: impl FnMut(&'a Arc<FileMeta>) -> Result<(), E>,
    ) -> Result<(), E> {
        if let Files::Overlapping(s) = &self.files {
            for e in s.iter() {
                if e.0.desc().overlaps(start, end) {
                    visit(&e.0)?;
                }
            }
        }
        Ok(())
    }

    /// Appends to `out` the files that may hold range tombstones and whose
    /// user-key range meets `[start, end]`: in L1+ without visiting the
    /// other files, in L0 by a scan of them all.
    pub fn files_with_range_tombstones<'a>(
        &'a self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        out: &mut Vec<&'a Arc<FileMeta>>,
    ) {
        self.collect_overlapping(start, end, true, out)
    }

    fn collect_overlapping<'a>(
        &'a self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        only_with_tombstones: bool,
        out: &mut Vec<&'a Arc<FileMeta>>,
    ) {
        match &self.files {
            Files::Overlapping(s) => {
                // A filtered extend grows the vector file by file: one
                // reservation instead (L0 is small, and each reallocation
                // is a call into the allocator on a reader's path).
                if !only_with_tombstones {
                    out.reserve(s.len());
                }
                out.extend(s.iter().map(|e| &e.0).filter(|f| {
                    (!only_with_tombstones || f.desc().range_tombstones)
                        && f.desc().overlaps(start, end)
                }))
            }
            Files::Sorted(s) => {
                let set = if only_with_tombstones {
                    &self.with_tombstones
                } else {
                    s
                };
                // Most levels hold no range tombstone, and every iterator
                // asks each level: no range walk over an empty set.
                if !set.is_empty() {
                    sorted_overlapping(set, start, end, out)
                }
            }
        }
    }

    /// In L1+, the first file whose largest user key is at or above
    /// `user_key`: the one that may hold it, else the next one. `None` in
    /// L0 and past the last file.
    pub fn file_at_or_after(&self, user_key: &[u8]) -> Option<&Arc<FileMeta>> {
        let Files::Sorted(s) = &self.files else {
            return None;
        };
        match s.get_prev(user_key) {
            Some(e) if e.0.largest().user_key() >= user_key => Some(&e.0),
            _ => s
                .range::<_, [u8]>((Bound::Excluded(user_key), Bound::Unbounded))
                .next()
                .map(|e| &e.0),
        }
    }

    /// In L1+, the last file whose smallest user key is at or below
    /// `user_key`. `None` in L0 and before the first file.
    pub fn file_at_or_before(&self, user_key: &[u8]) -> Option<&Arc<FileMeta>> {
        let Files::Sorted(s) = &self.files else {
            return None;
        };
        s.get_prev(user_key).map(|e| &e.0)
    }

    /// In L1+, the file after `file` (a file of this level). `None` in L0.
    pub fn next_file(&self, file: &FileMeta) -> Option<&Arc<FileMeta>> {
        let Files::Sorted(s) = &self.files else {
            return None;
        };
        let after = Bound::Excluded(file.smallest().user_key());
        s.range::<_, [u8]>((after, Bound::Unbounded))
            .next()
            .map(|e| &e.0)
    }

    /// In L1+, the file before `file` (a file of this level). `None` in L0.
    pub fn prev_file(&self, file: &FileMeta) -> Option<&Arc<FileMeta>> {
        let Files::Sorted(s) = &self.files else {
            return None;
        };
        let before = Bound::Excluded(file.smallest().user_key());
        s.range::<_, [u8]>((Bound::Unbounded, before))
            .next_back()
            .map(|e| &e.0)
    }

    /// In L1+, the first file. `None` in L0.
    pub fn first_file(&self) -> Option<&Arc<FileMeta>> {
        match &self.files {
            Files::Sorted(s) => s.get_min().map(|e| &e.0),
            Files::Overlapping(_) => None,
        }
    }

    /// In L1+, the last file. `None` in L0.
    pub fn last_file(&self) -> Option<&Arc<FileMeta>> {
        match &self.files {
            Files::Sorted(s) => s.get_max().map(|e| &e.0),
            Files::Overlapping(_) => None,
        }
    }

    /// Adds a file. In L1+ fails with [`EditError::Overlap`] (and changes
    /// nothing) when its range meets a neighbour's. `level` only names the
    /// level in the error.
    pub(crate) fn insert(&mut self, level: u8, file: Arc<FileMeta>) -> Result<(), EditError> {
        let size = file.size();
        match &mut self.files {
            Files::Overlapping(s) => {
                let old = s.insert(ByAge(file));
                debug_assert!(old.is_none(), "file numbers are unique in a version");
            }
            Files::Sorted(s) => {
                let d = file.desc();
                let overlap = |other: &Arc<FileMeta>| EditError::Overlap {
                    level,
                    number: d.number,
                    other: other.number(),
                };
                // The neighbour before: the last file starting at or below
                // the new smallest key (equal smallest keys overlap too).
                if let Some(prev) = s.get_prev(d.smallest.user_key()) {
                    if prev.0.largest().user_key() >= d.smallest.user_key() {
                        return Err(overlap(&prev.0));
                    }
                }
                // The neighbour after: the first file starting above it.
                if let Some(next) = s.get_next(d.smallest.user_key()) {
                    if next.0.smallest().user_key() <= d.largest.user_key() {
                        return Err(overlap(&next.0));
                    }
                }
                if file.desc().range_tombstones {
                    self.with_tombstones.insert(ByKey(file.clone()));
                }
                s.insert(ByKey(file));
            }
        }
        self.bytes += size;
        Ok(())
    }

    /// Removes the file (found by its order key); returns false if it is not
    /// in the level.
    pub(crate) fn remove(&mut self, file: &Arc<FileMeta>) -> bool {
        let removed = match &mut self.files {
            Files::Overlapping(s) => s.remove(&ByAge(file.clone())).is_some(),
            Files::Sorted(s) => {
                let removed = s.remove(file.smallest().user_key()).is_some();
                if removed {
                    // The same file: smallest keys are unique in the level.
                    self.with_tombstones.remove(file.smallest().user_key());
                }
                removed
            }
        };
        if removed {
            self.bytes -= file.size();
        }
        removed
    }

    /// Checks the level's invariants in full (O(n)); returns what is wrong.
    pub fn check(&self) -> Result<(), String> {
        let mut bytes = 0u64;
        let mut prev: Option<&Arc<FileMeta>> = None;
        for f in self.iter() {
            bytes += f.size();
            f.desc().validate()?;
            if let (Some(p), Files::Sorted(_)) = (prev, &self.files) {
                if p.largest().user_key() >= f.smallest().user_key() {
                    return Err(format!(
                        "files {} and {} overlap or are out of order",
                        p.number(),
                        f.number()
                    ));
                }
            }
            if let (Some(p), Files::Overlapping(_)) = (prev, &self.files) {
                let (pd, fd) = (p.desc(), f.desc());
                if (pd.largest_seqno, pd.number) <= (fd.largest_seqno, fd.number) {
                    return Err(format!(
                        "L0 files {} and {} are not newest first",
                        pd.number, fd.number
                    ));
                }
            }
            prev = Some(f);
        }
        if let Files::Sorted(s) = &self.files {
            let flagged = s.iter().filter(|e| e.0.desc().range_tombstones).count();
            let listed = self.with_tombstones.iter().all(|e| {
                e.0.desc().range_tombstones
                    && s.get(e.0.smallest().user_key())
                        .is_some_and(|f| Arc::ptr_eq(&f.0, &e.0))
            });
            if flagged != self.with_tombstones.len() || !listed {
                return Err(format!(
                    "{flagged} files may hold range tombstones, {} listed as such",
                    self.with_tombstones.len()
                ));
            }
        }
        if bytes != self.bytes {
            return Err(format!(
                "level bytes {} but files sum to {bytes}",
                self.bytes
            ));
        }
        Ok(())
    }
}

/// The files of a sorted set whose user-key range meets `[start, end]`
/// (inclusive; `None` unbounded), in key order.
fn sorted_overlapping<'a>(
    s: &'a OrdSet<ByKey>,
    start: Option<&[u8]>,
    end: Option<&[u8]>,
    out: &mut Vec<&'a Arc<FileMeta>>,
) {
    // The first candidate is the file holding `start`, if any: it is the
    // last one whose smallest key is at or below it.
    let from = start.map(|k| match s.get_prev(k) {
        Some(e) => e.0.smallest().user_key(),
        None => k,
    });
    let lower = from.map_or(Bound::Unbounded, Bound::Included);
    let upper = end.map_or(Bound::Unbounded, Bound::Included);
    out.extend(
        s.range::<_, [u8]>((lower, upper))
            .map(|e| &e.0)
            .filter(|f| f.desc().overlaps(start, end)),
    );
}
