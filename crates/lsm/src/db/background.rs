//! Background work: a pool of threads running flushes (first) and
//! compactions, the scheduling state they share, the listeners told of
//! what finished, and the deletion of files no version reaches any more.
//!
//! With two threads or more the pool is split by role. Flush threads (a
//! quarter of the pool, at least one) keep the process's CPU priority:
//! writers wait for them once memtables pile up. Compaction threads, blob
//! GC included, run each merge `Options::compaction_nice` lower, so that on
//! a busy machine it takes the CPU the foreground leaves rather than
//! preempting reads and writes; the write stalls of L0 still hold writers
//! back when compaction falls behind. The merge runs on a thread of its own
//! (`strata_fs::run_at_lower_priority`) while the compaction thread waits:
//! the install after it, whose locks flushes wait for, keeps the process's
//! priority, so that no waking thread preempts it inside them (a thread
//! cannot raise its priority back without privilege). A pool of one thread
//! does everything at the process's priority.
//!
//! `Background::state` is taken before only leaf locks: picking a
//! compaction loads a version (lock-free) and asks whether writers are idle
//! (the counters' own leaf lock).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::cf::CfState;
use super::DbInner;
use crate::column_family::ColumnFamilyId;
use crate::compaction::{self, Compaction};
use crate::version::{FileDesc, FileNumber, ObsoleteFile};

/// Told of finished background work; called on the background thread that
/// did it, so keep it short.
pub trait EventListener: Send + Sync {
    /// A flush installed its files.
    fn on_flush_completed(&self, _info: &FlushInfo) {}
    /// A compaction installed its outputs.
    fn on_compaction_completed(&self, _info: &CompactionInfo) {}
}

/// What a flush did.
#[derive(Debug, Clone)]
pub struct FlushInfo {
    /// The column family flushed.
    pub column_family: String,
    /// The files written into L0.
    pub files: Vec<FileDesc>,
}

/// What a compaction did.
#[derive(Debug, Clone)]
pub struct CompactionInfo {
    /// The column family compacted.
    pub column_family: String,
    /// The level the inputs came from, and the level of the outputs.
    pub input_level: u8,
    /// The level of the outputs.
    pub output_level: u8,
    /// The files removed.
    pub inputs: Vec<FileNumber>,
    /// The files added.
    pub outputs: Vec<FileDesc>,
    /// True for `compact_range`.
    pub manual: bool,
}

#[derive(Debug, Default)]
struct BgState {
    flush_queue: VecDeque<ColumnFamilyId>,
    flushing: HashSet<ColumnFamilyId>,
    /// Families whose compaction score may be above 1.
    compact_queue: VecDeque<ColumnFamilyId>,
    /// Files in running compactions.
    busy: HashSet<FileNumber>,
    running: HashMap<ColumnFamilyId, usize>,
    compactions_running: usize,
    /// Families in a `compact_range`: automatic compactions leave them be.
    manual: HashSet<ColumnFamilyId>,
    /// Families with a compaction out of L0 running. One at a time: a
    /// second one would take newer L0 files below the older ones still
    /// being compacted, and a read (which asks L0 first) could then find
    /// an old version above a new one.
    l0_running: HashSet<ColumnFamilyId>,
    stop: bool,
}

/// How long an idle background thread waits before it looks at every
/// family again.
const IDLE_POLL: Duration = Duration::from_millis(500);
/// How long writers must pause before blob collections dearer than
/// `garbage_ratio` run (`GcPolicy::writers_idle`).
const WRITERS_IDLE_AFTER: Duration = Duration::from_millis(500);

/// How long without a memtable switch before recycled WAL files give back
/// their spare space although writers still write.
const WAL_SPARES_KEPT_FOR: Duration = Duration::from_secs(10);

enum Job {
    Flush(ColumnFamilyId),
    Compact(Arc<CfState>, Compaction),
    /// Delete the files that nothing reaches any more. A file a running
    /// job, an iterator or a snapshot read held when it became obsolete is
    /// queued when that holder lets go; jobs delete the queue when they end,
    /// and an idle engine, which runs none, every `IDLE_POLL`; with
    /// `trim_wal`, recycled WAL files are cut back too.
    Idle {
        trim_wal: bool,
    },
}

/// The scheduling state and the threads.
#[derive(Debug)]
pub(crate) struct Background {
    state: Mutex<BgState>,
    /// Work was queued.
    work: Condvar,
    /// Work finished, or the engine stopped: stalled writers and waiters
    /// look again.
    changed: Condvar,
    threads: Mutex<Vec<JoinHandle<()>>>,
    max_compactions: usize,
    flush_threads: usize,
}

/// What a pool thread takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Flushes first, then compactions: the only thread of the pool.
    Any,
    /// Flushes only.
    Flush,
    /// Compactions only, at a lower CPU priority.
    Compaction,
}

impl Background {
    pub fn new(threads: usize) -> Background {
        let flush_threads = if threads < 2 { 0 } else { (threads / 4).max(1) };
        Background {
            state: Mutex::new(BgState::default()),
            work: Condvar::new(),
            changed: Condvar::new(),
            threads: Mutex::new(Vec::new()),
            max_compactions: threads.saturating_sub(flush_threads).max(1),
            flush_threads,
        }
    }

    /// The role of thread `i` of the pool.
    fn role(&self, i: usize) -> Role {
        match self.flush_threads {
            0 => Role::Any,
            n if i < n => Role::Flush,
            _ => Role::Compaction,
        }
    }

    pub fn schedule_flush(&self, cfs: impl IntoIterator<Item = ColumnFamilyId>) {
        let mut s = self.state.lock();
        for cf in cfs {
            if !s.flush_queue.contains(&cf) {
                s.flush_queue.push_back(cf);
            }
        }
        drop(s);
        self.work.notify_all();
    }

    pub fn schedule_compaction(&self, cf: ColumnFamilyId) {
        let mut s = self.state.lock();
        if !s.compact_queue.contains(&cf) {
            s.compact_queue.push_back(cf);
        }
        drop(s);
        self.work.notify_all();
    }

    pub fn notify_all(&self) {
        self.work.notify_all();
        self.changed.notify_all();
    }

    /// Waits until some background work finishes, or `timeout`.
    pub fn wait_for_change(&self, timeout: Duration) {
        let mut s = self.state.lock();
        if !s.stop {
            self.changed.wait_for(&mut s, timeout);
        }
    }

    pub fn stop_and_join(&self) {
        self.state.lock().stop = true;
        self.notify_all();
        let threads = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let _ = t.join();
        }
    }

    /// Marks `cf` under manual compaction once no automatic compaction of
    /// it runs; returns false if the engine is stopping.
    pub fn begin_manual(&self, cf: ColumnFamilyId) -> bool {
        let mut s = self.state.lock();
        while s.manual.contains(&cf) || s.running.get(&cf).copied().unwrap_or(0) > 0 {
            if s.stop {
                return false;
            }
            self.changed.wait_for(&mut s, Duration::from_millis(50));
        }
        s.manual.insert(cf);
        true
    }

    pub fn end_manual(&self, cf: ColumnFamilyId) {
        let mut s = self.state.lock();
        s.manual.remove(&cf);
        if !s.compact_queue.contains(&cf) {
            s.compact_queue.push_back(cf);
        }
        drop(s);
        self.notify_all();
    }

    /// Marks the files of `c` busy; false if one already is.
    pub fn claim(&self, c: &Compaction) -> bool {
        let mut s = self.state.lock();
        if files(c).any(|n| s.busy.contains(&n)) {
            return false;
        }
        s.busy.extend(files(c));
        true
    }

    pub fn release(&self, c: &Compaction) {
        let mut s = self.state.lock();
        for n in files(c) {
            s.busy.remove(&n);
        }
        drop(s);
        self.notify_all();
    }

    pub fn is_busy(&self, n: FileNumber) -> bool {
        self.state.lock().busy.contains(&n)
    }

    /// Whether a flush of `cf` is queued or running.
    pub fn flush_pending(&self, cf: ColumnFamilyId) -> bool {
        let s = self.state.lock();
        s.flushing.contains(&cf) || s.flush_queue.contains(&cf)
    }

    /// Compactions (blob GC's rewrites included) running on `cf`.
    pub fn compactions_running(&self, cf: ColumnFamilyId) -> usize {
        self.state.lock().running.get(&cf).copied().unwrap_or(0)
    }
}

fn files(c: &Compaction) -> impl Iterator<Item = FileNumber> + '_ {
    c.inputs
        .iter()
        .chain(c.overlapping.iter())
        .map(|f| f.number())
}

/// Starts the pool.
pub(crate) fn start(db: &Arc<DbInner>) {
    let mut threads = db.bg.threads.lock();
    for i in 0..db.options.background_threads {
        let db = db.clone();
        let role = db.bg.role(i);
        let name = match role {
            Role::Any => format!("strata-lsm-bg-{i}"),
            Role::Flush => format!("strata-lsm-flush-{i}"),
            Role::Compaction => format!("strata-lsm-compact-{i}"),
        };
        let t = std::thread::Builder::new()
            .name(name)
            .spawn(move || worker(&db, role))
            .expect("spawning a background thread");
        threads.push(t);
    }
}

fn worker(db: &DbInner, role: Role) {
    loop {
        let job = {
            let mut s = db.bg.state.lock();
            loop {
                if s.stop {
                    return;
                }
                if let Some(job) = next_job(db, &mut s, role) {
                    break job;
                }
                if db.bg.work.wait_for(&mut s, IDLE_POLL).timed_out() {
                    // Nothing came: look at every family again, for the
                    // blob collections that wait for writers to pause.
                    for id in db.cfs.load().by_id.keys() {
                        if !s.compact_queue.contains(id) {
                            s.compact_queue.push_back(*id);
                        }
                    }
                    let trim_wal = db.wal_trim_due();
                    if trim_wal || !db.obsolete.is_empty() {
                        break Job::Idle { trim_wal };
                    }
                }
            }
        };
        match job {
            Job::Idle { trim_wal } => {
                if trim_wal {
                    db.trim_wal_files();
                }
            }
            Job::Flush(cf) => {
                db.run_flush(cf);
                let mut s = db.bg.state.lock();
                s.flushing.remove(&cf);
                if !s.compact_queue.contains(&cf) {
                    s.compact_queue.push_back(cf);
                }
            }
            Job::Compact(cf, c) => {
                let nice = match role {
                    Role::Compaction => db.options.compaction_nice,
                    Role::Any | Role::Flush => 0,
                };
                db.run_compaction(&cf, &c, false, nice);
                db.bg.release(&c);
                let mut s = db.bg.state.lock();
                if c.input_level == 0 {
                    s.l0_running.remove(&cf.id);
                }
                s.compactions_running -= 1;
                if let Some(n) = s.running.get_mut(&cf.id) {
                    *n -= 1;
                }
                if !s.compact_queue.contains(&cf.id) {
                    s.compact_queue.push_back(cf.id);
                }
            }
        }
        db.delete_obsolete_files();
        db.bg.notify_all();
    }
}

/// The next job for a thread of `role`: a flush first, then a compaction
/// of a queued family whose score calls for one. Nothing once writes are
/// stopped by an error.
fn next_job(db: &DbInner, s: &mut BgState, role: Role) -> Option<Job> {
    if db.stopped.load(std::sync::atomic::Ordering::Acquire) {
        return None;
    }
    if role != Role::Compaction {
        if let Some(at) = s.flush_queue.iter().position(|cf| !s.flushing.contains(cf)) {
            let cf = s.flush_queue.remove(at).expect("position is in range");
            s.flushing.insert(cf);
            return Some(Job::Flush(cf));
        }
    }
    if role == Role::Flush || s.compactions_running >= db.bg.max_compactions {
        return None;
    }
    while let Some(id) = s.compact_queue.pop_front() {
        if s.manual.contains(&id) {
            continue;
        }
        let Some(cf) = db.cf_by_id(id) else { continue };
        if cf.is_dropped() {
            continue;
        }
        let version = cf.installer.load().version.clone();
        let busy = &s.busy;
        let picked = compaction::pick(&version, &cf.options.compaction, &|n| busy.contains(&n))
            .or_else(|| {
                let policy = cf.gc_policy(db.writers_idle());
                compaction::pick_blob_gc(&version, &policy, &|n| busy.contains(&n))
            });
        if let Some(c) = picked {
            if c.input_level == 0 && !s.l0_running.insert(id) {
                continue;
            }
            s.busy.extend(files(&c));
            s.compactions_running += 1;
            *s.running.entry(id).or_insert(0) += 1;
            // More may be possible in parallel: look at it again later.
            s.compact_queue.push_back(id);
            return Some(Job::Compact(cf, c));
        }
    }
    None
}

impl DbInner {
    /// Whether writers have paused long enough for the dearer blob
    /// collections (see `GcPolicy`).
    pub(super) fn writers_idle(&self) -> bool {
        self.counters.writers_idle(WRITERS_IDLE_AFTER)
    }

    /// Whether recycled WAL files should give back their spare space:
    /// writers paused, or memtables switch so seldom that the spares wait
    /// long for a use.
    fn wal_trim_due(&self) -> bool {
        self.writers_idle() || self.wal_keeper.no_switch_for(WAL_SPARES_KEPT_FOR)
    }

    /// Queues every family for a compaction check (at open).
    pub(super) fn schedule_all_compactions(&self) {
        for id in self.cfs.load().by_id.keys() {
            self.bg.schedule_compaction(*id);
        }
    }

    /// Deletes the SST and blob files whose last holder is gone.
    pub(super) fn delete_obsolete_files(&self) {
        while let Ok(file) = self.obsolete.try_recv() {
            let name = match file {
                ObsoleteFile::Table(n) => {
                    self.table_access.tables.evict(n);
                    if let Some(cache) = &self.cache {
                        cache.evict_file(n);
                    }
                    compaction::sst_file_name(n)
                }
                ObsoleteFile::Blob(n) => {
                    if let Some(cache) = &self.cache {
                        cache.evict_file(n);
                    }
                    compaction::blob_file_name(n)
                }
            };
            // A file that stays is a leftover the next open removes.
            let _ = self.fs.remove(&self.dir.join(name));
        }
    }
}
