//! `LogEngine`: what the workloads need from a raft log engine, so that one
//! workload can drive Strata's raftlog and, behind the `peers` feature, other
//! engines in the same run.
//!
//! The trait speaks in the workload's terms (a batch of per-group appends, each
//! with a state put), not in any engine's: every implementation translates a
//! [`WriteBatch`] into its own batch type, so each pays the same copy.
//!
//! Adding an engine: a file beside `strata.rs` implementing [`LogEngine`], a
//! variant of [`EngineKind`], and arms in [`EngineKind::open`] and
//! [`EngineKind::wipe`] (behind its cargo feature).
//!
//! The peers (`raft_engine.rs`, `rocksdb.rs`) compile only with the `peers`
//! feature (or `peer-raft-engine` / `peer-rocksdb` for one of them); their [`EngineKind`] variants exist in every build, so that naming
//! one in a build without it is a clear error rather than an unknown value.

#[cfg(feature = "peer-raft-engine")]
mod raft_engine;
#[cfg(feature = "peer-rocksdb")]
pub mod rocksdb;
mod strata;
pub mod wipe;

use std::fmt;
use std::path::Path;
use std::time::Duration;

/// The key of the per-group "raft state" the workloads put with every append,
/// as TiKV keeps a region's Raft hard state beside its log.
pub const STATE_KEY: &[u8] = b"raft_state";

/// The engines this build can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// Strata's raftlog.
    Strata,
    /// TiKV's raft-engine, with its defaults (needs the `peers` feature).
    RaftEngine,
    /// RocksDB laid out and tuned as TiKV's raftdb (needs the `peers` feature).
    Rocksdb,
}

impl EngineKind {
    /// Every engine compiled in, in the order reports list them.
    pub fn all() -> Vec<EngineKind> {
        [
            EngineKind::Strata,
            EngineKind::RaftEngine,
            EngineKind::Rocksdb,
        ]
        .into_iter()
        .filter(|k| k.is_built())
        .collect()
    }

    /// The engine's short name, used for its directory and in reports.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Strata => "strata",
            EngineKind::RaftEngine => "raft-engine",
            EngineKind::Rocksdb => "rocksdb",
        }
    }

    /// Returns whether this build includes the engine.
    pub fn is_built(self) -> bool {
        match self {
            EngineKind::Strata => true,
            EngineKind::RaftEngine => cfg!(feature = "peer-raft-engine"),
            EngineKind::Rocksdb => cfg!(feature = "peer-rocksdb"),
        }
    }

    /// Checks that this build includes every engine of `kinds`, before
    /// anything runs.
    pub fn check_built(kinds: &[EngineKind]) -> Result<(), EngineError> {
        match kinds.iter().find(|k| !k.is_built()) {
            Some(k) => Err(k.not_built()),
            None => Ok(()),
        }
    }

    fn not_built(self) -> EngineError {
        EngineError::msg(
            self.name(),
            "open",
            "this strata-bench was built without this peer engine; rebuild with \
             `cargo build --release -p strata-bench --features peers` \
             (RocksDB needs `apt-get install -y libclang-dev` first)"
                .to_string(),
        )
    }

    /// Opens (creating if needed) the engine in `dir`, recovering what is there.
    pub fn open(
        self,
        dir: &Path,
        options: &EngineOptions,
    ) -> Result<Box<dyn LogEngine>, EngineError> {
        match self {
            EngineKind::Strata => Ok(Box::new(strata::StrataEngine::open(dir, options)?)),
            #[cfg(feature = "peer-raft-engine")]
            EngineKind::RaftEngine => Ok(Box::new(self::raft_engine::RaftEngineLog::open(
                dir, options,
            )?)),
            #[cfg(feature = "peer-rocksdb")]
            EngineKind::Rocksdb => Ok(Box::new(self::rocksdb::RocksLog::open(dir, options)?)),
            #[cfg(not(feature = "peer-raft-engine"))]
            EngineKind::RaftEngine => Err(self.not_built()),
            #[cfg(not(feature = "peer-rocksdb"))]
            EngineKind::Rocksdb => Err(self.not_built()),
        }
    }

    /// Removes what the engine left in `dir` from an earlier run, refusing to
    /// touch a directory that holds anything else.
    pub fn wipe(self, dir: &Path) -> Result<(), EngineError> {
        match self {
            EngineKind::Strata => strata::wipe(dir),
            #[cfg(feature = "peer-raft-engine")]
            EngineKind::RaftEngine => self::raft_engine::wipe(dir),
            #[cfg(feature = "peer-rocksdb")]
            EngineKind::Rocksdb => self::rocksdb::wipe(dir),
            #[cfg(not(feature = "peer-raft-engine"))]
            EngineKind::RaftEngine => Err(self.not_built()),
            #[cfg(not(feature = "peer-rocksdb"))]
            EngineKind::Rocksdb => Err(self.not_built()),
        }
    }
}

/// Settings every engine understands; each maps them onto its own config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineOptions {
    /// Compress batches (where the engine can).
    pub compression: bool,
    /// Size at which a log file is sealed; `None` keeps the engine's default.
    pub target_file_bytes: Option<u64>,
    /// Log size above which purge rewrites lagging data; `None` keeps the
    /// engine's default.
    pub purge_threshold_bytes: Option<u64>,
    /// Purged files kept for reuse as new log files; `None` keeps the engine's
    /// default.
    pub recycle_files_max: Option<usize>,
    /// Strata only: how far behind the active file's end its synced pages
    /// stay cached (0 keeps them all); `None` keeps the engine's default.
    pub cached_tail_bytes: Option<u64>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            compression: true,
            target_file_bytes: None,
            purge_threshold_bytes: None,
            recycle_files_max: None,
            cached_tail_bytes: None,
        }
    }
}

/// One group's part of a batch: entries from `first_index` on, and the new
/// value of its state key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupAppend {
    /// The group.
    pub group: u64,
    /// Index of the first entry.
    pub first_index: u64,
    /// The entries, with consecutive indexes.
    pub entries: Vec<Vec<u8>>,
    /// The value put under [`STATE_KEY`].
    pub state: Vec<u8>,
}

/// What a writer hands to [`LogEngine::write`]: appends to several groups,
/// written atomically.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    /// The appends, one per group.
    pub appends: Vec<GroupAppend>,
}

impl WriteBatch {
    /// Returns the user bytes of the batch: entries and state values.
    pub fn payload_bytes(&self) -> u64 {
        self.appends
            .iter()
            .map(|a| a.entries.iter().map(|e| e.len() as u64).sum::<u64>() + a.state.len() as u64)
            .sum()
    }

    /// Returns the number of entries in the batch.
    pub fn entry_count(&self) -> u64 {
        self.appends.iter().map(|a| a.entries.len() as u64).sum()
    }
}

/// What one purge did, in terms every engine can fill (zeros where it has no
/// such notion).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeReport {
    /// Files deleted or recycled.
    pub files_purged: u64,
    /// Entries copied to free old files.
    pub entries_rewritten: u64,
    /// Bytes copied to free old files.
    pub bytes_rewritten: u64,
    /// Groups the engine asks the caller to compact.
    pub groups_to_compact: Vec<u64>,
}

/// What recovery did when the engine was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RecoveryStats {
    /// Files scanned.
    pub files: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Records applied.
    pub records: u64,
    /// Damaged or torn records cut off.
    pub damaged: u64,
    /// Time the engine itself measured.
    pub duration: Duration,
}

/// An engine's own counters. A field is `None` when the engine does not
/// report it; reports print "n/a" rather than a made-up zero.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EngineStats {
    /// Syncs issued (file and directory).
    pub fsyncs: Option<u64>,
    /// Bytes the engine wrote to its files, headers and rewrites included.
    pub bytes_written: Option<u64>,
    /// User payload bytes the engine was given.
    pub payload_bytes: Option<u64>,
    /// Write latency in microseconds as the engine measured it: p50, p99, p99.9.
    pub write_latency_us: Option<[u64; 3]>,
    /// Batches stored compressed.
    pub compressed_batches: Option<u64>,
    /// Files purged.
    pub files_purged: Option<u64>,
    /// Entries copied by purge.
    pub entries_rewritten: Option<u64>,
    /// Live entries in the engine's index.
    pub live_entries: Option<u64>,
    /// Index bytes per live entry (entry locations only).
    pub index_bytes_per_entry: Option<f64>,
    /// Heap bytes of the index.
    pub index_memory_bytes: Option<u64>,
    /// Files the engine holds now.
    pub files: Option<u64>,
    /// What the last open recovered.
    pub recovery: Option<RecoveryStats>,
}

/// The operations the workloads run against an engine. Implementations are
/// shared by writer, purge and verify threads.
pub trait LogEngine: Send + Sync + fmt::Debug {
    /// The engine's short name.
    fn name(&self) -> &'static str;

    /// Writes `batch` atomically; with `sync`, returns once it is durable.
    fn write(&self, batch: &WriteBatch, sync: bool) -> Result<(), EngineError>;

    /// Drops the entries of `group` below `index`.
    fn compact_to(&self, group: u64, index: u64) -> Result<(), EngineError>;

    /// Frees what compactions made obsolete.
    fn purge(&self) -> Result<PurgeReport, EngineError>;

    /// Returns entry `index` of `group`, if the engine holds it.
    fn get_entry(&self, group: u64, index: u64) -> Result<Option<Vec<u8>>, EngineError>;

    /// Returns the entries `begin..end` of `group`; fails if any is missing.
    /// The default reads them one by one.
    fn fetch_entries(&self, group: u64, begin: u64, end: u64) -> Result<Vec<Vec<u8>>, EngineError> {
        (begin..end)
            .map(|i| {
                self.get_entry(group, i)?.ok_or_else(|| {
                    EngineError::msg(
                        self.name(),
                        "fetch entries",
                        format!("group {group}: entry {i} is missing"),
                    )
                })
            })
            .collect()
    }

    /// Returns the first index of `group`, if it has entries.
    fn first_index(&self, group: u64) -> Result<Option<u64>, EngineError>;

    /// Returns the last index of `group`, if it has entries.
    fn last_index(&self, group: u64) -> Result<Option<u64>, EngineError>;

    /// Returns the value of `key` in `group`.
    fn get_state(&self, group: u64, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError>;

    /// Returns the engine's counters.
    fn stats(&self) -> EngineStats;

    /// Makes everything durable and closes the engine.
    fn close(self: Box<Self>) -> Result<(), EngineError>;
}

/// An engine operation that failed.
#[derive(Debug)]
pub struct EngineError {
    /// The engine's short name.
    pub engine: &'static str,
    /// What the bench asked of it.
    pub op: &'static str,
    /// The engine's own error.
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl EngineError {
    /// Wraps an engine's error.
    pub fn new(
        engine: &'static str,
        op: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        EngineError {
            engine,
            op,
            source: source.into(),
        }
    }

    /// An error described by the bench itself.
    pub fn msg(engine: &'static str, op: &'static str, message: String) -> Self {
        EngineError::new(engine, op, message)
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.engine, self.op, self.source)
    }
}

impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}
