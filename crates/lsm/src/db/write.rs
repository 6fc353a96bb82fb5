//! The write path: validation and pacing, then a write without `sync`
//! appends its own batch (`write_direct.rs`) and one with `sync` joins the
//! group commit (`write_group.rs`); both switch full memtables (here) under
//! the WAL lock.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use smallvec::SmallVec;

use super::cf::{CfState, ColumnFamily};
use super::options::WriteOptions;
use super::stats::DelayCause;
use super::write_group::{GroupWriter, WriteRequest};
use super::{Db, DbInner};
use crate::batch::WriteBatch;
use crate::column_family::ColumnFamilyId;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::memtable::Memtable;
use crate::wal::WalWriter;

/// The longest a writer is slowed down per write when compaction lags.
const SLOWDOWN_MAX: Duration = Duration::from_millis(2);

/// The pace writes are held to while they fill the last memtable
/// `max_write_buffers` allows: slower than a flush, so that the running
/// flush ends before that memtable fills and writers never stop for it (a
/// stop waits for a whole flush, 150-250 ms under compaction here).
const MEMTABLE_SLOWDOWN_BYTES_PER_SEC: f64 = 64.0 * 1024.0 * 1024.0;

/// How long a stopped writer sleeps between checks.
const STALL_POLL: Duration = Duration::from_millis(50);

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
            if !options.sync {
                // Nothing to share a sync with: no group commit
                // (`write_direct.rs`).
                match self.write_direct(batch.into_owned(), count, options.disable_wal)? {
                    None => return Ok(()),
                    Some(returned) => {
                        batch = Cow::Owned(returned);
                        continue;
                    }
                }
            }
            let request = WriteRequest::batch(batch.into_owned(), bytes, count, options);
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

    pub(super) fn check_open_and_not_stopped(&self) -> Result<()> {
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
    /// memtables are all full; while writes fill the last one, a write of
    /// `bytes` waits as long as [`MEMTABLE_SLOWDOWN_BYTES_PER_SEC`] takes
    /// to pass them (RocksDB's `max_write_buffer_number` works so too).
    /// Counted in the statistics.
    fn pace(&self, options: &WriteOptions, touched: &[Arc<CfState>], bytes: usize) -> Result<()> {
        let start = Instant::now();
        let mut stalled = false;
        loop {
            self.check_writable()?;
            let mut stop: Option<(DelayCause, String)> = None;
            // The largest delay asked for, as a fraction of `SLOWDOWN_MAX`.
            let mut delay: Option<(DelayCause, f64)> = None;
            let mut slow = |cause: DelayCause, d: f64| {
                if d > 0.0 && delay.is_none_or(|(_, max)| d > max) {
                    delay = Some((cause, d));
                }
            };
            for cf in touched {
                let state = cf.installer.load();
                let o = &cf.options;
                let c = &o.compaction;
                let l0 = state.version.level_len(0);
                // The active memtable is the last one allowed: writes fill
                // it slowly, and stop once it is full (or once more wait,
                // after a switch the engine asked for).
                let last = state.immutables.len() + 1 >= o.max_write_buffers;
                let full = state.active.approximate_bytes() as u64 >= o.write_buffer_bytes;
                if (last && full) || state.immutables.len() >= o.max_write_buffers {
                    stop = Some((
                        DelayCause::Memtables,
                        format!(
                            "{}: {} memtables wait for a flush",
                            cf.name,
                            state.immutables.len()
                        ),
                    ));
                    break;
                }
                if o.max_write_buffers >= 3 && last {
                    let d = bytes as f64 / MEMTABLE_SLOWDOWN_BYTES_PER_SEC;
                    slow(DelayCause::Memtables, d / SLOWDOWN_MAX.as_secs_f64());
                }
                if l0 >= c.level0_stop_trigger {
                    stop = Some((DelayCause::Level0, format!("{}: {l0} files in L0", cf.name)));
                    break;
                }
                let debt = cf
                    .compaction_debt
                    .load(std::sync::atomic::Ordering::Relaxed);
                // A limit of 0 is "never" (`CompactionOptions`).
                let (soft, hard) = (
                    c.soft_pending_compaction_bytes,
                    c.hard_pending_compaction_bytes,
                );
                if hard != 0 && debt >= hard {
                    stop = Some((
                        DelayCause::CompactionDebt,
                        format!("{}: {debt} bytes of compaction debt", cf.name),
                    ));
                    break;
                }
                if l0 >= c.level0_slowdown_trigger {
                    let span = (c.level0_stop_trigger - c.level0_slowdown_trigger).max(1);
                    let over = l0 + 1 - c.level0_slowdown_trigger;
                    slow(DelayCause::Level0, over as f64 / span as f64);
                }
                if soft != 0 && debt >= soft {
                    // Without a hard limit the delay is whole at twice the soft one.
                    let span = if hard > soft { hard - soft } else { soft };
                    let over = debt - soft;
                    slow(DelayCause::CompactionDebt, over as f64 / span as f64);
                }
            }
            if let Some((cause, why)) = stop {
                if options.no_slowdown {
                    return Err(Error::Busy(why));
                }
                stalled = true;
                let waited = Instant::now();
                self.bg.wait_for_change(STALL_POLL);
                self.counters.add_stall_part(cause, waited.elapsed());
                continue;
            }
            if stalled {
                self.counters.add_stall(start.elapsed());
                return Ok(());
            }
            if let Some((cause, delay)) = delay {
                if options.no_slowdown {
                    return Err(Error::Busy(
                        "writes are paced: flushes or compactions are behind".into(),
                    ));
                }
                let d = SLOWDOWN_MAX.mul_f64(delay.min(1.0));
                std::thread::sleep(d);
                self.counters.add_slowdown(cause, d);
            }
            return Ok(());
        }
    }

    /// The active memtable of every live family. Taken under the WAL lock,
    /// they are the memtables of the current WAL file: a switch happens
    /// only under that lock.
    pub(super) fn active_memtables(&self) -> Actives {
        self.cfs
            .load()
            .by_id
            .values()
            .map(|cf| (cf.id, cf.installer.load().active.clone()))
            .collect()
    }

    /// The checks and the switch before a write takes seqnos, done holding
    /// the WAL lock (`wal`) by both write paths: writes open, no retired
    /// WAL file failed its close, full memtables (and those a flush request
    /// in `group` names) switched. A failure of the last two stops writes.
    pub(super) fn ready_to_append(&self, wal: &mut WalWriter, group: &[GroupWriter]) -> Result<()> {
        self.check_open_and_not_stopped()?;
        if let Some(why) = self.wal_keeper.failure() {
            let e = Error::ReadOnly(why);
            self.stop_writes(&e);
            return Err(e);
        }
        self.switch_full_memtables(wal, group)
            .inspect_err(|e| self.stop_writes(e))
    }

    /// Appends `payloads` to the WAL in one write (held lock `wal`) and
    /// hands the writeback hint due to the WAL thread.
    pub(super) fn append_to_wal(&self, wal: &mut WalWriter, payloads: &[&[u8]]) -> Result<()> {
        if let Some(w) = wal.append_deferring_writeback(payloads)? {
            self.wal_keeper.start_writeback(w);
        }
        self.counters
            .add_wal_bytes(payloads.iter().map(|p| p.len() as u64).sum());
        Ok(())
    }

    /// Returns once `last` is visible: a write returns only then, so that
    /// its writer's next read sees it (earlier seqnos still in flight, or an
    /// ingestion's, may hold the visible seqno below it).
    pub(super) fn until_visible(&self, last: SeqNo) {
        if self.seq.visible() < last {
            self.wait_visible(last);
        }
    }

    /// Switches the memtables that reached their size, and those a flush
    /// request in the group asked for.
    fn switch_full_memtables(&self, wal: &mut WalWriter, group: &[GroupWriter]) -> Result<()> {
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
        self.switch_memtables(wal, &switch)
    }

    /// Starts a new WAL file and gives `cfs` new memtables that log into it;
    /// the old memtables wait for their flush. Called holding the WAL lock
    /// (`wal`), under which every seqno of a WAL write is allocated: the
    /// old memtables are sealed at the last seqno allocated so far, and a
    /// flush waits until it is visible (writers may still be inserting).
    fn switch_memtables(&self, wal: &mut WalWriter, cfs: &[Arc<CfState>]) -> Result<()> {
        let number = {
            // The next file was made ahead; the WAL thread closes the old
            // one durably (sync, marker, sync) off this path, before any
            // later file is synced for a writer (`wal/keeper/`).
            let next = self.wal_keeper.next_file()?;
            let number = next.number();
            let old = std::mem::replace(wal, next);
            self.wal_keeper.retire(old);
            number
        };
        let sealed = self.seq.allocated();
        for cf in cfs {
            let id = self
                .next_memtable
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            cf.installer.load().active.seal(sealed);
            cf.installer
                .switch_memtable(Arc::new(Memtable::with_log_number(id, number)))?;
        }
        self.bg.schedule_flush(cfs.iter().map(|cf| cf.id));
        Ok(())
    }
}

/// The active memtables the writes of one WAL write go to, by family.
pub(super) type Actives = SmallVec<[(ColumnFamilyId, Arc<Memtable>); 2]>;

/// Inserts the items of `batch` (stamped with its seqnos) into the
/// memtables of their families; an item of a family dropped since the
/// writer checked goes nowhere, as if written just after the drop.
pub(super) fn apply_to_memtables(batch: &WriteBatch, actives: &Actives) -> Result<()> {
    let first = batch.first_seqno();
    for (i, item) in batch.iter().enumerate() {
        let item = item.map_err(|e| Error::InvalidArgument(format!("write batch: {e}")))?;
        let Some((_, mem)) = actives.iter().find(|(id, _)| *id == item.cf) else {
            continue;
        };
        mem.insert(item.key, first + i as u64, item.kind, item.value)?;
    }
    Ok(())
}
