//! Snapshots: a sequence number held, so that compaction keeps every
//! version a reader at it can see.
//!
//! The held seqnos are kept in shards, a thread taking and releasing its
//! snapshots in its own (threads share shards round-robin past
//! [`SHARDS`]): readers that take snapshots in a loop do not wait on each
//! other, nor on one preempted while it held a common lock (the last
//! creations of a millisecond or more that the scheduler did not preempt
//! were such waits, `docs/bench/lsm-vs-peers.md`). A compaction reads every
//! shard. Each shard keeps the rule one list had: a seqno is read under its
//! shard's lock, so a compaction that reads the shard after sees the
//! snapshot, and one that read it before took its inputs while the visible
//! seqno was at most this one: it keeps the newest version of every key,
//! which is what the snapshot sees.
//!
//! Taking, cloning and dropping a snapshot allocate nothing once a shard
//! has held as many distinct seqnos as it holds now: a shard is a sorted
//! `Vec` that keeps its capacity, and a snapshot is its seqno, its shard
//! and a shared pointer to the list. That took snapshot p99.9 at 100,000
//! files from 8-12 us to about 2 us; it did not end the rare snapshots
//! blocked for about 3 ms, whose wait is not yet named
//! (`docs/bench/lsm-vs-peers.md`, "2026-11-29 (night)"). The price: a
//! clone counts itself under the lock of the shard the snapshot was taken
//! in, where an `Arc` handle cloned with one atomic add, so threads that
//! clone one snapshot at a high rate share that lock.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::Db;
use crate::key::SeqNo;

/// Shards of the snapshot list.
const SHARDS: usize = 8;

/// Distinct seqnos a shard has room for before its first allocation.
const SHARD_CAPACITY: usize = 16;

/// One shard: held seqnos, ascending and distinct, each with how many
/// snapshots hold it; on a cache line of its own.
#[derive(Debug)]
#[repr(align(64))]
struct Shard(Mutex<Vec<(SeqNo, usize)>>);

impl Default for Shard {
    fn default() -> Self {
        Shard(Mutex::new(Vec::with_capacity(SHARD_CAPACITY)))
    }
}

impl Shard {
    /// Counts one more snapshot at `seqno` in `held`.
    fn hold(held: &mut Vec<(SeqNo, usize)>, seqno: SeqNo) {
        // New snapshots are at the newest seqno: look from the end.
        match held.last_mut() {
            Some((s, n)) if *s == seqno => *n += 1,
            Some((s, _)) if *s < seqno => held.push((seqno, 1)),
            None => held.push((seqno, 1)),
            Some(_) => match held.binary_search_by_key(&seqno, |&(s, _)| s) {
                Ok(i) => held[i].1 += 1,
                Err(i) => held.insert(i, (seqno, 1)),
            },
        }
    }

    /// Counts one snapshot at `seqno` less.
    fn release(&self, seqno: SeqNo) {
        let mut held = self.0.lock();
        if let Ok(i) = held.binary_search_by_key(&seqno, |&(s, _)| s) {
            held[i].1 -= 1;
            if held[i].1 == 0 {
                // Keeps the capacity: the next hold does not allocate.
                held.remove(i);
            }
        }
    }
}

/// The live snapshots' seqnos, with how many snapshots hold each.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    shards: [Shard; SHARDS],
}

/// The shard of the calling thread.
fn my_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: Cell<Option<usize>> = const { Cell::new(None) };
    }
    SHARD.with(|s| {
        s.get().unwrap_or_else(|| {
            let i = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
            s.set(Some(i));
            i
        })
    })
}

impl SnapshotList {
    /// The held seqnos, ascending (what compaction keeps versions for).
    pub fn seqnos(&self) -> Vec<SeqNo> {
        // Room for the usual case before any shard is locked: an
        // allocation under a shard's lock would hold up its readers.
        let mut all: Vec<SeqNo> = Vec::with_capacity(SHARDS * SHARD_CAPACITY);
        for shard in &self.shards {
            all.extend(shard.0.lock().iter().map(|&(s, _)| s));
        }
        all.sort_unstable();
        all.dedup();
        all
    }

    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.0.lock().iter().map(|&(_, n)| n).sum::<usize>())
            .sum()
    }
}

/// A consistent view of every column family at one sequence number. Reads
/// given it (in [`ReadOptions`](super::ReadOptions)) see exactly the writes
/// published before it was taken, however long it is held; compaction keeps
/// what it can see. A clone holds the seqno too (one count more, under the
/// lock of the shard the snapshot was taken in); the seqno is released
/// when the last clone drops.
pub struct Snapshot {
    seqno: SeqNo,
    shard: usize,
    list: Arc<SnapshotList>,
}

impl Clone for Snapshot {
    fn clone(&self) -> Self {
        // Already held by `self`: no visibility rule to keep, one count more.
        Shard::hold(&mut self.list.shards[self.shard].0.lock(), self.seqno);
        Snapshot {
            seqno: self.seqno,
            shard: self.shard,
            list: self.list.clone(),
        }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.list.shards[self.shard].release(self.seqno);
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("seqno", &self.seqno)
            .finish()
    }
}

impl Snapshot {
    /// The sequence number the snapshot reads at.
    pub fn seqno(&self) -> SeqNo {
        self.seqno
    }
}

impl Db {
    /// Takes a snapshot of the latest published writes.
    pub fn snapshot(&self) -> Snapshot {
        let inner = self.inner();
        let list = inner.snapshots.clone();
        let shard = my_shard();
        let mut held = list.shards[shard].0.lock();
        // Read under the shard's lock (see the module doc).
        let seqno = inner.seq.visible();
        Shard::hold(&mut held, seqno);
        drop(held);
        Snapshot { seqno, shard, list }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// A shard against a map of counts: holds at any seqno (new ones
        /// mostly, older ones as clones of old snapshots make them) and
        /// releases of held ones in any order.
        #[test]
        fn shard_counts_like_a_map(ops in prop::collection::vec((any::<bool>(), 0u64..40), 0..300)) {
            let shard = Shard::default();
            let mut model: BTreeMap<SeqNo, usize> = BTreeMap::new();
            for (hold, seqno) in ops {
                if hold {
                    Shard::hold(&mut shard.0.lock(), seqno);
                    *model.entry(seqno).or_insert(0) += 1;
                } else if let Some(&held) = model.keys().nth(seqno as usize % model.len().max(1)) {
                    shard.release(held);
                    let n = model.get_mut(&held).expect("held");
                    *n -= 1;
                    if *n == 0 {
                        model.remove(&held);
                    }
                }
                let got: Vec<(SeqNo, usize)> = shard.0.lock().clone();
                let want: Vec<(SeqNo, usize)> = model.iter().map(|(&s, &n)| (s, n)).collect();
                prop_assert_eq!(got, want);
            }
        }
    }

    #[test]
    fn a_shard_keeps_its_capacity_when_emptied() {
        let shard = Shard::default();
        for seqno in 0..100 {
            Shard::hold(&mut shard.0.lock(), seqno);
        }
        let capacity = shard.0.lock().capacity();
        for seqno in 0..100 {
            shard.release(seqno);
        }
        assert!(shard.0.lock().is_empty());
        assert_eq!(shard.0.lock().capacity(), capacity);
    }
}
