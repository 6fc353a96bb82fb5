//! lsm: Strata's LSM-tree key-value engine, the home of the regions' data.
//!
//! Built on the same foundation as raftlog (`strata-fs` for every byte of
//! I/O, `strata-codec` for checksums, varints and compression). The design is
//! in `docs/lsm.md`; the bytes on disk in `docs/format/`.
//!
//! This crate is being built in layers, bottom up: the internal key format
//! (`key`) comes first, then SST files (`sst`, with the shared block cache in
//! `cache`), the memtable, the write-ahead log, versions and compaction.
//!
//! The in-memory half of the write path: a [`WriteBatch`] is filled and
//! validated, takes consecutive sequence numbers from the [`SeqAllocator`],
//! is inserted into the column families' [`Memtable`]s, and becomes visible
//! to readers when the allocator publishes it. Readers merge memtables (and
//! later SST files) with a [`MergingIterator`] and see one snapshot through
//! a [`SnapshotIterator`].
//!
//! The file half: a [`Version`] is an immutable set of SST files by level,
//! changed by [`VersionEdit`]s that a [`VersionBuilder`] applies outside any
//! lock; an [`Installer`] publishes each new version with the memtables and
//! the visible seqno as one [`ReadState`] behind one pointer, which readers
//! load without a lock.

#![warn(missing_docs)]

pub mod batch;
pub mod blob;
pub mod cache;
pub mod column_family;
pub mod compaction;
pub mod error;
pub mod install_timing;
pub mod iter;
pub mod key;
pub mod manifest;
pub mod memtable;
pub mod read_state;
pub mod seq;
pub mod sst;
pub mod version;
pub mod wal;

pub use batch::{BatchItem, DecodedBatch, WriteBatch};
pub use column_family::{ColumnFamilyId, DEFAULT_COLUMN_FAMILY};
pub use compaction::{
    flush_memtables, pick, pick_manual, run_compaction, Compaction, CompactionFilter,
    CompactionOptions, CompactionReason, CompactionStats, FilterDecision, OutputContext,
    RateLimiter,
};

pub use cache::BlockCache;
pub use error::{Error, Result};
pub use install_timing::{InstallTimes, InstallTiming, TimeHistogram};
pub use iter::{
    FileOpener, InternalIterator, IterOptions, LevelIterator, MergingIterator, RangeTombstone,
    RangeTombstoneSet, SnapshotIterator,
};
pub use key::{InternalKey, SeqNo, ValueKind, MAX_SEQNO};
pub use memtable::{Memtable, MemtableId, MemtableIter, MemtableList};
pub use read_state::{Install, InstallError, Installer, PersistEdits, ReadState};
pub use seq::SeqAllocator;
pub use sst::{
    Compression, Properties, PropertiesCollector, SstFileInfo, SstIter, SstReader, SstWriter,
    SstWriterOptions,
};
/// What replay does with damaged records: the mode every Strata log shares.
pub use strata_log::RecoveryMode;
pub use version::{
    BuiltVersion, EditError, FileDesc, FileMeta, FileNumber, Level, ObsoleteFiles, Version,
    VersionBuilder, VersionEdit, NUM_LEVELS_DEFAULT,
};
pub mod db;

pub use db::{
    latch_waits_on_this_thread, BlobFileStats, ColumnFamily, ColumnFamilyOptions, CompactionInfo,
    Db, DbIterator, EventListener, FlushInfo, Hooks, IngestOptions, IngestReport, Options,
    ReadOptions, RecoveryReport, Snapshot, Statistics, WriteDelays, WriteOptions,
};

/// Bytes a WAL, SST or blob file writer writes between two requests that
/// the OS start writing them back (`strata_fs::WritebackPacer`): its final
/// sync then finds little dirty, and a WAL sync on the write path does not
/// wait behind a compaction's pile of dirty pages.
pub(crate) const WRITEBACK_BYTES: u64 = 1 << 20;
