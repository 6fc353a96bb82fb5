//! Snapshots: a sequence number held, so that compaction keeps every
//! version a reader at it can see.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use super::Db;
use crate::key::SeqNo;

/// The live snapshots' seqnos, with how many snapshots hold each.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    held: Mutex<BTreeMap<SeqNo, usize>>,
}

impl SnapshotList {
    /// The held seqnos, ascending (what compaction keeps versions for).
    pub fn seqnos(&self) -> Vec<SeqNo> {
        self.held.lock().keys().copied().collect()
    }

    pub fn len(&self) -> usize {
        self.held.lock().values().sum()
    }
}

struct Held {
    seqno: SeqNo,
    list: Arc<SnapshotList>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut held = self.list.held.lock();
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
        let mut held = list.held.lock();
        // Read under the list's lock: a compaction that reads the list
        // after this sees the snapshot; one that read it before keeps the
        // newest version of every key, which is what this seqno sees.
        let seqno = inner.seq.visible();
        *held.entry(seqno).or_insert(0) += 1;
        drop(held);
        Snapshot {
            held: Arc::new(Held { seqno, list }),
        }
    }
}
