//! The write path: validation, pacing, then the group commit. The leader
//! of a group switches full memtables, takes the group's sequence numbers,
//! appends the batches to the WAL (one write, one sync if any writer asked
//! for it), inserts them into the memtables and publishes the last seqno.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use smallvec::SmallVec;
use strata_log::group_commit::Writer;

use super::cf::{CfState, ColumnFamily};
use super::options::WriteOptions;
use super::{Db, DbInner};
use crate::batch::WriteBatch;
use crate::column_family::ColumnFamilyId;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::memtable::Memtable;

/// Bytes of batches one leader takes into its group.
const GROUP_BYTES_MAX: u64 = 4 << 20;

/// The longest a writer is slowed down per write when compaction lags.
const SLOWDOWN_MAX: Duration = Duration::from_millis(2);

/// The pace writes are held to while the memtables are one short of
/// `max_write_buffers`: slower than a flush, so that the running flush ends
/// before the last memtable fills and writers never stop for it (a stop
/// waits for a whole flush, 150-250 ms under compaction here).
const MEMTABLE_SLOWDOWN_BYTES_PER_SEC: f64 = 64.0 * 1024.0 * 1024.0;

/// How long a stopped writer sleeps between checks.
const STALL_POLL: Duration = Duration::from_millis(50);

pub(crate) struct WriteRequest {
    /// Stamped with its seqnos by the leader.
    batch: Mutex<WriteBatch>,
    bytes: u64,
    count: u32,
    sync: bool,
    disable_wal: bool,
    /// Column families whose memtables to switch (a flush request), done
    /// by the leader since only the leader inserts.
    switch: Vec<ColumnFamilyId>,
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
    fn control() -> WriteRequest {
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
}

type GroupWriter = Arc<Writer<WriteRequest, Result<()>>>;

impl Db {
    /// Applies `batch` atomically: after a crash all of it or none is there,
    /// and a reader sees all of it or none. Typed errors: a bad argument in
    /// the batch or an unknown column family is `InvalidArgument` with
    /// nothing written; after a failed WAL write or sync the engine is
    /// read-only ([`Error::ReadOnly`]) until reopened.
    pub fn write(&self, options: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        self.inner().write(options, Cow::Borrowed(batch))
    }

    /// As [`Db::write`], taking the batch: spares the copy that `write`
    /// makes for the write queue.
    pub fn write_batch(&self, options: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.inner().write(options, Cow::Owned(batch))
    }

    /// Makes every write so far durable (one WAL sync), as if each had been
    /// written with `sync`.
    pub fn sync_wal(&self) -> Result<()> {
        let inner = self.inner();
        inner.check_writable()?;
        let r = {
            let mut wal = inner.wal.lock();
            inner
                .wal_keeper
                .wait_closed(wal.number())
                .and_then(|()| wal.sync())
        };
        if let Err(e) = &r {
            inner.stop_writes(e);
        }
        r
    }

    /// Writes `value` under `key` in `cf`.
    pub fn put(
        &self,
        options: &WriteOptions,
        cf: &ColumnFamily,
        key: &[u8],
        value: &[u8],
    ) -> Result<()> {
        let mut b = WriteBatch::with_capacity(key.len() + value.len() + 16);
        b.put(cf.live()?.id, key, value);
        self.write_batch(options, b)
    }

    /// Deletes `key` in `cf`.
    pub fn delete(&self, options: &WriteOptions, cf: &ColumnFamily, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::with_capacity(key.len() + 16);
        b.delete(cf.live()?.id, key);
        self.write_batch(options, b)
    }

    /// Deletes every key in `[start, end)` of `cf`.
    pub fn delete_range(
        &self,
        options: &WriteOptions,
        cf: &ColumnFamily,
        start: &[u8],
        end: &[u8],
    ) -> Result<()> {
        let mut b = WriteBatch::with_capacity(start.len() + end.len() + 16);
        b.delete_range(cf.live()?.id, start, end);
        self.write_batch(options, b)
    }
}

fn fail_all(n: usize, why: &Error) -> Vec<Result<()>> {
    (0..n)
        .map(|_| Err(Error::ReadOnly(why.to_string())))
        .collect()
}

impl DbInner {
    /// The write path; a borrowed batch is copied for the queue.
    pub(super) fn write(
        &self,
        options: &WriteOptions,
        mut batch: Cow<'_, WriteBatch>,
    ) -> Result<()> {
        self.check_writable()?;
        batch.validate()?;
        if batch.is_empty() {
            return Ok(());
        }
        let (bytes, count) = (batch.payload().len(), batch.count());
        let touched = self.touched_families(&batch)?;
        loop {
            // An ingestion in progress over a key this batch writes holds
            // it back until the ingestion is installed; one atomic load
            // otherwise.
            self.latches.wait_for(&batch);
            self.pace(options, &touched, bytes)?;
            let request = WriteRequest {
                batch: Mutex::new(batch.into_owned()),
                bytes: bytes as u64,
                count,
                sync: options.sync,
                disable_wal: options.disable_wal,
                ..WriteRequest::control()
            };
            // Sent back only when an ingestion latched the batch's range
            // after the check above: wait for it, then go again with the
            // batch the leader left untouched.
            match self.submit(request)? {
                None => return Ok(()),
                Some(returned) => batch = Cow::Owned(returned),
            }
        }
    }

    /// The live families `batch` writes; `InvalidArgument` naming one that
    /// does not exist.
    fn touched_families(&self, batch: &WriteBatch) -> Result<SmallVec<[Arc<CfState>; 2]>> {
        let cfs = self.cfs.load();
        let mut touched: SmallVec<[Arc<CfState>; 2]> = SmallVec::new();
        for item in batch.iter() {
            let item = item.map_err(|e| Error::InvalidArgument(format!("write batch: {e}")))?;
            if touched.iter().any(|cf| cf.id == item.cf) {
                continue;
            }
            match cfs.get(item.cf) {
                Some(cf) => touched.push(cf.clone()),
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "column family {} does not exist or was dropped",
                        item.cf
                    )))
                }
            }
        }
        Ok(touched)
    }

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
    fn submit(&self, request: WriteRequest) -> Result<Option<WriteBatch>> {
        let writer = self.serve_request(request)?;
        let request = &writer.request;
        if request.bounced.load(Ordering::Acquire) {
            return Ok(Some(std::mem::take(&mut *request.batch.lock())));
        }
        if request.count > 0 {
            // The group published its seqnos, but an ingestion holding an
            // earlier one (its manifest append in flight) keeps the visible
            // seqno below them: return only once the write is visible, so
            // that the writer's next read sees it.
            let last = request.batch.lock().first_seqno() + u64::from(request.count) - 1;
            if self.seq.visible() < last {
                self.wait_visible(last);
            }
        }
        Ok(None)
    }

    fn check_open_and_not_stopped(&self) -> Result<()> {
        self.check_open()?;
        if self.stopped.load(std::sync::atomic::Ordering::Acquire) {
            let why = self.error.lock().clone().unwrap_or_default();
            return Err(Error::ReadOnly(why));
        }
        Ok(())
    }

    /// Waits or sleeps while the touched families are too far behind:
    /// smoothly (a delay growing with L0 files and compaction debt between
    /// their slowdown and stop marks), and stops at the marks or when the
    /// memtables are all full; one memtable short of that, a write of
    /// `bytes` waits as long as [`MEMTABLE_SLOWDOWN_BYTES_PER_SEC`] takes
    /// to pass them. Counted in the statistics.
    fn pace(&self, options: &WriteOptions, touched: &[Arc<CfState>], bytes: usize) -> Result<()> {
        let start = Instant::now();
        let mut stalled = false;
        loop {
            self.check_writable()?;
            let mut stop: Option<String> = None;
            let mut delay = 0.0f64;
            for cf in touched {
                let state = cf.installer.load();
                let o = &cf.options;
                let c = &o.compaction;
                let l0 = state.version.level_len(0);
                if state.immutables.len() + 1 >= o.max_write_buffers {
                    stop = Some(format!(
                        "{}: {} memtables wait for a flush",
                        cf.name,
                        state.immutables.len()
                    ));
                    break;
                }
                if o.max_write_buffers >= 3 && state.immutables.len() + 2 >= o.max_write_buffers {
                    let d = bytes as f64 / MEMTABLE_SLOWDOWN_BYTES_PER_SEC;
                    delay = delay.max(d / SLOWDOWN_MAX.as_secs_f64());
                }
                if l0 >= c.level0_stop_trigger {
                    stop = Some(format!("{}: {l0} files in L0", cf.name));
                    break;
                }
                let debt = cf
                    .compaction_debt
                    .load(std::sync::atomic::Ordering::Relaxed);
                if debt >= c.hard_pending_compaction_bytes {
                    stop = Some(format!("{}: {debt} bytes of compaction debt", cf.name));
                    break;
                }
                if l0 >= c.level0_slowdown_trigger {
                    let span = (c.level0_stop_trigger - c.level0_slowdown_trigger).max(1);
                    let over = l0 + 1 - c.level0_slowdown_trigger;
                    delay = delay.max(over as f64 / span as f64);
                }
                if debt >= c.soft_pending_compaction_bytes {
                    let span = c
                        .hard_pending_compaction_bytes
                        .saturating_sub(c.soft_pending_compaction_bytes)
                        .max(1);
                    let over = debt - c.soft_pending_compaction_bytes;
                    delay = delay.max(over as f64 / span as f64);
                }
            }
            if let Some(why) = stop {
                if options.no_slowdown {
                    return Err(Error::Busy(why));
                }
                stalled = true;
                self.bg.wait_for_change(STALL_POLL);
                continue;
            }
            if stalled {
                self.counters.add_stall(start.elapsed());
                return Ok(());
            }
            if delay > 0.0 {
                if options.no_slowdown {
                    return Err(Error::Busy(
                        "writes are paced: flushes or compactions are behind".into(),
                    ));
                }
                let d = SLOWDOWN_MAX.mul_f64(delay.min(1.0));
                std::thread::sleep(d);
                self.counters.add_slowdown(d);
            }
            return Ok(());
        }
    }

    /// The leader's work for one group.
    fn serve(&self, group: &[GroupWriter]) -> Vec<Result<()>> {
        if group.iter().any(|w| w.request.resume) {
            if let Err(e) = self.resume() {
                return fail_all(group.len(), &e);
            }
        }
        if let Err(e) = self.check_open_and_not_stopped() {
            return fail_all(group.len(), &e);
        }
        if let Some(why) = self.wal_keeper.failure() {
            // A retired WAL file could not be closed durably.
            let e = Error::ReadOnly(why);
            self.stop_writes(&e);
            return fail_all(group.len(), &e);
        }
        if let Err(e) = self.switch_full_memtables(group) {
            self.stop_writes(&e);
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
        let batches: SmallVec<[MutexGuard<'_, WriteBatch>; 4]> =
            group.iter().map(|w| w.request.batch.lock()).collect();
        let outcome = self.log_and_apply(group, batches, first);
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

    fn log_and_apply(
        &self,
        group: &[GroupWriter],
        mut batches: SmallVec<[MutexGuard<'_, WriteBatch>; 4]>,
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
            .zip(&batches)
            .filter(|(w, _)| !w.request.disable_wal && w.request.count > 0)
            .map(|(_, b)| b.payload())
            .collect();
        let sync = group
            .iter()
            .any(|w| w.request.sync && !w.request.disable_wal);
        if !payloads.is_empty() || sync {
            let mut wal = self.wal.lock();
            if !payloads.is_empty() {
                if let Some(w) = wal.append_deferring_writeback(&payloads)? {
                    self.wal_keeper.start_writeback(w);
                }
                self.counters
                    .add_wal_bytes(payloads.iter().map(|p| p.len() as u64).sum());
            }
            if sync {
                // Durable only once every earlier file is closed durably.
                self.wal_keeper.wait_closed(wal.number())?;
                wal.sync()?;
                self.counters.add_wal_sync();
            }
        }
        let cfs = self.cfs.load();
        let mut actives: SmallVec<[(ColumnFamilyId, Arc<Memtable>); 2]> = SmallVec::new();
        for b in &batches {
            let first = b.first_seqno();
            for (i, item) in b.iter().enumerate() {
                let item = item.map_err(|e| Error::InvalidArgument(format!("write batch: {e}")))?;
                let mem = match actives.iter().find(|(id, _)| *id == item.cf) {
                    Some((_, m)) => m.clone(),
                    None => {
                        // A family dropped since the writer checked: its
                        // writes go nowhere, as if they came just after.
                        let Some(cf) = cfs.get(item.cf) else { continue };
                        let m = cf.installer.load().active.clone();
                        actives.push((item.cf, m.clone()));
                        m
                    }
                };
                mem.insert(item.key, first + i as u64, item.kind, item.value)?;
            }
        }
        Ok(())
    }

    /// Switches the memtables that reached their size, and those a flush
    /// request in the group asked for.
    fn switch_full_memtables(&self, group: &[GroupWriter]) -> Result<()> {
        let cfs = self.cfs.load();
        let mut switch: Vec<Arc<CfState>> = Vec::new();
        for cf in cfs.by_id.values() {
            let active = &cf.installer.load().active;
            let asked = group.iter().any(|w| w.request.switch.contains(&cf.id));
            let full = active.approximate_bytes() as u64 >= cf.options.write_buffer_bytes;
            if (asked || full) && !active.is_empty() {
                switch.push(cf.clone());
            }
        }
        if switch.is_empty() {
            return Ok(());
        }
        self.switch_memtables(&switch)
    }

    /// Starts a new WAL file and gives `cfs` new memtables that log into it;
    /// the old memtables wait for their flush. Called by the write leader.
    fn switch_memtables(&self, cfs: &[Arc<CfState>]) -> Result<()> {
        let number = {
            let mut wal = self.wal.lock();
            // The next file was made ahead; the WAL thread closes the old
            // one durably (sync, marker, sync) off this path, before any
            // later file is synced for a writer (`wal/keeper.rs`).
            let next = self.wal_keeper.next_file()?;
            let number = next.number();
            let old = std::mem::replace(&mut *wal, next);
            self.wal_keeper.retire(old);
            number
        };
        for cf in cfs {
            let id = self
                .next_memtable
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            cf.installer
                .switch_memtable(Arc::new(Memtable::with_log_number(id, number)))?;
        }
        self.bg.schedule_flush(cfs.iter().map(|cf| cf.id));
        Ok(())
    }
}
