//! A group's runs, stored in 24 bytes each.
//!
//! With one entry per group per batch (TiKV's usual write) every live entry
//! is a run of its own, so the size of a stored run is the index's cost per
//! entry. [`Run`], the form callers read and write, takes 40 bytes; a
//! [`Slot`] stores the same fields in 24:
//!
//! ```text
//! { u32 first - base | u32 file | u32 record offset | 96 bits: len:25 body_offset:25 count:15 skip:15 item_count:15 wide:1 }
//! ```
//!
//! - `first` is kept as a delta from the group's `base`, the first index of
//!   the front run when the group last started or was re-based. Runs only
//!   grow at the back and lose entries at the front, so the deltas stay in
//!   order; a run whose delta would pass `u32::MAX` first re-bases the group
//!   on its front run (O(runs), once per 4 billion indexes at most).
//! - The narrow widths hold records under 32 MiB and items of under 32,768
//!   entries, which is nearly every record: writers' batches are usually far
//!   smaller, rewrite records hold at most 1 MiB.
//! - A run that does not fit (a bigger record or item, or a first index more
//!   than `u32::MAX` past the front run's, which only a hole during replay
//!   can give) is *wide*: its slot holds the flag and its full first index,
//!   and the whole `Run` goes into a side table kept in the order of the
//!   runs. A wide run costs 24 + 48 bytes but covers a large item, or is
//!   transient.
//!
//! Invariants:
//! - `wide` holds exactly one entry for each slot with the wide flag, keyed
//!   by the slot's position counted from the first slot ever pushed
//!   (`head + i`), in position order; it is `None` when there is none.
//! - A narrow slot's `first` is `base + delta`; a wide slot's is in its `lo`
//!   field, so a binary search on first indexes never reads the side table.

use std::collections::VecDeque;
use std::fmt;

use super::{FileRef, RecordLoc, Run};

const LEN_BITS: u32 = 25;
const BODY_BITS: u32 = 25;
const COUNT_BITS: u32 = 15;
const BODY_SHIFT: u32 = LEN_BITS;
const COUNT_SHIFT: u32 = BODY_SHIFT + BODY_BITS;
const SKIP_SHIFT: u32 = COUNT_SHIFT + COUNT_BITS;
const ITEMS_SHIFT: u32 = SKIP_SHIFT + COUNT_BITS;
const WIDE_SHIFT: u32 = ITEMS_SHIFT + COUNT_BITS;
const _: () = assert!(WIDE_SHIFT == 95, "the packed fields fill 96 bits");

/// Largest record length and body offset a narrow slot holds.
pub(crate) const NARROW_LEN_MAX: u32 = (1 << LEN_BITS) - 1;
/// Largest count, skip and item count a narrow slot holds.
pub(crate) const NARROW_COUNT_MAX: u32 = (1 << COUNT_BITS) - 1;

/// One run as the index stores it (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    /// `first - base` (narrow); unused when wide.
    delta: u32,
    file: FileRef,
    offset: u32,
    /// Bits 64..96 of the packed fields.
    hi: u32,
    /// Bits 0..64 of the packed fields (narrow), or the first index (wide).
    lo: u64,
}

/// The layout the index's memory figures depend on.
pub(crate) const SLOT_BYTES: usize = 24;
const _: () = assert!(std::mem::size_of::<Slot>() == SLOT_BYTES);

impl Slot {
    /// Packs `run`, or returns `None` if it needs the wide form.
    fn narrow(run: &Run, base: u64) -> Option<Slot> {
        let delta = u32::try_from(run.first.checked_sub(base)?).ok()?;
        let fits = run.record.len <= NARROW_LEN_MAX
            && run.body_offset <= NARROW_LEN_MAX
            && run.count <= NARROW_COUNT_MAX
            && run.skip <= NARROW_COUNT_MAX
            && run.item_count <= NARROW_COUNT_MAX;
        if !fits {
            return None;
        }
        let packed = run.record.len as u128
            | (run.body_offset as u128) << BODY_SHIFT
            | (run.count as u128) << COUNT_SHIFT
            | (run.skip as u128) << SKIP_SHIFT
            | (run.item_count as u128) << ITEMS_SHIFT;
        Some(Slot {
            delta,
            file: run.record.file,
            offset: run.record.offset,
            hi: (packed >> 64) as u32,
            lo: packed as u64,
        })
    }

    /// The slot of a run kept in the side table.
    fn wide(run: &Run) -> Slot {
        Slot {
            delta: 0,
            file: run.record.file,
            offset: run.record.offset,
            hi: 1 << (WIDE_SHIFT - 64),
            lo: run.first,
        }
    }

    fn is_wide(&self) -> bool {
        self.hi >> (WIDE_SHIFT - 64) != 0
    }

    fn first(&self, base: u64) -> u64 {
        if self.is_wide() {
            self.lo
        } else {
            base + self.delta as u64
        }
    }

    /// Unpacks a narrow slot.
    fn run(&self, base: u64) -> Run {
        debug_assert!(!self.is_wide());
        let packed = (self.hi as u128) << 64 | self.lo as u128;
        let field = |shift: u32, bits: u32| ((packed >> shift) as u32) & ((1 << bits) - 1);
        Run {
            first: base + self.delta as u64,
            count: field(COUNT_SHIFT, COUNT_BITS),
            skip: field(SKIP_SHIFT, COUNT_BITS),
            record: RecordLoc {
                file: self.file,
                offset: self.offset,
                len: field(0, LEN_BITS),
            },
            body_offset: field(BODY_SHIFT, BODY_BITS),
            item_count: field(ITEMS_SHIFT, COUNT_BITS),
        }
    }
}

/// A group's runs, in index order: a deque of [`Slot`]s read and written as
/// [`Run`]s. Changes happen at the ends, except [`Runs::set`].
#[derive(Default, Clone)]
pub(crate) struct Runs {
    slots: VecDeque<Slot>,
    /// What narrow slots' `first` is counted from.
    base: u64,
    /// Position of `slots[0]`: how many slots were popped from the front
    /// since the deque was last empty.
    head: u64,
    /// The wide runs, by position (see the module docs).
    #[expect(
        clippy::box_collection,
        reason = "8 bytes in every group instead of 32 for a table most never use"
    )]
    wide: Option<Box<VecDeque<(u64, Run)>>>,
}

impl Runs {
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Returns run `i`.
    pub fn get(&self, i: usize) -> Option<Run> {
        self.slots.get(i).map(|s| self.decode(i, s))
    }

    pub fn front(&self) -> Option<Run> {
        self.get(0)
    }

    pub fn back(&self) -> Option<Run> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// First index of run `i`, without unpacking it.
    pub fn first_of(&self, i: usize) -> u64 {
        self.slots[i].first(self.base)
    }

    /// How many runs start at or before `index`: the position after the run
    /// that would hold it. A binary search.
    pub fn starting_at_or_before(&self, index: u64) -> usize {
        let base = self.base;
        self.slots.partition_point(|s| s.first(base) <= index)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = Run> + ExactSizeIterator + '_ {
        self.iter_from(0)
    }

    /// The runs from `i` on.
    pub fn iter_from(
        &self,
        i: usize,
    ) -> impl DoubleEndedIterator<Item = Run> + ExactSizeIterator + '_ {
        self.slots
            .range(i.min(self.len())..)
            .enumerate()
            .map(move |(k, s)| self.decode(i + k, s))
    }

    /// Files of the runs, in order, without unpacking them.
    pub fn files(&self) -> impl Iterator<Item = FileRef> + '_ {
        self.slots.iter().map(|s| s.file)
    }

    fn decode(&self, i: usize, s: &Slot) -> Run {
        if !s.is_wide() {
            return s.run(self.base);
        }
        let wide = self.wide.as_deref().expect("a wide slot has its run");
        let pos = self.head + i as u64;
        let at = wide
            .binary_search_by_key(&pos, |(p, _)| *p)
            .expect("a wide slot has its run");
        wide[at].1
    }

    /// Appends `run`, which must start after the last run's first index.
    pub fn push_back(&mut self, run: Run) {
        debug_assert!(self.back().is_none_or(|b| b.first < run.first));
        if self.slots.is_empty() {
            self.base = run.first;
            self.head = 0;
            // One run is what most groups hold: no slack for it.
            self.slots.reserve_exact(1);
        } else if run.first.saturating_sub(self.base) > u32::MAX as u64
            && self.first_of(0) > self.base
        {
            self.rebase();
        }
        let slot = self.encode(self.head + self.slots.len() as u64, &run);
        self.slots.push_back(slot);
    }

    /// Packs `run` for position `pos`, entering it in the side table if wide.
    fn encode(&mut self, pos: u64, run: &Run) -> Slot {
        if let Some(s) = Slot::narrow(run, self.base) {
            return s;
        }
        let wide = self.wide.get_or_insert_with(Default::default);
        let at = wide.partition_point(|(p, _)| *p < pos);
        debug_assert!(wide.get(at).is_none_or(|(p, _)| *p != pos));
        wide.insert(at, (pos, *run));
        Slot::wide(run)
    }

    /// Drops the side table entry of the wide slot at `pos`.
    fn forget(&mut self, pos: u64) {
        let wide = self.wide.as_mut().expect("a wide slot has its run");
        let at = wide
            .binary_search_by_key(&pos, |(p, _)| *p)
            .expect("a wide slot has its run");
        wide.remove(at);
        if wide.is_empty() {
            self.wide = None;
        }
    }

    /// Re-counts narrow slots from the front run's first index, so that runs
    /// far past the old base fit again. Called when a run would not.
    pub fn rebase(&mut self) {
        let runs: Vec<Run> = self.iter().collect();
        self.clear();
        for run in runs {
            if self.slots.is_empty() {
                self.base = run.first;
            }
            let slot = self.encode(self.slots.len() as u64, &run);
            self.slots.push_back(slot);
        }
    }

    /// Replaces run `i` by `run`, which must keep the runs in order.
    pub fn set(&mut self, i: usize, run: Run) {
        let pos = self.head + i as u64;
        if self.slots[i].is_wide() {
            self.forget(pos);
        }
        let slot = self.encode(pos, &run);
        self.slots[i] = slot;
    }

    pub fn pop_front(&mut self) -> Option<Run> {
        let run = self.front()?;
        if self.slots[0].is_wide() {
            self.forget(self.head);
        }
        self.slots.pop_front();
        self.head += 1;
        Some(run)
    }

    pub fn pop_back(&mut self) -> Option<Run> {
        let run = self.back()?;
        let i = self.slots.len() - 1;
        if self.slots[i].is_wide() {
            self.forget(self.head + i as u64);
        }
        self.slots.pop_back();
        Some(run)
    }

    /// Drops the first `n` runs.
    pub fn drop_front(&mut self, n: usize) {
        if let Some(wide) = self.wide.as_mut() {
            let end = self.head + n as u64;
            let k = wide.partition_point(|(p, _)| *p < end);
            wide.drain(..k);
            if wide.is_empty() {
                self.wide = None;
            }
        }
        self.slots.drain(..n);
        self.head += n as u64;
    }

    pub fn clear(&mut self) {
        self.slots.clear();
        self.wide = None;
        self.head = 0;
    }

    pub fn shrink_to_fit(&mut self) {
        self.slots.shrink_to_fit();
        if let Some(w) = self.wide.as_mut() {
            w.shrink_to_fit();
        }
    }

    /// Heap bytes held: the slots' buffer and the side table.
    pub fn heap_bytes(&self) -> usize {
        let wide = self.wide.as_deref().map_or(0, |w| {
            std::mem::size_of::<VecDeque<(u64, Run)>>()
                + w.capacity() * std::mem::size_of::<(u64, Run)>()
        });
        self.slots.capacity() * std::mem::size_of::<Slot>() + wide
    }

    /// Whether any run is wide.
    pub fn has_wide(&self) -> bool {
        self.wide.is_some()
    }

    /// How many runs are wide.
    #[cfg(test)]
    pub fn wide_count(&self) -> usize {
        self.wide.as_deref().map_or(0, VecDeque::len)
    }
}

impl FromIterator<Run> for Runs {
    fn from_iter<I: IntoIterator<Item = Run>>(iter: I) -> Self {
        let mut runs = Runs::default();
        for run in iter {
            runs.push_back(run);
        }
        runs
    }
}

/// Lists the runs as [`Run`]s: two indexes with the same runs print the
/// same, however their slots are counted.
impl fmt::Debug for Runs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::format::{FileId, Queue};

    fn file(seq: u64, rewrite: bool) -> FileRef {
        let queue = if rewrite {
            Queue::Rewrite
        } else {
            Queue::Append
        };
        FileRef::new(FileId { queue, seq })
    }

    fn run(first: u64, count: u32, skip: u32, item_count: u32, len: u32, body: u32) -> Run {
        Run {
            first,
            count,
            skip,
            record: RecordLoc {
                file: file(first % 1000 + 1, first.is_multiple_of(3)),
                offset: (first as u32).wrapping_mul(2_654_435_761),
                len,
            },
            body_offset: body,
            item_count,
        }
    }

    #[test]
    fn slot_is_24_bytes_and_run_is_40() {
        assert_eq!(std::mem::size_of::<Slot>(), 24);
        assert_eq!(std::mem::size_of::<Run>(), 40);
    }

    #[test]
    fn narrow_round_trips_at_the_limits() {
        let max = NARROW_COUNT_MAX;
        let len = NARROW_LEN_MAX;
        for r in [
            run(7, 1, 0, 1, 100, 20),
            run(7, max, max, max, len, len),
            run(7 + u32::MAX as u64, 0, 0, 0, 0, 0),
        ] {
            let s = Slot::narrow(&r, 7).expect("fits");
            assert!(!s.is_wide());
            assert_eq!(s.run(7), r);
            assert_eq!(s.first(7), r.first);
        }
    }

    #[test]
    fn each_field_past_its_width_is_wide_and_round_trips() {
        let base = run(100, 1, 0, 1, 64, 8);
        let mut past = vec![
            Run {
                first: 100 + u32::MAX as u64 + 1,
                ..base
            },
            Run {
                count: NARROW_COUNT_MAX + 1,
                item_count: NARROW_COUNT_MAX + 1,
                ..base
            },
            Run {
                skip: NARROW_COUNT_MAX + 1,
                item_count: u32::MAX,
                ..base
            },
            Run {
                item_count: NARROW_COUNT_MAX + 1,
                ..base
            },
            Run {
                record: RecordLoc {
                    len: NARROW_LEN_MAX + 1,
                    ..base.record
                },
                ..base
            },
            Run {
                body_offset: u32::MAX,
                ..base
            },
        ];
        past.sort_by_key(|r| r.first);
        for r in past {
            assert!(Slot::narrow(&r, 100).is_none(), "{r:?}");
            let mut runs = Runs::default();
            runs.push_back(base);
            runs.push_back(Run {
                first: r.first.max(101),
                ..r
            });
            let want = Run {
                first: r.first.max(101),
                ..r
            };
            assert_eq!(runs.back(), Some(want));
            assert_eq!(runs.wide_count(), 1);
            assert_eq!(runs.starting_at_or_before(want.first), 2);
            runs.pop_back();
            assert_eq!(runs.wide_count(), 0);
            assert!(runs.wide.is_none());
        }
    }

    #[test]
    fn a_far_run_rebases_the_group_once_the_front_moves() {
        let mut runs = Runs::default();
        runs.push_back(run(1, 1, 0, 1, 10, 1));
        runs.push_back(run(2, 1, 0, 1, 10, 1));
        let far = 1 + u32::MAX as u64 + 5;
        runs.push_back(run(far, 1, 0, 1, 10, 1));
        assert_eq!(runs.wide_count(), 1, "the front has not moved: wide");
        runs.pop_front();
        runs.pop_front();
        runs.push_back(run(far + 1, 1, 0, 1, 10, 1));
        assert_eq!(runs.wide_count(), 0, "re-based on the far run");
        assert_eq!(runs.base, far);
        let firsts: Vec<u64> = runs.iter().map(|r| r.first).collect();
        assert_eq!(firsts, vec![far, far + 1]);
    }

    /// A group's runs as a plain list, beside the compact form.
    #[derive(Debug, Clone)]
    enum Op {
        Push { gap: u64, count: u32, wide: u8 },
        PopFront,
        PopBack,
        Set { at: usize, skip: u32, wide: u8 },
        DropFront(usize),
        Rebase,
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (prop_oneof![Just(0u64), 1..3u64, Just(u32::MAX as u64)], 1..4u32, 0..8u8)
                .prop_map(|(gap, count, wide)| Op::Push { gap, count, wide }),
            2 => Just(Op::PopFront),
            2 => Just(Op::PopBack),
            2 => (0..64usize, 0..3u32, 0..8u8).prop_map(|(at, skip, wide)| Op::Set { at, skip, wide }),
            1 => (0..4usize).prop_map(Op::DropFront),
            1 => Just(Op::Rebase),
            1 => Just(Op::Clear),
        ]
    }

    /// Makes one field too wide for a slot when `wide` picks one.
    fn widen(mut r: Run, wide: u8) -> Run {
        match wide {
            0 => r.item_count = NARROW_COUNT_MAX + 7,
            1 => r.record.len = u32::MAX,
            2 => r.body_offset = NARROW_LEN_MAX + 1,
            _ => {}
        }
        r
    }

    proptest! {
        #[test]
        fn runs_match_a_plain_list(ops in prop::collection::vec(op(), 1..120)) {
            let mut model: VecDeque<Run> = VecDeque::new();
            let mut runs = Runs::default();
            for op in ops {
                match op {
                    Op::Push { gap, count, wide } => {
                        let first = model.back().map_or(5, |b| b.first + b.count as u64 + gap);
                        let r = widen(run(first, count, 0, count, 50, 9), wide);
                        model.push_back(r);
                        runs.push_back(r);
                    }
                    Op::PopFront => prop_assert_eq!(runs.pop_front(), model.pop_front()),
                    Op::PopBack => prop_assert_eq!(runs.pop_back(), model.pop_back()),
                    Op::Set { at, skip, wide } if at < model.len() => {
                        let old = model[at];
                        let r = widen(Run {
                            skip: old.skip + skip,
                            record: RecordLoc { offset: old.record.offset ^ 1, ..old.record },
                            ..old
                        }, wide);
                        model[at] = r;
                        runs.set(at, r);
                    }
                    Op::Set { .. } => {}
                    Op::DropFront(n) => {
                        let n = n.min(model.len());
                        model.drain(..n);
                        runs.drop_front(n);
                    }
                    Op::Rebase => runs.rebase(),
                    Op::Clear => {
                        model.clear();
                        runs.clear();
                    }
                }
                prop_assert_eq!(runs.len(), model.len());
                let all: Vec<Run> = runs.iter().collect();
                prop_assert_eq!(&all, &model.iter().copied().collect::<Vec<_>>());
                let wide = model.iter().filter(|r| Slot::narrow(r, runs.base).is_none()).count();
                prop_assert_eq!(runs.wide_count(), wide);
                for (i, r) in model.iter().enumerate() {
                    prop_assert_eq!(runs.first_of(i), r.first);
                    prop_assert_eq!(runs.starting_at_or_before(r.first), i + 1);
                    prop_assert_eq!(runs.starting_at_or_before(r.first - 1), i);
                }
            }
        }
    }
}
