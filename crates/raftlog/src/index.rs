//! The in-memory index: for every group, where each live entry is on disk, and
//! the group's keys with their values.
//!
//! Invariants:
//! - A group's runs are in index order, contiguous (run `i + 1` starts where run
//!   `i` ends) and never empty.
//! - Runs' files are in write order: a run never lives in an older file than the
//!   run before it, except that runs in the rewrite queue always come first
//!   (they hold copies of the oldest data). So the data a purge must copy out of
//!   the oldest files is always a prefix of the log.
//!
//! - A group's runs are stored in 24 bytes each and its first keys in a sorted
//!   `Vec` (see `index/runs.rs` and `index/keys.rs` for their forms and
//!   invariants); callers read and write them as `Run`s and `KvSlot`s.
//!
//! Concurrency: the shard map's lock is taken for writing only to add or remove a
//! group; a group's own `RwLock` guards its runs and keys. So a reader of one
//! group never waits for a writer of another.

mod keys;
mod runs;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{RwLock, RwLockWriteGuard};
use rustc_hash::FxHashMap;

use crate::engine::IndexStats;
use crate::format::{FileId, Queue, SEQ_MAX};
use crate::log_batch::Item;

pub(crate) use keys::Keys;
pub(crate) use runs::Runs;

/// A file id packed into 32 bits for the index: the top bit is set for the
/// rewrite queue, the rest is the sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct FileRef(u32);

impl FileRef {
    pub const REWRITE_BIT: u32 = 1 << 31;

    pub fn new(id: FileId) -> FileRef {
        debug_assert!(id.seq < Self::REWRITE_BIT as u64 && id.seq <= SEQ_MAX);
        match id.queue {
            Queue::Append => FileRef(id.seq as u32),
            Queue::Rewrite => FileRef(id.seq as u32 | Self::REWRITE_BIT),
        }
    }

    pub fn id(self) -> FileId {
        if self.0 & Self::REWRITE_BIT != 0 {
            FileId {
                queue: Queue::Rewrite,
                seq: (self.0 & !Self::REWRITE_BIT) as u64,
            }
        } else {
            FileId {
                queue: Queue::Append,
                seq: self.0 as u64,
            }
        }
    }

    pub fn is_rewrite(self) -> bool {
        self.0 & Self::REWRITE_BIT != 0
    }
}

/// Where a batch record is: its file, offset and length (header included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct RecordLoc {
    pub file: FileRef,
    pub offset: u32,
    pub len: u32,
}

/// Consecutive live entries that sit in one entries item of one record, as
/// callers see them; the index stores them in 24 bytes (`index/runs.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    /// Index of the first live entry.
    pub first: u64,
    /// Number of live entries.
    pub count: u32,
    /// Position of `first` within the item (entries before it were compacted).
    pub skip: u32,
    pub record: RecordLoc,
    /// Offset of the item's length table in the record's payload.
    pub body_offset: u32,
    /// Number of entries in the whole item.
    pub item_count: u32,
}

impl Run {
    /// The run of a whole entries item.
    pub fn new(first: u64, count: u32, record: RecordLoc, body_offset: u32) -> Run {
        Run {
            first,
            count,
            skip: 0,
            record,
            body_offset,
            item_count: count,
        }
    }

    /// One past the index of the last live entry.
    pub fn end(&self) -> u64 {
        self.first + self.count as u64
    }

    /// Returns the location of entry `index`, which must be in the run.
    pub fn entry(&self, index: u64) -> EntryLoc {
        debug_assert!(index >= self.first && index < self.end());
        EntryLoc {
            record: self.record,
            body_offset: self.body_offset,
            item_count: self.item_count,
            position: self.skip + (index - self.first) as u32,
        }
    }
}

/// Where one entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryLoc {
    pub record: RecordLoc,
    pub body_offset: u32,
    pub item_count: u32,
    pub position: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KvSlot {
    pub value: Vec<u8>,
    pub file: FileRef,
}

/// One group's live entries and keys.
#[derive(Debug, Default)]
pub(crate) struct GroupIndex {
    pub runs: Runs,
    pub kvs: Keys,
    /// Bytes of the group's entries that purge copied into the rewrite queue,
    /// counted as they were copied (see [`GroupIndex::rewrite_bytes`]).
    pub copied_bytes: u64,
}

/// What applying an item did that purge must know about.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ApplyEffect {
    /// Data located in the rewrite queue was dropped or replaced, so the rewrite
    /// queue now holds copies that only this item's record keeps from coming back.
    pub shadows_rewrite: bool,
}

impl GroupIndex {
    pub fn first_index(&self) -> Option<u64> {
        self.runs.front().map(|r| r.first)
    }

    pub fn last_index(&self) -> Option<u64> {
        self.runs.back().map(|r| r.end() - 1)
    }

    pub fn entry_count(&self) -> u64 {
        self.runs.iter().map(|r| r.count as u64).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty() && self.kvs.is_empty()
    }

    /// Finds the run holding `index`.
    pub fn find(&self, index: u64) -> Option<Run> {
        // Runs are sorted: binary search on their first index. They are
        // contiguous except, transiently, during recovery (see `append`).
        let i = self.runs.starting_at_or_before(index).checked_sub(1)?;
        let run = self.runs.get(i)?;
        (index < run.end()).then_some(run)
    }

    /// Returns the runs that hold entries `begin..end`, each cut to that range,
    /// in index order; or, if the group does not hold one of them, the first
    /// such index. Costs a binary search and one `Run` per run in the range,
    /// never anything per entry.
    pub fn runs_in(&self, begin: u64, end: u64) -> Result<Vec<Run>, u64> {
        if begin >= end {
            return Ok(Vec::new());
        }
        let Some(first_run) = self.runs.starting_at_or_before(begin).checked_sub(1) else {
            return Err(begin);
        };
        let mut out = Vec::new();
        let mut next = begin;
        for run in self.runs.iter_from(first_run) {
            if next >= end {
                break;
            }
            // Runs are contiguous, except transiently during recovery.
            if run.first > next || run.end() <= next {
                return Err(next);
            }
            let stop = run.end().min(end);
            out.push(Run {
                first: next,
                count: (stop - next) as u32,
                skip: run.skip + (next - run.first) as u32,
                ..run
            });
            next = stop;
        }
        if next < end {
            return Err(next);
        }
        Ok(out)
    }

    /// Appends entries with Raft semantics: indexes at or below the last one
    /// replace it and all after. A gap past the last index starts the log anew,
    /// except in `replay`: there a gap is a record purge deleted because a later
    /// record replaced its entries, and that later record fills the hole, so
    /// the runs before it are kept (see `close_holes`).
    fn append(&mut self, run: Run, replay: bool) -> ApplyEffect {
        let mut effect = ApplyEffect::default();
        match self.last_index() {
            Some(last) if run.first <= last => {
                // Drop the conflicting suffix.
                while let Some(mut back) = self.runs.back() {
                    if back.first >= run.first {
                        effect.shadows_rewrite |= back.record.file.is_rewrite();
                        self.runs.pop_back();
                    } else {
                        if back.end() > run.first {
                            effect.shadows_rewrite |= back.record.file.is_rewrite();
                            back.count = (run.first - back.first) as u32;
                            self.runs.set(self.runs.len() - 1, back);
                        }
                        break;
                    }
                }
            }
            Some(last) if run.first > last + 1 && !replay => {
                effect.shadows_rewrite |= self.runs.files().any(FileRef::is_rewrite);
                self.runs.clear();
            }
            _ => {}
        }
        self.runs.push_back(run);
        effect
    }

    /// Drops the runs before the last hole, so the log is contiguous again: a
    /// hole that recovery's replay did not fill means the log restarted there.
    /// Returns true if anything was dropped.
    pub fn close_holes(&mut self) -> bool {
        let mut keep_from = 0;
        let mut end = None;
        for (i, run) in self.runs.iter().enumerate() {
            if end.is_some_and(|e| e != run.first) {
                keep_from = i;
            }
            end = Some(run.end());
        }
        self.runs.drop_front(keep_from);
        keep_from > 0
    }

    /// Applies an item to this group.
    fn apply_local(&mut self, item: &Item<'_>, record: RecordLoc, replay: bool) -> ApplyEffect {
        match *item {
            Item::Entries {
                first_index,
                count,
                body_offset,
                ..
            } => self.append(Run::new(first_index, count, record, body_offset), replay),
            Item::Put { key, value, .. } => self.put(key, value, record.file),
            Item::Delete { key, .. } => ApplyEffect {
                shadows_rewrite: self.kvs.remove(key).is_some_and(|s| s.file.is_rewrite()),
            },
            Item::CompactTo { index, .. } => self.compact_to(index).1,
            Item::PurgedBelow { .. } => ApplyEffect::default(),
            Item::RemoveGroup { .. } => {
                // Emptied, the group leaves the map (see `apply_all`).
                let shadows_rewrite = self.runs.files().any(FileRef::is_rewrite)
                    || self.kvs.values().any(|s| s.file.is_rewrite());
                *self = GroupIndex::default();
                ApplyEffect { shadows_rewrite }
            }
        }
    }

    /// Sets `key` to `value`, reusing the old value's buffer when the key exists
    /// (state keys are overwritten on every write).
    fn put(&mut self, key: &[u8], value: &[u8], file: FileRef) -> ApplyEffect {
        if let Some(slot) = self.kvs.get_mut(key) {
            let shadows_rewrite = slot.file.is_rewrite();
            slot.value.clear();
            slot.value.extend_from_slice(value);
            slot.file = file;
            return ApplyEffect { shadows_rewrite };
        }
        self.kvs.insert_new(
            key,
            KvSlot {
                value: value.to_vec(),
                file,
            },
        );
        ApplyEffect::default()
    }

    /// Drops entries below `index`; returns how many.
    pub fn compact_to(&mut self, index: u64) -> (u64, ApplyEffect) {
        let mut effect = ApplyEffect::default();
        let mut dropped = 0;
        while let Some(mut front) = self.runs.front() {
            if front.first >= index {
                break;
            }
            effect.shadows_rewrite |= front.record.file.is_rewrite();
            if front.end() <= index {
                dropped += front.count as u64;
                self.runs.pop_front();
            } else {
                let d = index - front.first;
                front.first = index;
                front.skip += d as u32;
                front.count -= d as u32;
                self.runs.set(0, front);
                dropped += d;
                break;
            }
        }
        (dropped, effect)
    }

    /// Bytes of the group's entries in the rewrite queue, as purge counted
    /// them when it copied them: what copying them again would cost. Nothing
    /// lowers the count when entries are dropped (a compaction does not know
    /// the sizes of what it drops), so it is an upper bound until the next
    /// compaction of the rewrite queue counts the group's copies afresh; a
    /// group with no entry left in the rewrite queue has none. Copies made
    /// before the engine was opened are not counted until then.
    pub fn rewrite_bytes(&self) -> u64 {
        match self.runs.front() {
            Some(r) if r.record.file.is_rewrite() => self.copied_bytes,
            _ => 0,
        }
    }

    /// Returns the oldest append-queue file this group needs, if any.
    pub fn oldest_append_file(&self) -> Option<u64> {
        // Rewrite-queue runs come first; append runs are in file order.
        let runs = self
            .runs
            .files()
            .find(|f| !f.is_rewrite())
            .map(|f| f.id().seq);
        let kvs = self
            .kvs
            .values()
            .filter(|s| !s.file.is_rewrite())
            .map(|s| s.file.id().seq)
            .min();
        match (runs, kvs) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Approximate heap bytes used by this group: its shared cell (reference
    /// counts, lock and this struct), its runs and its keys. The shard map's
    /// slot is counted by [`Index::stats`].
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<GroupCell>() + self.runs.heap_bytes() + self.kvs.heap_bytes()
    }
}

/// What each group's `Arc` allocates: two reference counts, then the lock
/// with the group. (A reader clones the `Arc` and releases the shard before
/// it locks the group.)
type GroupCell = (usize, usize, RwLock<GroupIndex>);

/// One shard: the groups whose ids hash to it. Group ids are integers chosen by
/// the caller, not by an attacker, so a fast non-keyed hash is fine.
type Shard = RwLock<FxHashMap<u64, Arc<RwLock<GroupIndex>>>>;

/// The sharded index of all groups.
#[derive(Debug)]
pub(crate) struct Index {
    shards: Box<[Shard]>,
    /// The group [`Index::oldest_append_file`] last found holding the oldest
    /// append file: usually it still does, and then no other group is visited.
    oldest_holder: AtomicU64,
}

const SHARDS: usize = 64;

impl Index {
    pub fn new() -> Self {
        Index {
            shards: (0..SHARDS)
                .map(|_| RwLock::new(FxHashMap::default()))
                .collect(),
            oldest_holder: AtomicU64::new(0),
        }
    }

    fn shard(&self, group: u64) -> &Shard {
        // Fibonacci hashing spreads consecutive group ids over the shards.
        let h = group.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58;
        &self.shards[h as usize % SHARDS]
    }

    /// Returns the group's index, if the group exists.
    pub fn group(&self, group: u64) -> Option<Arc<RwLock<GroupIndex>>> {
        self.shard(group).read().get(&group).cloned()
    }

    /// Returns the group's last index, without taking a reference to the
    /// group (the write path's continuity check asks this for every run).
    pub fn last_index(&self, group: u64) -> Option<u64> {
        self.shard(group).read().get(&group)?.read().last_index()
    }

    fn group_or_insert(&self, group: u64) -> Arc<RwLock<GroupIndex>> {
        if let Some(g) = self.group(group) {
            return g;
        }
        self.shard(group).write().entry(group).or_default().clone()
    }

    /// Applies the decoded items of one record, in order.
    pub fn apply_record(&self, items: &[Item<'_>], record: RecordLoc, replay: bool) -> ApplyEffect {
        self.apply_all(items.iter().map(|item| (item.clone(), record)), replay)
    }

    /// Applies items, each with its record, in order. Consecutive items of one
    /// group (a batch holds a group's entries, state and compaction together;
    /// an index section lists a group's changes together) take the group's
    /// lock once, and an emptied group leaves the map once, at the end.
    pub fn apply_all<'a>(
        &self,
        items: impl IntoIterator<Item = (Item<'a>, RecordLoc)>,
        replay: bool,
    ) -> ApplyEffect {
        let mut effect = ApplyEffect::default();
        let mut items = items.into_iter().peekable();
        while let Some((item, record)) = items.next() {
            if item.is_engine_wide() {
                continue;
            }
            let group = item.group();
            let g = self.group_or_insert(group);
            let mut guard: RwLockWriteGuard<'_, GroupIndex> = g.write();
            let mut next = Some((item, record));
            while let Some((item, record)) = next.take() {
                effect.shadows_rewrite |= guard.apply_local(&item, record, replay).shadows_rewrite;
                next = items.next_if(|(i, _)| i.group() == group && !i.is_engine_wide());
            }
            let empty = guard.is_empty();
            drop(guard);
            if empty {
                self.drop_if_empty(group);
            }
        }
        effect
    }

    /// Returns every group id, in no set order.
    pub fn group_ids(&self) -> Vec<u64> {
        let mut ids = Vec::new();
        for s in self.shards.iter() {
            ids.extend(s.read().keys().copied());
        }
        ids
    }

    /// Calls `f` on every group, until it returns false. A shard's groups
    /// are listed under its lock and visited after it is released: a writer
    /// adding a group to the shard, and the readers queued behind it, never
    /// wait for the visit.
    fn visit(&self, mut f: impl FnMut(u64, &GroupIndex) -> bool) {
        let mut groups = Vec::new();
        for s in self.shards.iter() {
            groups.extend(s.read().iter().map(|(k, v)| (*k, v.clone())));
            for (id, g) in groups.drain(..) {
                if !f(id, &g.read()) {
                    return;
                }
            }
        }
    }

    /// Calls `f` on every group.
    pub fn for_each(&self, mut f: impl FnMut(u64, &GroupIndex)) {
        self.visit(|id, g| {
            f(id, g);
            true
        });
    }

    /// Returns the oldest append file any group needs, if a group needs one.
    /// No group can need a file older than `floor` (the oldest that exists),
    /// so the search stops at the first group that needs `floor`: it starts
    /// with the group that held the oldest file last time, which in a steady
    /// state still does, so that a purge with nothing to free visits one
    /// group instead of all of them.
    pub fn oldest_append_file(&self, floor: u64) -> Option<u64> {
        let hint = self.oldest_holder.load(Ordering::Relaxed);
        if let Some(g) = self.group(hint) {
            if g.read().oldest_append_file() == Some(floor) {
                return Some(floor);
            }
        }
        let mut oldest: Option<(u64, u64)> = None;
        self.visit(|id, g| {
            if let Some(seq) = g.oldest_append_file() {
                if oldest.is_none_or(|(o, _)| seq < o) {
                    oldest = Some((seq, id));
                }
            }
            oldest.is_none_or(|(o, _)| o > floor)
        });
        let (seq, holder) = oldest?;
        self.oldest_holder.store(holder, Ordering::Relaxed);
        Some(seq)
    }

    /// Calls `f` on every group, with write access.
    pub fn for_each_mut(&self, mut f: impl FnMut(&mut GroupIndex)) {
        for s in self.shards.iter() {
            for g in s.read().values() {
                f(&mut g.write());
            }
        }
    }

    /// Ends a replay (recovery's, or a tool's through `inspect.rs`): a hole
    /// left after the whole replay means the log restarted there, so the runs
    /// before it go. Runs grew by doubling during the replay: the slack is
    /// given back. Returns true if any runs were dropped.
    pub fn finish_replay(&self) -> bool {
        let mut holes = false;
        self.for_each_mut(|g| {
            holes |= g.close_holes();
            // A hole may have left runs too far from the base to be narrow.
            if g.runs.has_wide() {
                g.runs.rebase();
            }
            g.runs.shrink_to_fit();
        });
        holes
    }

    /// Returns counts and memory of the index.
    pub fn stats(&self) -> IndexStats {
        let mut s = IndexStats::default();
        let mut run_bytes = 0u64;
        // Each shard map's table: a slot (key and `Arc`) and a control byte
        // per bucket.
        for shard in self.shards.iter() {
            let map = shard.read();
            let slot = std::mem::size_of::<(u64, Arc<RwLock<GroupIndex>>)>() + 1;
            let buckets = (map.capacity() * 8 / 7).next_power_of_two();
            s.memory_bytes += (buckets * slot) as u64;
        }
        self.for_each(|_, g| {
            if g.is_empty() {
                return;
            }
            s.groups += 1;
            s.entries += g.entry_count();
            s.keys += g.kvs.len() as u64;
            s.memory_bytes += g.memory_bytes() as u64;
            run_bytes += g.runs.heap_bytes() as u64;
        });
        if s.entries > 0 {
            s.entry_bytes_per_entry = run_bytes as f64 / s.entries as f64;
        }
        s
    }

    /// Removes a group's entry if it holds nothing (after compaction and deletes).
    pub fn drop_if_empty(&self, group: u64) {
        let mut shard = self.shard(group).write();
        if shard.get(&group).is_some_and(|g| g.read().is_empty()) {
            shard.remove(&group);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    impl GroupIndex {
        fn append_live(&mut self, run: Run) -> ApplyEffect {
            self.append(run, false)
        }
    }

    #[test]
    fn replay_keeps_runs_across_a_hole_until_it_is_filled() {
        let mut g = GroupIndex::default();
        g.append(run(1, 9, 1), true);
        g.append(run(11, 8, 3), true);
        assert!(g.find(10).is_none());
        g.append(run(10, 1, 4), true);
        assert!(!g.close_holes());
        assert_eq!((g.first_index(), g.last_index()), (Some(1), Some(10)));
        g.append(run(20, 1, 5), true);
        assert!(g.close_holes());
        assert_eq!((g.first_index(), g.last_index()), (Some(20), Some(20)));
    }

    fn run(first: u64, count: u32, seq: u64) -> Run {
        Run {
            first,
            count,
            skip: 0,
            record: RecordLoc {
                file: FileRef::new(FileId {
                    queue: Queue::Append,
                    seq,
                }),
                offset: 0,
                len: 0,
            },
            body_offset: 0,
            item_count: count,
        }
    }

    #[test]
    fn append_truncates_conflicting_suffix() {
        let mut g = GroupIndex::default();
        g.append_live(run(1, 10, 1));
        g.append_live(run(11, 5, 2));
        g.append_live(run(8, 2, 3));
        assert_eq!(g.first_index(), Some(1));
        assert_eq!(g.last_index(), Some(9));
        assert_eq!(g.runs.len(), 2);
        assert_eq!(g.find(7).unwrap().record.file.id().seq, 1);
        assert_eq!(g.find(8).unwrap().record.file.id().seq, 3);
        assert!(g.find(10).is_none());
    }

    #[test]
    fn gap_restarts_the_log() {
        let mut g = GroupIndex::default();
        g.append_live(run(1, 3, 1));
        g.append_live(run(10, 1, 2));
        assert_eq!(g.first_index(), Some(10));
        assert_eq!(g.entry_count(), 1);
    }

    #[test]
    fn compact_splits_runs() {
        let mut g = GroupIndex::default();
        g.append_live(run(1, 10, 1));
        g.append_live(run(11, 10, 2));
        assert_eq!(g.compact_to(5).0, 4);
        let r = g.find(5).unwrap();
        assert_eq!((r.first, r.skip, r.count), (5, 4, 6));
        assert_eq!(r.entry(7).position, 6);
        assert_eq!(g.compact_to(15).0, 10);
        assert_eq!(g.first_index(), Some(15));
        assert_eq!(g.compact_to(100).0, 6);
        assert!(g.runs.is_empty());
    }

    #[test]
    fn runs_in_cuts_runs_to_the_range() {
        let mut g = GroupIndex::default();
        g.append_live(run(1, 10, 1));
        g.append_live(run(11, 10, 2));
        g.compact_to(3);
        let cut = g.runs_in(5, 13).unwrap();
        let spans: Vec<_> = cut.iter().map(|r| (r.first, r.count, r.skip)).collect();
        assert_eq!(spans, vec![(5, 6, 4), (11, 2, 0)]);
        assert_eq!(cut[0].entry(5), g.find(5).unwrap().entry(5));
        assert_eq!(cut[1].entry(12), g.find(12).unwrap().entry(12));
        assert!(g.runs_in(7, 7).unwrap().is_empty());
        assert_eq!(g.runs_in(1, 5), Err(1));
        assert_eq!(g.runs_in(15, 22), Err(21));
        assert_eq!(g.runs_in(15, u64::MAX), Err(21));
    }

    /// One change to a group, for the model test.
    #[derive(Debug, Clone)]
    enum GroupOp {
        /// Appends `count` entries from `last + 1 - back` (overwriting that
        /// suffix), or from `last + 1 + gap` when `back` is 0; `big` makes
        /// the record too long for a narrow slot.
        Append {
            back: u64,
            gap: u64,
            count: u32,
            big: bool,
        },
        CompactTo(u64),
    }

    fn group_op() -> impl Strategy<Value = GroupOp> {
        let gap = prop_oneof![4 => Just(0u64), 1 => 1..5u64, 1 => Just(u32::MAX as u64 - 1)];
        prop_oneof![
            5 => (0..6u64, gap, 1..5u32, prop::bool::weighted(0.1)).prop_map(
                |(back, gap, count, big)| GroupOp::Append { back, gap, count, big }
            ),
            1 => (0..8u64).prop_map(GroupOp::CompactTo),
        ]
    }

    proptest! {
        /// A group's index gives, for every index, the location a plain
        /// list of (index, location) gives, under appends that overwrite
        /// suffixes or leave gaps (holes, in a replay), compactions that
        /// cut runs and far jumps that make runs wide or re-base the group.
        #[test]
        fn group_index_matches_a_list_of_locations(
            ops in prop::collection::vec(group_op(), 1..80),
            replay in any::<bool>(),
        ) {
            let mut g = GroupIndex::default();
            let mut model: Vec<(u64, EntryLoc)> = Vec::new();
            for (n, op) in ops.into_iter().enumerate() {
                let last = model.last().map(|e| e.0);
                match op {
                    GroupOp::Append { back, gap, count, big } => {
                        let first = match last {
                            Some(l) if back > 0 => (l + 1).saturating_sub(back).max(1),
                            Some(l) => l + 1 + gap,
                            None => 10 + gap,
                        };
                        let record = RecordLoc {
                            file: FileRef::new(FileId { queue: Queue::Append, seq: n as u64 + 1 }),
                            offset: n as u32 * 100,
                            len: if big { 40 << 20 } else { 100 },
                        };
                        g.append(Run::new(first, count, record, 7), replay);
                        model.retain(|e| e.0 < first);
                        if !replay && last.is_some_and(|l| first > l + 1) {
                            model.clear();
                        }
                        model.extend((0..count).map(|k| {
                            let loc = EntryLoc { record, body_offset: 7, item_count: count, position: k };
                            (first + k as u64, loc)
                        }));
                    }
                    GroupOp::CompactTo(ahead) => {
                        let to = model.first().map_or(0, |e| e.0) + ahead;
                        let dropped = model.iter().take_while(|e| e.0 < to).count();
                        model.drain(..dropped);
                        prop_assert_eq!(g.compact_to(to).0, dropped as u64);
                    }
                }
                check_against(&g, &model)?;
            }
            g.close_holes();
            if g.runs.has_wide() {
                g.runs.rebase();
            }
            let keep = model
                .windows(2)
                .rposition(|w| w[1].0 != w[0].0 + 1)
                .map_or(0, |i| i + 1);
            model.drain(..keep);
            check_against(&g, &model)?;
        }
    }

    fn check_against(
        g: &GroupIndex,
        model: &[(u64, EntryLoc)],
    ) -> std::result::Result<(), TestCaseError> {
        prop_assert_eq!(g.entry_count(), model.len() as u64);
        prop_assert_eq!(g.first_index(), model.first().map(|e| e.0));
        prop_assert_eq!(g.last_index(), model.last().map(|e| e.0));
        for (i, (index, loc)) in model.iter().enumerate() {
            prop_assert_eq!(g.find(*index).map(|r| r.entry(*index)), Some(*loc));
            if i == 0 || model[i - 1].0 + 1 != *index {
                prop_assert!(g.find(index - 1).is_none());
            }
        }
        if let (Some(first), Some(last)) = (model.first(), model.last()) {
            prop_assert!(g.find(last.0 + 1).is_none());
            // Without holes, the runs of the whole range give every entry.
            if last.0 - first.0 + 1 == model.len() as u64 {
                let runs = g.runs_in(first.0, last.0 + 1).expect("contiguous");
                let locs: Vec<(u64, EntryLoc)> = runs
                    .iter()
                    .flat_map(|r| (r.first..r.end()).map(move |i| (i, r.entry(i))))
                    .collect();
                prop_assert_eq!(&locs[..], model);
            }
        }
        Ok(())
    }

    #[test]
    fn file_ref_packs_queue() {
        for queue in [Queue::Append, Queue::Rewrite] {
            let id = FileId { queue, seq: 12345 };
            assert_eq!(FileRef::new(id).id(), id);
            assert_eq!(FileRef::new(id).is_rewrite(), queue == Queue::Rewrite);
        }
    }
}
