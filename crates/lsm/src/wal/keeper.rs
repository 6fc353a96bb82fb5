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

use parking_lot::{Condvar, Mutex};
use strata_fs::{File, FileSystem};

use super::WalWriter;
use crate::{Error, Result};

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
    writeback: Option<Writeback>,
    stop: bool,
}

struct Shared {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
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
            dir,
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
        let ready = self.shared.state.lock().ready.take();
        if let Some(w) = ready {
            let path = w.path().to_path_buf();
            drop(w);
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

enum Work {
    Close(WalWriter),
    Writeback(Writeback),
    Make(u64),
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

fn run(s: &Shared) {
    // The file the last writeback was for (not kept open by this), and
    // how far it is allocated.
    let mut allocated: Option<(std::sync::Weak<dyn File>, u64)> = None;
    loop {
        let work = {
            let mut st = s.state.lock();
            loop {
                // Closes first: sync writers and flushes may wait on them.
                if let Some(w) = st.retired.pop_front() {
                    st.closing = Some(w.number());
                    break Work::Close(w);
                }
                if st.stop {
                    return;
                }
                if let Some(w) = st.writeback.take() {
                    break Work::Writeback(w);
                }
                if st.ready.is_none() && !st.making {
                    st.making = true;
                    break Work::Make(s.next_file.fetch_add(1, Ordering::Relaxed));
                }
                s.changed.wait(&mut st);
            }
        };
        match work {
            Work::Close(mut w) => {
                let closed = w.close_durably();
                let mut st = s.state.lock();
                st.closing = None;
                if let Err(e) = closed {
                    if st.failed.is_none() {
                        st.failed = Some(format!("closing WAL file {}: {e}", w.number()));
                        s.failed.store(true, Ordering::Release);
                    }
                }
                s.unclosed.fetch_sub(1, Ordering::AcqRel);
                drop(st);
                s.changed.notify_all();
            }
            Work::Writeback(w) => {
                // A hint: its error stays with the file, whose sync reports it.
                let _ = w.file.start_writeback(w.offset, w.len);
                let want = (w.offset + w.len + ALLOCATE_AHEAD).min(s.prealloc);
                let have = match &allocated {
                    Some((file, to)) if std::ptr::addr_eq(file.as_ptr(), Arc::as_ptr(&w.file)) => {
                        *to
                    }
                    _ => FIRST_PIECE.min(s.prealloc),
                };
                if want > have {
                    // A hint too: an append past a failed allocation
                    // allocates in its own write, and meets ENOSPC there.
                    let _ = w.file.allocate(want);
                }
                allocated = Some((Arc::downgrade(&w.file), want.max(have)));
            }
            Work::Make(number) => {
                // Created with its header durable first: a power cut then
                // leaves a readable header before any preallocated zeros.
                let made = WalWriter::create(s.fs.clone(), &s.dir, number).ok();
                if let Some(w) = &made {
                    w.preallocate(FIRST_PIECE.min(s.prealloc));
                }
                let mut st = s.state.lock();
                st.making = false;
                st.ready = made;
                drop(st);
                s.changed.notify_all();
                // After a failed creation (the leader meets the failure on
                // its own path), try again only after `RETRY_AFTER`, or
                // sooner once other work or a file the leader made comes.
                let mut st = s.state.lock();
                while st.ready.is_none()
                    && !st.stop
                    && st.retired.is_empty()
                    && st.writeback.is_none()
                    && !st.making
                {
                    if s.changed.wait_for(&mut st, RETRY_AFTER).timed_out() {
                        break;
                    }
                }
            }
        }
    }
}

/// How long the thread waits before it tries again to make a file ahead
/// after a failure.
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_millis(100);
