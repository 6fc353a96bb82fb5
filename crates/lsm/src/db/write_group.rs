//! The group commit, for writes with `sync` and the engine's own requests
//! (a flush's memtable switch, a resume, an ingestion's fence): writers queue
//! up, and one leader takes the WAL lock, switches full memtables, takes the
//! group's seqnos, appends the batches to the WAL in one write (one sync if
//! any writer asked for it), then inserts them into the memtables and
//! publishes the last seqno. Writes without `sync` skip the queue
//! (`write_direct.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use smallvec::SmallVec;
use strata_log::group_commit::Writer;

use super::write::apply_to_memtables;
use super::DbInner;
use crate::batch::WriteBatch;
use crate::column_family::ColumnFamilyId;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::wal::WalWriter;

/// Bytes of batches one leader takes into its group.
const GROUP_BYTES_MAX: u64 = 4 << 20;

pub(crate) struct WriteRequest {
    /// Stamped with its seqnos by the leader.
    batch: Mutex<WriteBatch>,
    bytes: u64,
    count: u32,
    sync: bool,
    disable_wal: bool,
    /// Column families whose memtables to switch (a flush request), done
    /// by the leader under the WAL lock.
    pub(super) switch: Vec<ColumnFamilyId>,
    /// Resume writes after ENOSPC (`resume.rs`).
    resume: bool,
    /// Seqnos for an ingestion's fence (`ingest.rs`): the leader allocates
    /// and publishes them before the group's own, and stores the first in
    /// `fenced`.
    fence: u64,
    fenced: AtomicU64,
    /// Set by the leader when the batch touches a range latched since the
    /// writer checked: nothing was written, and the writer waits for the
    /// latch and submits again.
    bounced: AtomicBool,
}

impl WriteRequest {
    /// A request that writes nothing: a flush's memtable switch, a resume
    /// or a fence.
    pub(super) fn control() -> WriteRequest {
        WriteRequest {
            batch: Mutex::new(WriteBatch::new()),
            bytes: 0,
            count: 0,
            sync: false,
            disable_wal: true,
            switch: Vec::new(),
            resume: false,
            fence: 0,
            fenced: AtomicU64::new(0),
            bounced: AtomicBool::new(false),
        }
    }

    /// A request writing `batch` (`bytes` of payload, `count` items).
    pub(super) fn batch(
        batch: WriteBatch,
        bytes: usize,
        count: u32,
        options: &super::options::WriteOptions,
    ) -> WriteRequest {
        WriteRequest {
            batch: Mutex::new(batch),
            bytes: bytes as u64,
            count,
            sync: options.sync,
            disable_wal: options.disable_wal,
            ..WriteRequest::control()
        }
    }
}

pub(super) type GroupWriter = Arc<Writer<WriteRequest, Result<()>>>;

fn fail_all(n: usize, why: &Error) -> Vec<Result<()>> {
    (0..n)
        .map(|_| Err(Error::ReadOnly(why.to_string())))
        .collect()
}

impl DbInner {
    /// Allocates `n` seqnos through the write queue and publishes them at
    /// once, and returns the first: an ingestion's fence. Every write
    /// whose seqnos come after it was checked against the latches held
    /// when the fence was served (`latch.rs`).
    pub(super) fn fence(&self, n: u64) -> Result<SeqNo> {
        self.check_writable()?;
        let request = WriteRequest {
            fence: n,
            ..WriteRequest::control()
        };
        let served = self.serve_request(request)?;
        Ok(served.request.fenced.load(Ordering::Acquire))
    }

    /// Switches the active memtables of `cfs` (those that hold anything) for
    /// new ones, through the write queue, and schedules their flush.
    pub(super) fn switch_memtables_for_flush(&self, cfs: Vec<ColumnFamilyId>) -> Result<()> {
        self.check_writable()?;
        self.submit(WriteRequest {
            switch: cfs,
            ..WriteRequest::control()
        })
        .map(drop)
    }

    /// Runs a resume as the leader of a group (`resume.rs`).
    pub(super) fn submit_resume(&self) -> Result<()> {
        self.submit(WriteRequest {
            resume: true,
            ..WriteRequest::control()
        })
        .map(drop)
    }

    /// Runs `request` through the write queue and returns it as the
    /// leader left it.
    fn serve_request(
        &self,
        request: WriteRequest,
    ) -> Result<Arc<Writer<WriteRequest, Result<()>>>> {
        let served = self.queue.submit(
            request,
            |r| r.bytes,
            GROUP_BYTES_MAX,
            || {},
            |group| self.serve(group),
            |why| {
                let e = Error::ReadOnly(format!("a write group failed: {why}"));
                self.stop_writes(&e);
                Err(e)
            },
        );
        served.outcome?;
        Ok(served.writer)
    }

    /// Runs `request` through the write queue; its batch back when the
    /// leader sent it back (a latch), with nothing written.
    pub(super) fn submit(&self, request: WriteRequest) -> Result<Option<WriteBatch>> {
        let writer = self.serve_request(request)?;
        let request = &writer.request;
        if request.bounced.load(Ordering::Acquire) {
            return Ok(Some(std::mem::take(&mut *request.batch.lock())));
        }
        if request.count > 0 {
            let last = request.batch.lock().first_seqno() + u64::from(request.count) - 1;
            self.until_visible(last);
        }
        Ok(None)
    }

    /// The leader's work for one group.
    fn serve(&self, group: &[GroupWriter]) -> Vec<Result<()>> {
        if group.iter().any(|w| w.request.resume) {
            if let Err(e) = self.resume() {
                return fail_all(group.len(), &e);
            }
        }
        // Under the WAL lock, as for a writer of `write_direct.rs`: the
        // switch, the fences, the latch checks and the seqnos, so that seqno
        // order is WAL order and a batch goes to the memtable of the WAL
        // file it is in.
        let mut wal = self.wal.lock();
        if let Err(e) = self.ready_to_append(&mut wal, group) {
            return fail_all(group.len(), &e);
        }
        // Fences first, then each batch checked against the latches: an
        // ingestion latched its range before it asked for its fence, so
        // every batch of its range after the fence is sent back here.
        for w in group.iter().filter(|w| w.request.fence > 0) {
            let n = w.request.fence;
            let fenced = self
                .seq
                .allocate(n)
                .and_then(|first| self.seq.publish(first + n - 1).map(|()| first));
            match fenced {
                Ok(first) => w.request.fenced.store(first, Ordering::Release),
                Err(e) => return fail_all(group.len(), &e),
            }
        }
        // Every writer of the group gets the same outcome; a bounced one
        // reads its flag first.
        let all = group.len();
        let mut kept = Vec::new();
        let group = if self.latches.any_held() {
            for w in group {
                let bounce =
                    w.request.count > 0 && self.latches.touches_any(&w.request.batch.lock());
                if bounce {
                    w.request.bounced.store(true, Ordering::Release);
                } else {
                    kept.push(w.clone());
                }
            }
            &kept[..]
        } else {
            group
        };
        let total: u64 = group.iter().map(|w| u64::from(w.request.count)).sum();
        if total == 0 {
            return (0..all).map(|_| Ok(())).collect();
        }
        let first = match self.seq.allocate(total) {
            Ok(first) => first,
            Err(e) => return fail_all(all, &e),
        };
        let last = first + total - 1;
        let mut batches: SmallVec<[MutexGuard<'_, WriteBatch>; 4]> =
            group.iter().map(|w| w.request.batch.lock()).collect();
        let logged = self.log(&mut wal, group, &mut batches, first);
        let actives = self.active_memtables();
        drop(wal);
        let outcome = logged.and_then(|()| {
            batches
                .iter()
                .try_for_each(|b| apply_to_memtables(b, &actives))
        });
        // Published even after a failure (writes are stopped then): an
        // unpublished range would hold the visible seqno back for good.
        let published = self.seq.publish(last);
        let outcome = outcome.and(published);
        match outcome {
            Ok(()) => {
                self.counters.add_writes(group.len() as u64, total);
                (0..all).map(|_| Ok(())).collect()
            }
            Err(e) => {
                self.stop_writes(&e);
                fail_all(all, &e)
            }
        }
    }

    /// Stamps the group's batches with their seqnos from `first` and
    /// appends them to the WAL in one write, synced if one asked for it.
    /// Called holding the WAL lock.
    fn log(
        &self,
        wal: &mut WalWriter,
        group: &[GroupWriter],
        batches: &mut [MutexGuard<'_, WriteBatch>],
        first: u64,
    ) -> Result<()> {
        let mut next = first;
        for (w, b) in group.iter().zip(batches.iter_mut()) {
            if w.request.count > 0 {
                b.set_first_seqno(next)?;
                next += u64::from(w.request.count);
            }
        }
        let payloads: SmallVec<[&[u8]; 4]> = group
            .iter()
            .zip(batches.iter())
            .filter(|(w, _)| !w.request.disable_wal && w.request.count > 0)
            .map(|(_, b)| b.payload())
            .collect();
        let sync = group
            .iter()
            .any(|w| w.request.sync && !w.request.disable_wal);
        if !payloads.is_empty() {
            self.append_to_wal(wal, &payloads)?;
        }
        if sync {
            // Durable only once every earlier file is closed durably.
            self.wal_keeper.wait_closed(wal.number())?;
            wal.sync()?;
            self.counters.add_wal_sync();
        }
        Ok(())
    }
}
