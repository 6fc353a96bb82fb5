//! `VersionsEngine`: what `lsm-versions` needs from an engine: unlogged
//! writes to grow it, the three read-path entries that pin a version
//! (a snapshot, an iterator, a point read), each timed by the engine file
//! around the one call that pins, and the engine's own counts of live SST
//! files and installed versions.
//!
//! Each engine is opened from the shared [`KvSettings`] of `strata-bench
//! lsm` (`lsm/strata.rs`, `lsm/rocksdb.rs` map them), so memtable, file,
//! block, filter, compression, cache and thread budgets match.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use strata_lsm::InstallTiming;

use crate::engines::EngineError;
use crate::lsm::engine::KvSettings;

/// The engines `lsm-versions` can drive. Every variant exists in every
/// build, so that naming a peer the build lacks is a clear error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VersionsEngineKind {
    /// Strata's lsm.
    Strata,
    /// RocksDB through the `rocksdb` crate (feature `peer-rocksdb`).
    Rocksdb,
}

impl VersionsEngineKind {
    /// The engine's short name: its directory and its column in reports.
    pub fn name(self) -> &'static str {
        match self {
            VersionsEngineKind::Strata => "strata",
            VersionsEngineKind::Rocksdb => "rocksdb",
        }
    }

    /// Checks that this build includes every engine of `kinds`.
    pub fn check_built(kinds: &[VersionsEngineKind]) -> Result<(), EngineError> {
        match kinds.iter().find(|k| !k.is_built()) {
            Some(k) => Err(k.not_built()),
            None => Ok(()),
        }
    }

    fn is_built(self) -> bool {
        match self {
            VersionsEngineKind::Strata => true,
            VersionsEngineKind::Rocksdb => cfg!(feature = "peer-rocksdb"),
        }
    }

    fn not_built(self) -> EngineError {
        EngineError::msg(
            self.name(),
            "open",
            format!(
                "this strata-bench was built without {0}; rebuild with \
                 `cargo build --release -p strata-bench --features peer-{0}` \
                 (RocksDB needs `apt-get install -y libclang-dev`)",
                self.name()
            ),
        )
    }

    /// Opens (creating) the engine in `dir`.
    pub fn open(
        self,
        dir: &Path,
        settings: &KvSettings,
        tuning: &Tuning,
    ) -> Result<Box<dyn VersionsEngine>, EngineError> {
        match self {
            VersionsEngineKind::Strata => Ok(Box::new(super::strata::StrataVersions::open(
                dir, settings, tuning,
            )?)),
            #[cfg(feature = "peer-rocksdb")]
            VersionsEngineKind::Rocksdb => Ok(Box::new(super::rocksdb::RocksVersions::open(
                dir, settings, tuning,
            )?)),
            #[allow(
                unreachable_patterns,
                reason = "the arms above cover the peers built in"
            )]
            _ => {
                let _ = tuning;
                Err(self.not_built())
            }
        }
    }

    /// Removes what the engine left in `dir`, refusing a directory that
    /// holds anything else.
    pub fn wipe(self, dir: &Path) -> Result<(), EngineError> {
        match self {
            VersionsEngineKind::Strata => crate::lsm::strata::wipe(dir),
            #[cfg(feature = "peer-rocksdb")]
            VersionsEngineKind::Rocksdb => crate::lsm::rocksdb::wipe(dir),
            #[allow(
                unreachable_patterns,
                reason = "the arms above cover the peers built in"
            )]
            _ => Err(self.not_built()),
        }
    }
}

/// Engine options beyond the shared settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Tuning {
    /// SST files each engine keeps open (Strata's `max_open_files`,
    /// RocksDB's table cache); -1 keeps every file open.
    pub max_open_files: i32,
}

/// What one iterator probe took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IterTimes {
    /// Creating the iterator: the version pinned, its sources built.
    pub create: Duration,
    /// Seeking, reading one entry and dropping the iterator.
    pub seek_read_drop: Duration,
    /// The thread's context switches read right after the creation (and
    /// outside both timings), which separate a creation preempted or
    /// blocked from a seek that was.
    pub switches_at_create: Option<super::phase::Switches>,
}

/// The engine operations of `lsm-versions`. Shared by its threads.
pub trait VersionsEngine: Send + Sync + fmt::Debug {
    /// Writes `pairs` in one batch, without the log and without sync.
    fn write(&self, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<(), EngineError>;

    /// Writes each of `files` as an external SST file in `dir` (keys
    /// strictly ascending within a file and from one file to the next,
    /// every file beyond the keys already written), then ingests them all
    /// in one call, moving them: they land in the bottom level, as a bulk
    /// load would leave them.
    fn ingest(&self, dir: &Path, files: &[Vec<(Vec<u8>, Vec<u8>)>]) -> Result<(), EngineError>;

    /// Takes a snapshot and drops it; returns the time taking it took.
    fn snapshot(&self) -> Result<Duration, EngineError>;

    /// Creates an iterator, seeks to `key`, reads one entry and drops it.
    /// With `upper`, the iterator is bounded to `[key, upper)`, so only the
    /// files of that range are its sources.
    fn iterate(&self, key: &[u8], upper: Option<&[u8]>) -> Result<IterTimes, EngineError>;

    /// Reads `key`; returns whether it was found.
    fn get(&self, key: &[u8]) -> Result<bool, EngineError>;

    /// Compacts the whole key space down to the bottom level, rewriting
    /// every file there too, in the one call (Strata `compact_range`,
    /// RocksDB `CompactRange` with the bottommost level forced): each
    /// level's step replaces all of its files and the level below's in
    /// one install.
    fn compact_all(&self) -> Result<(), EngineError>;

    /// Live SST files, from the engine's own count.
    fn live_files(&self) -> Result<u64, EngineError>;

    /// A counter the engine raises at each new version of its file set
    /// (Strata: installs; RocksDB: its super-version number, which memtable
    /// switches raise too).
    fn versions_installed(&self) -> Result<u64, EngineError>;

    /// The engine's own timing of its installs, where it keeps one.
    fn install_timing(&self) -> Option<InstallTiming>;

    /// Closes the engine.
    fn close(self: Box<Self>) -> Result<(), EngineError>;
}
