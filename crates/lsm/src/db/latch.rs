//! Range latches: an ingestion in progress holds one over its key range of
//! one column family, and writers whose batch touches a latched range wait
//! until it is released. Every other writer passes without waiting.
//!
//! Invariants:
//! - `held` equals the number of latches in `set.ranges`; it is raised
//!   under the mutex before the latch becomes visible to anyone and
//!   lowered under it after the latch is gone.
//! - A writer that reads `held == 0` takes no lock at all (the fast path:
//!   one atomic load per write while no ingestion runs). It may race with
//!   an ingestion that is just latching, so the write leader checks each
//!   batch of its group again before it takes the group's seqnos
//!   ([`RangeLatches::touches_any`]) and sends a batch that touches a latch
//!   back to wait. An ingestion latches, then takes a fence seqno through
//!   the write queue (`db/ingest.rs`): every write of its range has a
//!   seqno below the fence (and is in a memtable once the fence is
//!   visible) or waits until the latch is released. Nothing of the range
//!   ever takes a seqno between the fence and the ingestion's own.
//! - Ingestions never wait on latches (their order comes from their
//!   seqnos), so two ingestions of overlapping ranges cannot deadlock.
//!
//! Concurrency contract: `set` is a leaf lock (lock 5 of `db/mod.rs`);
//! nothing else is taken under it, and writers wait on `released` with no
//! other lock held.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::{Condvar, Mutex};

use crate::batch::WriteBatch;
use crate::column_family::ColumnFamilyId;
use crate::key::ValueKind;

thread_local! {
    static WAITS: Cell<u64> = const { Cell::new(0) };
}

/// How many times writes made on the calling thread waited for an
/// ingestion's range latch since the thread started: a diagnostic (tests
/// use it to show that writers outside an ingested range never wait).
pub fn latch_waits_on_this_thread() -> u64 {
    WAITS.with(Cell::get)
}

/// One latched range: `[start, end)` of family `cf`.
#[derive(Debug)]
struct Latch {
    id: u64,
    cf: ColumnFamilyId,
    start: Vec<u8>,
    end: Vec<u8>,
}

#[derive(Debug, Default)]
struct LatchSet {
    next_id: u64,
    ranges: Vec<Latch>,
}

/// The latches of one engine.
#[derive(Debug, Default)]
pub(crate) struct RangeLatches {
    /// The number of latches held: the writers' fast path.
    held: AtomicUsize,
    set: Mutex<LatchSet>,
    released: Condvar,
}

/// A held latch; dropping it releases the latch and wakes the writers.
#[derive(Debug)]
pub(crate) struct LatchGuard<'a> {
    latches: &'a RangeLatches,
    id: u64,
}

impl Drop for LatchGuard<'_> {
    fn drop(&mut self) {
        let mut set = self.latches.set.lock();
        set.ranges.retain(|l| l.id != self.id);
        self.latches.held.fetch_sub(1, Ordering::SeqCst);
        drop(set);
        self.latches.released.notify_all();
    }
}

impl RangeLatches {
    /// Latches `[start, end)` of `cf` until the guard is dropped. Never
    /// waits: ingestions order themselves by their seqnos.
    pub(crate) fn latch(&self, cf: ColumnFamilyId, start: &[u8], end: &[u8]) -> LatchGuard<'_> {
        let mut set = self.set.lock();
        let id = set.next_id;
        set.next_id += 1;
        set.ranges.push(Latch {
            id,
            cf,
            start: start.to_vec(),
            end: end.to_vec(),
        });
        self.held.fetch_add(1, Ordering::SeqCst);
        LatchGuard { latches: self, id }
    }

    /// Whether any latch is held: one atomic load.
    pub(crate) fn any_held(&self) -> bool {
        self.held.load(Ordering::SeqCst) > 0
    }

    /// Whether `batch` touches a latched range now: the write leader's
    /// check. One atomic load when no latch is held.
    pub(crate) fn touches_any(&self, batch: &WriteBatch) -> bool {
        if self.held.load(Ordering::SeqCst) == 0 {
            return false;
        }
        let set = self.set.lock();
        set.ranges.iter().any(|l| touches(batch, l))
    }

    /// Waits while `batch` touches a latched range. One atomic load when
    /// no latch is held.
    pub(crate) fn wait_for(&self, batch: &WriteBatch) {
        if self.held.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut set = self.set.lock();
        while set.ranges.iter().any(|l| touches(batch, l)) {
            WAITS.with(|w| w.set(w.get() + 1));
            self.released.wait(&mut set);
        }
    }
}

/// Whether an item of `batch` falls in `latch`'s range. The batch was
/// validated by the caller; an item that does not decode touches nothing.
fn touches(batch: &WriteBatch, latch: &Latch) -> bool {
    batch.iter().flatten().any(|item| {
        if item.cf != latch.cf {
            return false;
        }
        match item.kind {
            // `[key, value)` meets `[start, end)`.
            ValueKind::RangeDelete => {
                item.key < latch.end.as_slice() && latch.start.as_slice() < item.value
            }
            _ => latch.start.as_slice() <= item.key && item.key < latch.end.as_slice(),
        }
    })
}
