//! The WAL's own thread, which keeps file-system waits off the write path:
//! a memtable switch takes a WAL file made ahead of time and hands the one it
//! leaves to this thread to close durably; the writeback of a growing WAL
//! (`sync_file_range`, which blocks while the device queue is full) is
//! started here too.
//!
//! Measured before (1 KiB values, 2 GiB, 2 cores, compaction running): a
//! switch held the leader for up to 33 ms (the old file's sync 27 ms behind
//! compaction writes, the new file's creation and directory sync 6 ms), and
//! 276 appends waited 3-16 ms in writeback hints.
//!
//! What it keeps true:
//! - WAL files are used in ascending number order: only this thread makes
//!   them after open (one at a time, numbered when made), and the one made
//!   ahead is always the next one used. So a file made ahead and never used
//!   has the highest number of all, and holds no record.
//! - A retired file is closed durably (`WalWriter::close_durably`: sync, an
//!   empty-batch marker, sync) before any later file is synced for a
//!   writer: a write acknowledged as durable in file `N + 1` implies that
//!   `N` holds its durable marker. So replay may take a file before the last
//!   without its marker for one a power cut caught before its close, whose
//!   later files hold no synced write (`replay.rs`).
//! - Retired files are closed in the order they were retired.
//! - A file made ahead is preallocated (after its header is durable), so
//!   that appends do not allocate blocks in their write call: of the 1%
//!   slowest unsynced 1 KiB writes, more than half waited there (15 us at
//!   the median, up to 13 ms). It gets `FIRST_PIECE` bytes at first, and
//!   this thread extends the file in use to `ALLOCATE_AHEAD` past its
//!   appends each time it starts a writeback (every MiB appended), up to
//!   the whole size a file reaches before its memtables switch. Allocating
//!   that size up front held about twice that (the file in use and the one
//!   made ahead, 144 MiB with 64 MiB memtables) on disk as zeros; 16 MiB
//!   pieces still held 32 MiB once writes paused (a settled 2 GiB database
//!   took 1.03x RocksDB's bytes, all of it those zeros).
//! - WAL files are recycled through a pool of one: a flush hands the newest
//!   WAL file it no longer needs to this thread ([`WalKeeper::recycle`]),
//!   which renames it to the pool name, durably (`docs/format/wal.md`,
//!   "Recycled files", says why); the next file made ahead is the
//!   pool file with a new header (`WalWriter::recycle`). Writing over an
//!   old file's blocks made 16 KiB fills 40% and overwrites 31% faster
//!   (medians of 3, `docs/lsm.md`).
//!   The pool and the old bytes of recycled files cost up to two files'
//!   size on disk, so once writers pause the pool is removed and recycled
//!   files are cut back ([`WalKeeper::trim`]).
//!
//! A failed close is kept (every later [`WalKeeper::wait_closed`] returns it
//! and [`WalKeeper::failure`] reports it to the write leader, which stops
//! writes); a failed creation ahead is simply not there, and the leader makes
//! the file itself and meets the failure on its own path.
//!
//! Concurrency: `State` is a leaf lock (the leader takes it holding the
//! `wal` lock; this thread never takes `wal`); no file-system call is made
//! under it.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use strata_fs::{File, FileSystem};

use super::{WalWriter, POOL_FILE_NAME};

mod thread;
use crate::{Error, Result};
use thread::run;

/// A range of a WAL file to start writing back.
pub(crate) struct Writeback {
    pub file: Arc<dyn File>,
    pub offset: u64,
    pub len: u64,
}

#[derive(Default)]
struct State {
    /// The next file, made ahead.
    ready: Option<WalWriter>,
    /// True while this thread makes one (outside the lock).
    making: bool,
    /// Retired files waiting for their close, oldest first.
    retired: VecDeque<WalWriter>,
    /// The number of the file being closed (outside the lock).
    closing: Option<u64>,
    /// The first failed close, kept.
    failed: Option<String>,
    /// An obsolete WAL file handed in for the pool, not yet renamed.
    to_pool: Option<PathBuf>,
    /// A file waits at the pool path.
    pooled: bool,
    /// Asked to give back the pool and the file made ahead's old bytes.
    trim: bool,
    /// When the last file was made (`None`: none since the start).
    last_made: Option<Instant>,
    writeback: Option<Writeback>,
    stop: bool,
}

struct Shared {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    /// Where a recycled file waits ([`POOL_FILE_NAME`] in `dir`).
    pool: PathBuf,
    /// Files made out of the pool file.
    recycled: AtomicU64,
    /// The most bytes a file is allocated to ahead of its appends (its
    /// size at a memtable switch).
    prealloc: u64,
    next_file: Arc<AtomicU64>,
    state: Mutex<State>,
    /// Signalled when work arrives and when a close or a creation ends.
    changed: Condvar,
    /// Files retired and not yet closed (or closing): a lock-free check for
    /// the writers that must wait for none.
    unclosed: AtomicU64,
    failed: AtomicBool,
}

/// The WAL thread and what it shares with the write leader. Dropping it
/// closes what was retired and stops the thread.
pub(crate) struct WalKeeper {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for WalKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalKeeper")
            .field("unclosed", &self.shared.unclosed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl WalKeeper {
    /// Starts the thread, which makes the next WAL file at once,
    /// preallocated to `prealloc` bytes; file numbers come from
    /// `next_file`, the engine's shared counter.
    pub fn start(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        next_file: Arc<AtomicU64>,
        prealloc: u64,
    ) -> Result<WalKeeper> {
        let shared = Arc::new(Shared {
            fs,
            pool: dir.join(POOL_FILE_NAME),
            dir,
            recycled: AtomicU64::new(0),
            prealloc,
            next_file,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            unclosed: AtomicU64::new(0),
            failed: AtomicBool::new(false),
        });
        let spawn_failed = Error::io("spawn the WAL thread for", shared.dir.clone());
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("strata-lsm-wal".into())
                .spawn(move || run(&shared))
                .map_err(spawn_failed)?
        };
        Ok(WalKeeper {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The next WAL file: the one made ahead (waiting for it if it is being
    /// made), else one made here. The thread then makes the one after.
    pub fn next_file(&self) -> Result<WalWriter> {
        let s = &self.shared;
        let mut st = s.state.lock();
        while st.making && st.ready.is_none() {
            s.changed.wait(&mut st);
        }
        if let Some(w) = st.ready.take() {
            s.changed.notify_all();
            return Ok(w);
        }
        // Nothing made ahead (the last try failed, or the thread stopped):
        // make it here, numbered now, so numbers still ascend in use order;
        // `making` keeps the thread from making one meanwhile.
        st.making = true;
        let number = s.next_file.fetch_add(1, Ordering::Relaxed);
        drop(st);
        let made = WalWriter::create(s.fs.clone(), &s.dir, number);
        s.state.lock().making = false;
        s.changed.notify_all();
        made
    }

    /// Hands `wal`, no longer written, to the thread to close durably.
    pub fn retire(&self, mut wal: WalWriter) {
        let s = &self.shared;
        let mut st = s.state.lock();
        if st.stop {
            // The thread is gone (a write raced the engine's close): close
            // it here, so that nothing waits for a close that never comes.
            drop(st);
            if let Err(e) = wal.close_durably() {
                let mut st = s.state.lock();
                st.failed
                    .get_or_insert_with(|| format!("closing WAL file {}: {e}", wal.number()));
                s.failed.store(true, Ordering::Release);
            }
            return;
        }
        s.unclosed.fetch_add(1, Ordering::AcqRel);
        st.retired.push_back(wal);
        drop(st);
        s.changed.notify_all();
    }

    /// Offers `path`, a WAL file no memtable needs, for the pool. False if
    /// the pool is taken (or the thread stopped): the caller removes it.
    pub fn recycle(&self, path: PathBuf) -> bool {
        let s = &self.shared;
        let mut st = s.state.lock();
        if st.stop || st.pooled || st.to_pool.is_some() {
            return false;
        }
        st.to_pool = Some(path);
        drop(st);
        s.changed.notify_all();
        true
    }

    /// The most bytes a file is allocated to ahead of its appends.
    pub fn prealloc(&self) -> u64 {
        self.shared.prealloc
    }

    /// Whether a file waits at the pool path, its rename durable.
    #[cfg(test)]
    pub fn pooled(&self) -> bool {
        self.shared.state.lock().pooled
    }

    /// How many files were made out of the pool file.
    pub fn recycled(&self) -> u64 {
        self.shared.recycled.load(Ordering::Relaxed)
    }

    /// Whether no file was made for `quiet`: memtables switch so seldom
    /// that the pool and the file made ahead's old bytes are better given
    /// back even though writers have not paused.
    pub fn no_switch_for(&self, quiet: Duration) -> bool {
        let st = self.shared.state.lock();
        st.last_made.is_some_and(|at| at.elapsed() >= quiet)
    }

    /// Asks the thread to remove the pool file and cut the file made ahead
    /// back to its first piece: for when writers pause, since both then
    /// only hold space. The file in use is the caller's to trim, under the
    /// WAL lock (`WalWriter::trim_recycled_tail`).
    pub fn trim(&self) {
        let s = &self.shared;
        let mut st = s.state.lock();
        if st.pooled || st.ready.as_ref().is_some_and(WalWriter::has_recycled_tail) {
            st.trim = true;
            drop(st);
            s.changed.notify_all();
        }
    }

    /// Asks the thread to start writing back `range` (merged with a range
    /// of the same file not yet started).
    pub fn start_writeback(&self, range: Writeback) {
        let s = &self.shared;
        let mut st = s.state.lock();
        match &mut st.writeback {
            Some(w) if Arc::ptr_eq(&w.file, &range.file) => {
                let end = (w.offset + w.len).max(range.offset + range.len);
                w.offset = w.offset.min(range.offset);
                w.len = end - w.offset;
            }
            slot => *slot = Some(range),
        }
        drop(st);
        s.changed.notify_all();
    }

    /// Waits until every retired file numbered below `below` is closed
    /// durably; the kept failure if a close failed.
    pub fn wait_closed(&self, below: u64) -> Result<()> {
        let s = &self.shared;
        if s.unclosed.load(Ordering::Acquire) > 0 {
            let mut st = s.state.lock();
            while st.failed.is_none()
                && (st.closing.is_some_and(|n| n < below)
                    || st.retired.front().is_some_and(|w| w.number() < below))
            {
                s.changed.wait(&mut st);
            }
        }
        match self.failure() {
            Some(why) => Err(Error::ReadOnly(why)),
            None => Ok(()),
        }
    }

    /// The lowest number of a retired file not yet closed, if any: such a
    /// file must not be deleted under the thread.
    pub fn first_unclosed(&self) -> Option<u64> {
        let s = &self.shared;
        if s.unclosed.load(Ordering::Acquire) == 0 {
            return None;
        }
        let st = s.state.lock();
        st.closing
            .into_iter()
            .chain(st.retired.front().map(WalWriter::number))
            .min()
    }

    /// Forgets a failed close: for a resume after ENOSPC, once every
    /// memtable is flushed, so that no retired file's records are needed.
    pub fn clear_failure(&self) {
        let mut st = self.shared.state.lock();
        st.failed = None;
        self.shared.failed.store(false, Ordering::Release);
    }

    /// Why a retired file's close failed, once one did.
    pub fn failure(&self) -> Option<String> {
        if !self.shared.failed.load(Ordering::Acquire) {
            return None;
        }
        self.shared.state.lock().failed.clone()
    }

    /// Closes what was retired, removes the file made ahead (it holds no
    /// record) and stops the thread. The close's failure, if any.
    pub fn stop(&self) -> Result<()> {
        {
            let mut st = self.shared.state.lock();
            st.stop = true;
        }
        self.shared.changed.notify_all();
        let thread = self.thread.lock().take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        let (ready, pooled, to_pool) = {
            let mut st = self.shared.state.lock();
            (
                st.ready.take(),
                std::mem::take(&mut st.pooled),
                st.to_pool.take(),
            )
        };
        if let Some(w) = ready {
            let path = w.path().to_path_buf();
            drop(w);
            let _ = self.shared.fs.remove(&path);
        }
        // Neither holds a record anyone needs.
        if pooled {
            let _ = self.shared.fs.remove(&self.shared.pool);
        }
        if let Some(path) = to_pool {
            let _ = self.shared.fs.remove(&path);
        }
        match self.failure() {
            Some(why) => Err(Error::ReadOnly(why)),
            None => Ok(()),
        }
    }
}

impl Drop for WalKeeper {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// How far the allocation of the WAL file in use runs ahead of its
/// appends: several writebacks' worth, so that a thread busy closing a file
/// for a while still stays ahead of the writers (4 MiB is 20 ms of 1 KiB
/// writes at 200k a second).
pub(crate) const ALLOCATE_AHEAD: u64 = 4 << 20;

/// What a file made ahead is allocated before its first append: its first
/// writeback's worth, after which the allocation runs `ALLOCATE_AHEAD`
/// ahead. Small, since an idle engine keeps one such file waiting.
pub(crate) const FIRST_PIECE: u64 = 1 << 20;
