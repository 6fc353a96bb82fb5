//! The write path of a write without `sync`: the writer appends its own
//! batch, with no group commit.
//!
//! Group commit pays when a sync is shared; without one, a follower that
//! sleeps until its leader wakes it costs two context switches per write.
//! Four writers on two cores with unsynced 1 KiB puts made 102k writes/s
//! this way against fjall's 185k, whose writers append under a lock.
//!
//! So such a writer, holding the WAL lock (which the group-commit leader
//! also holds for the same steps):
//! 1. checks that writes are open and switches full memtables;
//! 2. checks its batch against the range latches (sent back if latched);
//! 3. takes its seqnos and appends its batch to the WAL: seqno order is
//!    WAL order, so a crash keeps a prefix of the writes;
//! 4. takes the active memtables, those of the WAL file it appended to;
//!
//! then, without the lock, inserts into them (the skiplist takes concurrent
//! inserts), publishes its seqnos, and returns once they are visible. A
//! memtable switched meanwhile is sealed at the last seqno allocated under
//! the lock, and its flush waits until that seqno is visible.

use super::write::apply_to_memtables;
use super::DbInner;
use crate::batch::WriteBatch;
use crate::error::Result;

impl DbInner {
    /// Writes `batch` (validated, `count` items) without the write queue;
    /// the batch back when it touches a latched range, with nothing
    /// written.
    pub(super) fn write_direct(
        &self,
        mut batch: WriteBatch,
        count: u32,
        disable_wal: bool,
    ) -> Result<Option<WriteBatch>> {
        let n = u64::from(count);
        let (first, actives, logged) = {
            let mut wal = self.wal.lock();
            self.ready_to_append(&mut wal, &[])?;
            if self.latches.any_held() && self.latches.touches_any(&batch) {
                return Ok(Some(batch));
            }
            let first = self.seq.allocate(n)?;
            let logged = batch.set_first_seqno(first).and_then(|()| {
                if disable_wal {
                    return Ok(());
                }
                self.append_to_wal(&mut wal, &[batch.payload()])
            });
            (first, self.active_memtables(), logged)
        };
        let last = first + n - 1;
        let outcome = logged.and_then(|()| apply_to_memtables(&batch, &actives));
        // Published even after a failure (writes are stopped then): an
        // unpublished range would hold the visible seqno back for good.
        let outcome = outcome.and(self.seq.publish(last));
        if let Err(e) = outcome {
            self.stop_writes(&e);
            return Err(e);
        }
        self.counters.add_writes(1, n);
        // Earlier writers still inserting may hold the visible seqno below
        // this write.
        self.until_visible(last);
        Ok(None)
    }
}
