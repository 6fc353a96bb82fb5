//! Resuming writes after the disk ran out of space. Any other error stops
//! writes until a reopen; ENOSPC is expected to pass (space is freed, a
//! volume grows), so a writer that finds writes stopped by it tries, at
//! most every `RESUME_INTERVAL`, to put the engine back in order:
//!
//! 1. write a fresh manifest (a snapshot of the persisted versions) and
//!    point CURRENT at it: the old one may end in a torn edit, after which
//!    nothing may be appended;
//! 2. give every family a new memtable logging into WAL number `n`, not yet
//!    created, and flush every memtable into L0: the manifest then names `n`
//!    as every family's log number, so recovery never reads the old WAL
//!    files, whose tail may be a torn append;
//! 3. create WAL `n`, delete the old ones, and let writes in again.
//!
//! It runs as a group-commit leader (a request in the write queue), so no
//! write is in flight meanwhile. A crash at any step recovers: before the
//! flush's edit the old WAL is the last and its torn tail is cut as usual;
//! after it the old files are below every log number.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::DbInner;
use crate::error::{Error, Result};
use crate::memtable::Memtable;

/// How often a stopped engine tries to resume.
pub(super) const RESUME_INTERVAL: Duration = Duration::from_millis(100);

/// True when `e` is the disk running out of space.
pub(super) fn is_no_space(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.raw_os_error() == Some(libc::ENOSPC))
        || e.to_string().contains("No space left on device")
}

impl DbInner {
    /// Asks for a resume if writes are stopped by ENOSPC and the last try
    /// is old enough; returns true if writes are open again.
    pub(super) fn maybe_resume(&self) -> bool {
        if !self.no_space.load(Ordering::Acquire) {
            return false;
        }
        {
            let mut last = self.last_resume.lock();
            if last.is_some_and(|t| t.elapsed() < RESUME_INTERVAL) {
                return false;
            }
            *last = Some(Instant::now());
        }
        self.submit_resume().is_ok() && !self.stopped.load(Ordering::Acquire)
    }

    /// The leader's part: steps 1 to 3 above.
    pub(super) fn resume(&self) -> Result<()> {
        if !self.stopped.load(Ordering::Acquire) {
            return Ok(());
        }
        {
            let mut m = self.manifest.lock();
            let families = m.families.clone();
            self.rewrite_manifest(&mut m, &families)?;
        }
        // The next WAL file, numbered after every one before it; removed
        // again if the flushes fail, so that no empty file is left between
        // two that hold writes (replay stops at a file not closed durably).
        // A retired WAL file whose close failed (out of space, say) is not
        // needed: its records are in the memtables the flushes below write
        // out, and writes stay stopped unless they all succeed.
        self.wal_keeper.clear_failure();
        let next = self.wal_keeper.next_file()?;
        let number = next.number();
        let cfs = self.cfs.load();
        let flushed = cfs.by_id.values().try_for_each(|cf| {
            let id = self.next_memtable.fetch_add(1, Ordering::Relaxed);
            cf.installer
                .switch_memtable(Arc::new(Memtable::with_log_number(id, number)))
        });
        let flushed = flushed.and_then(|()| {
            cfs.by_id
                .values()
                .try_for_each(|cf| self.flush_immutables(cf))
        });
        if let Err(e) = flushed {
            let path = next.path().to_path_buf();
            drop(next);
            let _ = self.fs.remove(&path);
            return Err(e);
        }
        // The old files are no longer needed: every memtable is flushed.
        *self.wal.lock() = next;
        self.delete_obsolete_wals();
        *self.error.lock() = None;
        self.no_space.store(false, Ordering::Release);
        self.stopped.store(false, Ordering::Release);
        for cf in cfs.by_id.values() {
            self.bg.schedule_compaction(cf.id);
        }
        self.bg.notify_all();
        Ok(())
    }
}
