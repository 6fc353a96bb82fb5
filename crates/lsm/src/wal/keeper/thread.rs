//! The WAL thread's loop: what it picks next, and each kind of work.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_fs::File;

use super::{Shared, Writeback, ALLOCATE_AHEAD, FIRST_PIECE};
use crate::wal::WalWriter;

enum Work {
    Close(WalWriter),
    Writeback(Writeback),
    /// Make file `number`, from the pool file if `from_pool`.
    Make {
        number: u64,
        from_pool: bool,
    },
    /// Rename this obsolete WAL file into the pool.
    Pool(PathBuf),
    /// Remove the pool file (if `pool`) and cut back `ready`'s old bytes.
    Trim {
        pool: bool,
        ready: Option<WalWriter>,
    },
}

pub(super) fn run(s: &Shared) {
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
                    break Work::Make {
                        number: s.next_file.fetch_add(1, Ordering::Relaxed),
                        from_pool: std::mem::take(&mut st.pooled),
                    };
                }
                if let Some(path) = st.to_pool.take() {
                    break Work::Pool(path);
                }
                if std::mem::take(&mut st.trim) {
                    let pool = std::mem::take(&mut st.pooled);
                    let ready = match &st.ready {
                        Some(w) if w.has_recycled_tail() && !st.making => {
                            st.making = true;
                            st.ready.take()
                        }
                        _ => None,
                    };
                    break Work::Trim { pool, ready };
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
            Work::Pool(path) => {
                // The rename is made durable before the pool file can be
                // reused: the next file made from it writes a new header
                // and syncs it, and a crash that then lost an unsynced
                // rename would show the old WAL name over the new header.
                // Replay reads every WAL file from the oldest log number any
                // family needs (a family without writes keeps an old one),
                // so such a file was met and refused as misnamed.
                let renamed = s.fs.rename(&path, &s.pool).is_ok();
                let pooled = renamed && s.fs.sync_dir(&s.dir).is_ok();
                if !pooled {
                    // Never reused: under either name it holds only its
                    // own old header and records.
                    let _ = s.fs.remove(if renamed { &s.pool } else { &path });
                }
                s.state.lock().pooled = pooled;
            }
            Work::Trim { pool, ready } => {
                if pool {
                    let _ = s.fs.remove(&s.pool);
                }
                if let Some(mut w) = ready {
                    w.trim_recycled_tail(FIRST_PIECE.min(s.prealloc));
                    let mut st = s.state.lock();
                    st.making = false;
                    st.ready = Some(w);
                    drop(st);
                    s.changed.notify_all();
                }
            }
            Work::Make { number, from_pool } => {
                // Created with its header durable first: a power cut then
                // leaves a readable header before any preallocated zeros.
                let recycled = from_pool
                    .then(|| {
                        WalWriter::recycle(s.fs.clone(), &s.dir, &s.pool, number)
                            .inspect_err(|_| {
                                let _ = s.fs.remove(&s.pool);
                            })
                            .ok()
                    })
                    .flatten();
                if recycled.is_some() {
                    s.recycled.fetch_add(1, Ordering::Relaxed);
                }
                let made =
                    recycled.or_else(|| WalWriter::create(s.fs.clone(), &s.dir, number).ok());
                if let Some(w) = &made {
                    w.preallocate(FIRST_PIECE.min(s.prealloc));
                }
                let mut st = s.state.lock();
                st.making = false;
                st.ready = made;
                st.last_made = Some(Instant::now());
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
const RETRY_AFTER: Duration = Duration::from_millis(100);
