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

mod group;
mod keys;
mod runs;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{RwLock, RwLockWriteGuard};
use rustc_hash::FxHashMap;

use crate::engine::IndexStats;
use crate::format::{FileId, Queue, SEQ_MAX};
use crate::log_batch::Item;

pub(crate) use group::{ApplyEffect, GroupIndex, KvSlot};
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
