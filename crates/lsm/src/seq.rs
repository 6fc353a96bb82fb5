//! The sequence number allocator: one per engine, shared by every writer and
//! by ingestion, so that every change has its place in one total order.
//!
//! Two watermarks:
//! - *allocated*: the last sequence number handed out. A batch of `n` items
//!   takes `n` consecutive numbers with [`SeqAllocator::allocate`]; an
//!   ingestion takes one for its files the same way.
//! - *visible*: the last sequence number readers may see. Everything at or
//!   below it is in the memtables (or installed files), whole.
//!
//! Writers finish out of order (one batch's memtable inserts may take longer
//! than a later batch's), but they become visible strictly in allocation
//! order: [`SeqAllocator::publish`] marks a range finished, and visible
//! advances over the contiguous prefix of finished ranges only. A batch is
//! therefore never torn for a reader: a snapshot at `visible()` sees all of a
//! batch or none of it, and never a later batch without an earlier one.
//!
//! Invariants:
//! - `visible <= allocated <= MAX_SEQNO`, and neither ever goes backwards
//!   (TiKV once crashed a production cluster over a visible sequence number
//!   that went backwards: tikv/tikv#19891). Checked with `debug_assert!`.
//! - `pending` holds the allocated, unpublished-or-blocked ranges in
//!   allocation order, which is seqno order; they tile `visible + 1 ..=
//!   allocated` without gaps.
//! - A range is published once. A writer that fails after allocating must
//!   still publish its range (its numbers are then simply unused) or poison
//!   the engine; otherwise visible stops at the range forever.
//!
//! Concurrency contract:
//! - `allocate` and `publish` take the `pending` mutex briefly (no I/O, no
//!   other lock under it: it is a leaf in the lock order).
//! - `visible()` is one atomic load with `Acquire`: no lock. It pairs with the
//!   `Release` store in `publish`, so a reader that sees `visible = v` also
//!   sees every memtable insert the writers of `..= v` made before
//!   publishing.
//!
//! How a snapshot pairs the visible seqno with a version (built with
//! versions, not here): the engine keeps one `ArcSwap<ReadState>` with
//! `ReadState { version, memtables, visible }`. A reader loads it once and
//! reads at `visible` over exactly those memtables and files. Publishing a
//! write loads the current read state and stores a copy with the new
//! `visible` (a compare-and-swap loop); installing a version (flush,
//! compaction, ingestion) stores a copy with the new version and the
//! then-current `visible`. Ingestion allocates its seqno here, installs its
//! files, and publishes that seqno in the same read-state swap, so no
//! snapshot sees the seqno without the files or the files without it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::key::{SeqNo, MAX_SEQNO};

/// Hands out sequence numbers and publishes them in order.
#[derive(Debug)]
pub struct SeqAllocator {
    /// The visible watermark; stored under `pending`'s lock, loaded without.
    visible: AtomicU64,
    /// Guarded by the mutex: the allocated watermark and the ranges between
    /// the two watermarks.
    pending: Mutex<Pending>,
}

#[derive(Debug)]
struct Pending {
    /// The last sequence number handed out.
    allocated: SeqNo,
    /// Ranges `visible + 1 ..= allocated` in allocation order.
    ranges: VecDeque<Range>,
}

#[derive(Debug, Clone, Copy)]
struct Range {
    first: SeqNo,
    last: SeqNo,
    finished: bool,
}

impl SeqAllocator {
    /// Returns an allocator whose watermarks both stand at `last_seqno`: the
    /// last sequence number recovery found (0 for a new engine).
    pub fn new(last_seqno: SeqNo) -> Result<SeqAllocator> {
        if last_seqno > MAX_SEQNO {
            return Err(Error::InvalidArgument(format!(
                "last seqno {last_seqno} passes {MAX_SEQNO}"
            )));
        }
        Ok(SeqAllocator {
            visible: AtomicU64::new(last_seqno),
            pending: Mutex::new(Pending {
                allocated: last_seqno,
                ranges: VecDeque::new(),
            }),
        })
    }

    /// Allocates `n` consecutive sequence numbers and returns the first; the
    /// last is `first + n - 1`. Fails without allocating when `n` is 0 or the
    /// numbers would pass [`MAX_SEQNO`].
    pub fn allocate(&self, n: u64) -> Result<SeqNo> {
        let mut p = self.pending.lock();
        if n == 0 || n > MAX_SEQNO - p.allocated {
            return Err(Error::InvalidArgument(format!(
                "cannot allocate {n} seqnos after {} (max {MAX_SEQNO})",
                p.allocated
            )));
        }
        let first = p.allocated + 1;
        let last = p.allocated + n;
        p.allocated = last;
        p.ranges.push_back(Range {
            first,
            last,
            finished: false,
        });
        Ok(first)
    }

    /// Marks the range ending at `last` finished: its writes are all in
    /// place. Visible then advances over every finished range that no
    /// unfinished range precedes; a later range published first waits for
    /// the earlier ones. Fails if no unpublished range ends at `last`.
    pub fn publish(&self, last: SeqNo) -> Result<()> {
        let mut p = self.pending.lock();
        // Ranges are sorted by seqno, so a binary search finds the range.
        let at = p.ranges.partition_point(|r| r.last < last);
        match p.ranges.get_mut(at) {
            Some(r) if r.last == last && !r.finished => r.finished = true,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "no unpublished seqno range ends at {last}"
                )))
            }
        }
        let mut visible = None;
        while let Some(r) = p.ranges.front() {
            if !r.finished {
                break;
            }
            visible = Some(r.last);
            p.ranges.pop_front();
        }
        if let Some(v) = visible {
            let old = self.visible.load(Ordering::Relaxed);
            // Always on (release too): one compare per publication.
            assert!(v > old, "visible seqno going backwards: {old} -> {v}");
            debug_assert!(v <= p.allocated);
            debug_assert!(p.ranges.front().is_none_or(|r| r.first == v + 1));
            self.visible.store(v, Ordering::Release);
        }
        Ok(())
    }

    /// Returns the visible watermark: a reader at this seqno sees whole
    /// batches only.
    pub fn visible(&self) -> SeqNo {
        self.visible.load(Ordering::Acquire)
    }

    /// Returns the allocated watermark: the last sequence number handed out.
    pub fn allocated(&self) -> SeqNo {
        self.pending.lock().allocated
    }
}

#[cfg(test)]
mod tests;
