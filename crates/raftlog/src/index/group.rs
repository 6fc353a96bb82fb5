//! One group's part of the index: its live entries as runs, its keys, and
//! how each logged item changes them (the invariants: `index.rs`).

use super::{FileRef, Keys, RecordLoc, Run, Runs};
use crate::log_batch::Item;

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
    pub(super) fn append(&mut self, run: Run, replay: bool) -> ApplyEffect {
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
    pub(super) fn apply_local(
        &mut self,
        item: &Item<'_>,
        record: RecordLoc,
        replay: bool,
    ) -> ApplyEffect {
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
    /// slot is counted by [`super::Index::stats`].
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<super::GroupCell>() + self.runs.heap_bytes() + self.kvs.heap_bytes()
    }
}
