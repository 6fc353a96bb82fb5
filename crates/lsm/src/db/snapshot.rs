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

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::Db;
use crate::key::SeqNo;

/// Shards of the snapshot list.
const SHARDS: usize = 8;

/// One shard: seqnos with how many snapshots hold each, on a cache line of
/// its own.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Shard(Mutex<BTreeMap<SeqNo, usize>>);

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
        let mut all: Vec<SeqNo> = Vec::new();
        for shard in &self.shards {
            all.extend(shard.0.lock().keys().copied());
        }
        all.sort_unstable();
        all.dedup();
        all
    }

    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.0.lock().values().sum::<usize>())
            .sum()
    }
}

struct Held {
    seqno: SeqNo,
    shard: usize,
    list: Arc<SnapshotList>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut held = self.list.shards[self.shard].0.lock();
        if let Some(n) = held.get_mut(&self.seqno) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.seqno);
            }
        }
    }
}

/// A consistent view of every column family at one sequence number. Reads
/// given it (in [`ReadOptions`](super::ReadOptions)) see exactly the writes
/// published before it was taken, however long it is held; compaction keeps
/// what it can see. Cheap to clone; released when the last clone drops.
#[derive(Clone)]
pub struct Snapshot {
    held: Arc<Held>,
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("seqno", &self.held.seqno)
            .finish()
    }
}

impl Snapshot {
    /// The sequence number the snapshot reads at.
    pub fn seqno(&self) -> SeqNo {
        self.held.seqno
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
        *held.entry(seqno).or_insert(0) += 1;
        drop(held);
        Snapshot {
            held: Arc::new(Held { seqno, shard, list }),
        }
    }
}
