//! The engine: [`Db`] ties the WAL, the memtables, the SST files, the
//! manifest and the background threads together.
//!
//! Locks, in the order they may be taken (a thread holding one takes only
//! later ones); readers (get, multi_get, iterators, snapshots) take none:
//! 1. the write queue (`strata_log::WriteQueue`): one group-commit leader
//!    at a time, for writes with `sync` and the engine's own requests;
//! 2. `wal`: the WAL writer, held by every writer (a leader for its group)
//!    to switch memtables, check latches, take seqnos and append, so that
//!    seqno order is WAL order; by flushes to read the current WAL number.
//!    Memtable inserts happen after it is released. The WAL thread's state
//!    (`wal/keeper/`, a leaf) is taken under it, never the reverse;
//! 3. a column family's installer lock (inside its `Installer`): one
//!    flush, compaction or ingestion of that family installs at a time;
//! 4. `manifest_sync`: held for one manifest write and sync made after an
//!    install published, outside the installer lock (or under it, for an
//!    ingestion); one at a time, the later ones finding their edits
//!    covered; nothing else writes the manifest while staged edits are out
//!    being written (family creation and drop take it too);
//! 5. `manifest`: the manifest file and the last persisted version of each
//!    family (its rewrite needs them), taken inside the persist hook, and
//!    briefly before and after a manifest sync;
//! 6. leaves: `bg` (background scheduling), `snapshots` (its shards), `error`, the
//!    sequence allocator's ranges, the block cache's shards, the range
//!    latches' set (`latch.rs`; a writer waits on a latch holding none of
//!    the locks above).
//!
//! The design, and what survives a crash, are in `docs/lsm.md`.

mod admin;
mod background;
mod blob;
pub use blob::BlobFileStats;
pub(crate) mod cf;
mod flush;
mod ingest;
mod ingest_files;
pub mod inspect;
mod iter;
mod latch;
mod manifest_log;
mod options;
mod read;
mod recovery;
mod resume;
mod scan_ahead;
mod scan_asks;
mod snapshot;
mod stats;
mod table_cache;
mod write;
mod write_direct;
mod write_group;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use crossbeam_channel::Receiver;
use parking_lot::Mutex;
use strata_fs::{DiskFs, FileLock, FileSystem};
use strata_log::group_commit::WriteQueue;

use crate::cache::BlockCache;
use crate::column_family::ColumnFamilyId;
use crate::compaction::{CompactionFilter, RateLimiter};
use crate::error::{Error, Result};
use crate::seq::SeqAllocator;
use crate::version::{FileNumber, ObsoleteFile, ObsoleteFiles};
use crate::wal::{WalKeeper, WalWriter};

pub use background::{CompactionInfo, EventListener, FlushInfo};
pub use cf::{check_name, ColumnFamily, COLUMN_FAMILY_NAME_MAX, DEFAULT_COLUMN_FAMILY_NAME};
pub use ingest::{IngestOptions, IngestReport};
pub use iter::DbIterator;
pub use latch::latch_waits_on_this_thread;
pub use options::{BlobOptions, ColumnFamilyOptions, Options, ReadOptions, WriteOptions};
pub use recovery::RecoveryReport;
pub use snapshot::Snapshot;
pub use stats::{Statistics, WriteDelays};

use background::Background;
use cf::CfSet;
use latch::RangeLatches;
use manifest_log::ManifestLog;
use snapshot::SnapshotList;
use stats::Counters;
use write_group::WriteRequest;

/// What cannot go into TOML: compaction filters, event listeners.
#[derive(Default, Clone)]
pub struct Hooks {
    /// The compaction filter of each column family, by name.
    pub compaction_filters: std::collections::HashMap<String, Arc<dyn CompactionFilter>>,
    /// Told of every finished flush and compaction.
    pub listeners: Vec<Arc<dyn EventListener>>,
    /// What fills the user properties of each SST file a family's flushes
    /// and compactions write, by family name.
    pub properties_collectors:
        std::collections::HashMap<String, Arc<crate::compaction::CollectorFactory>>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field(
                "compaction_filters",
                &self.compaction_filters.keys().collect::<Vec<_>>(),
            )
            .field("listeners", &self.listeners.len())
            .field(
                "properties_collectors",
                &self.properties_collectors.keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// An open database. Cheap to clone (an `Arc`); every method takes `&self`
/// and may be called from any thread. Dropping the last clone closes it
/// (see [`Db::close`] to see the error of closing).
#[derive(Debug, Clone)]
pub struct Db {
    handle: Arc<Handle>,
}

/// Shared by the clones of a `Db`; the background threads hold the
/// `DbInner` only, so the last user handle's drop can stop them.
#[derive(Debug)]
struct Handle {
    inner: Arc<DbInner>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        let _ = self.inner.shutdown();
    }
}

pub(crate) struct DbInner {
    fs: Arc<dyn FileSystem>,
    /// Shared: iterators and blob readers keep a handle, not a copy.
    dir: Arc<Path>,
    /// What reads open SST files with (the table cache among them), behind
    /// one reference count.
    table_access: Arc<read::TableAccess>,
    options: Options,
    hooks: Hooks,
    cfs: ArcSwap<CfSet>,
    seq: SeqAllocator,
    queue: WriteQueue<WriteRequest, Result<()>>,
    wal: Mutex<WalWriter>,
    /// Makes the next WAL file ahead and closes retired ones
    /// (`wal/keeper/`).
    wal_keeper: WalKeeper,
    manifest: Mutex<ManifestLog>,
    /// Held for a manifest write and sync made outside `manifest`: one at a time, so
    /// that the installs waiting behind one find their edits covered
    /// (`manifest_log.rs`).
    manifest_sync: Mutex<()>,
    /// Shared with the WAL thread, which numbers the files it makes.
    next_file: Arc<AtomicU64>,
    next_memtable: AtomicU64,
    cache: Option<Arc<BlockCache>>,
    obsolete_queue: ObsoleteFiles,
    obsolete: Receiver<ObsoleteFile>,
    rate_limiter: Arc<RateLimiter>,
    snapshots: Arc<SnapshotList>,
    /// The key ranges of ingestions in progress, which their writers wait
    /// out (`latch.rs`); one atomic load per write when none runs.
    latches: RangeLatches,
    bg: Background,
    /// The first error that stopped writes (a failed WAL write or sync, a
    /// failed flush or compaction, a failed manifest write).
    error: Mutex<Option<String>>,
    stopped: AtomicBool,
    /// The error that stopped writes was ENOSPC: writers try to resume.
    no_space: AtomicBool,
    last_resume: Mutex<Option<std::time::Instant>>,
    closed: AtomicBool,
    counters: Counters,
    recovery: RecoveryReport,
    _lock: Box<dyn FileLock>,
}

impl std::fmt::Debug for DbInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// Descriptors reserved at open beyond `max_open_files`.
const OPEN_FILES_HEADROOM: usize = 1024;

impl Db {
    /// Opens (or creates, with `create_if_missing`) the database in `dir` on
    /// the local disk.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Db> {
        Db::open_with(Arc::new(DiskFs::new()), dir, options, Hooks::default())
    }

    /// Opens the database in `dir` through `fs`, with `hooks`.
    pub fn open_with(
        fs: Arc<dyn FileSystem>,
        dir: impl AsRef<Path>,
        options: Options,
        hooks: Hooks,
    ) -> Result<Db> {
        options.validate()?;
        // The table files kept open, and room for WALs, blob files, the
        // manifest and the application's own: the descriptor table grows
        // here, not under a reader's `open` (`docs/lsm.md`, "Open files").
        fs.reserve_open_files(options.max_open_files.saturating_add(OPEN_FILES_HEADROOM));
        let inner = recovery::open(fs, dir.as_ref(), options, hooks)?;
        let inner = Arc::new(inner);
        background::start(&inner);
        inner.schedule_all_compactions();
        Ok(Db {
            handle: Arc::new(Handle { inner }),
        })
    }

    fn inner(&self) -> &Arc<DbInner> {
        &self.handle.inner
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.inner().dir
    }

    /// What recovery found at open.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner().recovery
    }

    /// Stops the background threads (a running flush or compaction is
    /// finished first), syncs the WAL and releases the directory. Unflushed
    /// memtables are not flushed: the WAL holds them. Returns the error that
    /// stopped writes, if one did. Other clones of this `Db` get
    /// `Error::Closed` afterwards.
    pub fn close(self) -> Result<()> {
        self.inner().shutdown()
    }
}

impl DbInner {
    /// A new file number, for an SST, a WAL or a manifest.
    fn new_file_number(&self) -> FileNumber {
        self.next_file.fetch_add(1, Ordering::Relaxed)
    }

    /// Refuses writes once closed or stopped by an error.
    fn check_writable(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if self.stopped.load(Ordering::Acquire) && !self.maybe_resume() {
            let why = self.error.lock().clone().unwrap_or_default();
            return Err(Error::ReadOnly(why));
        }
        Ok(())
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Stops writes for good (until reopened): called on any failed WAL or
    /// manifest write, failed sync, failed flush or compaction. Readers go
    /// on. Keeps the first error.
    fn stop_writes(&self, why: &Error) {
        let mut e = self.error.lock();
        if e.is_none() {
            *e = Some(why.to_string());
            self.no_space
                .store(resume::is_no_space(why), Ordering::Release);
        }
        self.stopped.store(true, Ordering::Release);
        drop(e);
        self.bg.notify_all();
    }

    fn cf_by_id(&self, id: ColumnFamilyId) -> Option<Arc<cf::CfState>> {
        self.cfs.load().get(id).cloned()
    }

    fn shutdown(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.bg.stop_and_join();
        // Close the retired WAL files and the current one durably: a clean
        // close loses nothing that was written without sync.
        let retired = self.wal_keeper.stop();
        let synced = if self.stopped.load(Ordering::Acquire) {
            Ok(())
        } else {
            retired.and_then(|()| {
                let mut wal = self.wal.lock();
                wal.close_durably()?;
                // Its preallocated zeros, or a recycled file's old bytes,
                // would hold space until the next open.
                wal.cut_at_end();
                Ok(())
            })
        };
        self.delete_obsolete_files();
        if let Some(why) = self.error.lock().clone() {
            return Err(Error::ReadOnly(why));
        }
        synced
    }
}
