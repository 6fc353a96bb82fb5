//! `Engine`: the public face of raftlog. Writes go through group commit into
//! the append queue; reads go to the index and then to the files.
//!
//! Invariants:
//! - A write is applied to the index only after its bytes are in the file (and
//!   synced, when any writer of its group asked for sync), and in the order of
//!   the log, so the index never shows what recovery would not. The update
//!   may run beside the next group's append (`append.rs`), so the index can
//!   lag the active file by the one group in flight, never a sealed file.
//! - After a failed sync `poisoned` is set and stays set: every later write
//!   fails with [`Error::Poisoned`].
//! - `min_dirty` is the lowest append-file sequence whose records hide data
//!   that is still copied in the rewrite queue; purge must not delete such a
//!   file before it has rewritten the rewrite queue (see `purge/mod.rs`).
//!
//! Concurrency: see `strata-log`'s `group_commit/mod.rs` (writers), `index.rs` (readers) and
//! `pipe.rs` (files). Purge runs under `purge_lock`, concurrently with both.
//!
//! Lock order, the one list every path follows: a thread that holds a lock
//! takes only locks further down, never one further up.
//! 1. `purge_lock` (purge, close)
//! 2. `pipe.rewrite` (the rewrite queue's active file; purge, close)
//! 3. `pipe.append` (the append queue's active file; the group-commit leader,
//!    `sync`, `file_stats`, close)
//! 4. the write queue's `finishing` ticket: held by a leader while its group
//!    reaches the index, after the append lock is released; a rotation,
//!    under the append lock, waits for it (`append.rs`)
//! 5. the index: a shard's map, then one group's `RwLock` (never two groups)
//! 6. `pending_compactions`
//! 7. `pipe.next_rewrite_seq`
//! 8. `pipe.files`
//! 9. `append_sizes`
//! 10. the preparer's state (`prepare.rs`)
//! 11. `pipe.recycled`
//! 12. leaves, never held while taking another: `poison_reason`, `encoders`,
//!     a writer's slot, the write queue's state, a file's index-section
//!     builder (`ActiveFile::section`). (A writer's payload is
//!     held by its leader across the index update; nobody else takes it
//!     until the writer is served.)
//!
//! The group-commit queue's own state and slots are never held while a leader
//! serves (see `strata-log`'s `group_commit/mod.rs`).
//!
//! The impl is split by responsibility: `write.rs` (the writers' checks and
//! encoding, the group-commit queue, sync, compaction), `append.rs` (the
//! leader's append and rotation, then the group's index update beside the
//! next group's append), `read.rs` (entries and
//! keys), `stats.rs` (counts and memory),
//! `purge/` at the crate root (freeing files); this file opens and closes.

mod append;
mod encoders;
mod read;
mod stats;
mod write;

pub use stats::{FileStats, IndexStats};
pub(crate) use write::WriteRequest;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use std::sync::Arc;
use strata_fs::{DiskFs, FileLock, FileSystem};

use crate::index::Index;
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::pipe::Pipe;
use crate::prepare::Preparer;
use crate::recovery::RecoveryReport;
use crate::{Config, Error, Result};
use strata_log::group_commit::WriteQueue;

/// The raft log engine. Share it between threads with an `Arc`.
#[derive(Debug)]
pub struct Engine {
    pub(crate) pipe: Pipe,
    pub(crate) index: Index,
    pub(crate) metrics: Arc<Metrics>,
    /// Makes the append queue's next file ahead of the rotation (`prepare.rs`);
    /// `None` when `Config::prepare_next_file` is off.
    pub(crate) preparer: Option<Preparer>,
    queue: WriteQueue<WriteRequest, Result<()>>,
    poisoned: AtomicBool,
    poison_reason: Mutex<String>,
    pub(crate) min_dirty: AtomicU64,
    /// Writers between their continuity check and the queue (encoding and
    /// compressing), which a syncing leader waits for.
    encoders: encoders::Encoders,
    /// Compactions made in the index and not yet logged: the next group commit
    /// writes them ahead of its records (see `compact_to`).
    pending_compactions: Mutex<Vec<(u64, u64)>>,
    /// Sequence of the active append file (only grows).
    active_seq: AtomicU64,
    pub(crate) purge_lock: Mutex<()>,
    /// End offset of every sealed append file, for sizing purge.
    pub(crate) append_sizes: Mutex<std::collections::BTreeMap<u64, u64>>,
    report: RecoveryReport,
    _lock: Box<dyn FileLock>,
}

impl Engine {
    /// Opens (creating if needed) the engine in `dir` on the real file system.
    pub fn open(dir: impl AsRef<Path>, config: Config) -> Result<Engine> {
        Self::open_with_fs(dir, config, Arc::new(DiskFs::new()))
    }

    /// Opens (creating if needed) the engine in `dir` on `fs`, recovering the
    /// index from the files (see `docs/raftlog.md`).
    pub fn open_with_fs(
        dir: impl AsRef<Path>,
        config: Config,
        fs: Arc<dyn FileSystem>,
    ) -> Result<Engine> {
        config.validate()?;
        let dir: PathBuf = dir.as_ref().to_path_buf();
        fs.create_dir_all(&dir)
            .map_err(Error::io("create dir", &dir))?;
        let lock_path = dir.join(crate::format::LOCK_FILE_NAME);
        let lock = fs.lock(&lock_path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                Error::Locked(dir.clone())
            } else {
                Error::io("lock", &lock_path)(e)
            }
        })?;
        let metrics = Arc::new(Metrics::new());
        let index = Index::new();
        let recovered = crate::recovery::recover(&fs, &dir, &config, &index, &metrics)?;
        let active_seq = recovered.active.id.seq;
        let recycled = Arc::new(Mutex::new(recovered.recycled));
        let preparer = match config.prepare_next_file {
            true => Some(
                Preparer::start(
                    fs.clone(),
                    dir.clone(),
                    config.clone(),
                    recycled.clone(),
                    metrics.clone(),
                    recovered.active.id.next(),
                )
                .map_err(Error::io("spawn preparer", &dir))?,
            ),
            false => None,
        };
        let pipe = Pipe {
            fs,
            dir,
            config,
            files: parking_lot::RwLock::new(recovered.files),
            append: Mutex::new(recovered.active),
            rewrite: Mutex::new(None),
            recycled,
            next_rewrite_seq: Mutex::new(recovered.next_rewrite_seq),
        };
        Ok(Engine {
            pipe,
            index,
            metrics,
            preparer,
            queue: WriteQueue::new(),
            poisoned: AtomicBool::new(false),
            poison_reason: Mutex::new(String::new()),
            min_dirty: AtomicU64::new(recovered.min_dirty),
            pending_compactions: Mutex::new(Vec::new()),
            encoders: Default::default(),
            active_seq: AtomicU64::new(active_seq),
            purge_lock: Mutex::new(()),
            append_sizes: Mutex::new(recovered.append_sizes),
            report: recovered.report,
            _lock: lock,
        })
    }

    fn poison(&self, e: &Error) {
        *self.poison_reason.lock() = e.to_string();
        self.poisoned.store(true, Ordering::SeqCst);
    }

    fn check_poisoned(&self) -> Result<()> {
        if self.poisoned.load(Ordering::SeqCst) {
            return Err(Error::Poisoned(self.poison_reason.lock().clone()));
        }
        Ok(())
    }

    /// Returns a copy of the engine's metrics.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.metrics.snapshot()
    }

    /// Returns what recovery found when the engine was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// Seals the active files with their index sections, syncs them and
    /// closes the engine, so that the next open reads no record of the files
    /// written so far. Dropping the engine instead loses nothing synced, but
    /// the next open scans the last files. Fails with [`Error::Poisoned`] if
    /// an earlier failure poisoned the engine.
    pub fn close(self) -> Result<()> {
        // Nothing more can be made durable: say so, rather than let the caller
        // believe the engine closed cleanly.
        self.check_poisoned()?;
        self.flush_compactions()?;
        // Writers still queued are served by their leader before the lock is ours.
        let _purge = self.purge_lock.lock();
        if let Some(rw) = self.pipe.rewrite.lock().as_ref() {
            self.seal_for_close(rw)?;
        }
        let active = self.pipe.append.lock();
        self.seal_for_close(&active)
    }

    fn seal_for_close(&self, active: &crate::pipe::ActiveFile) -> Result<()> {
        if active.write_index_section().is_ok() {
            Metrics::add(&self.metrics.index_sections_written, 1);
        }
        if let Err(e) = active.file.sync_data() {
            let e = Error::io("sync", self.pipe.path(active.id))(e);
            self.poison(&e);
            return Err(e);
        }
        Metrics::add(&self.metrics.fsyncs, 1);
        Ok(())
    }
}
