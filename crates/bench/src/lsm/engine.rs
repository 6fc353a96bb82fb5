//! `KvEngine`: what the LSM workloads need from a key-value engine, so that
//! one workload drives Strata's lsm and, behind cargo features, fjall and
//! RocksDB in the same run.
//!
//! The trait speaks in the workload's terms (a batch of puts and deletes,
//! a point read, a seek and N nexts), and every engine is opened from one
//! [`KvSettings`], mapped onto each engine's own options, so that memtable,
//! file, block, filter, compression, cache and thread budgets match
//! (`docs/bench/lsm-vs-peers.md` gives the mapping and why).
//!
//! Adding an engine: a file beside `strata.rs` implementing [`KvEngine`], a
//! variant of [`KvEngineKind`], and arms in [`KvEngineKind::open`] and
//! [`KvEngineKind::wipe`] (behind its cargo feature).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::engines::EngineError;
use crate::proc_stats::ProcSample;

/// The engines `strata-bench lsm` can drive. Every variant exists in every
/// build, so that naming a peer the build lacks is a clear error rather
/// than an unknown value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KvEngineKind {
    /// Strata's lsm.
    Strata,
    /// fjall 3, a pure-Rust LSM engine (feature `peer-fjall`).
    Fjall,
    /// RocksDB through the `rocksdb` crate (feature `peer-rocksdb`).
    Rocksdb,
}

impl KvEngineKind {
    /// Every engine compiled in, in the order reports list them.
    pub fn all() -> Vec<KvEngineKind> {
        [
            KvEngineKind::Strata,
            KvEngineKind::Fjall,
            KvEngineKind::Rocksdb,
        ]
        .into_iter()
        .filter(|k| k.is_built())
        .collect()
    }

    /// The engine's short name: its directory and its column in reports.
    pub fn name(self) -> &'static str {
        match self {
            KvEngineKind::Strata => "strata",
            KvEngineKind::Fjall => "fjall",
            KvEngineKind::Rocksdb => "rocksdb",
        }
    }

    /// Returns whether this build includes the engine.
    pub fn is_built(self) -> bool {
        match self {
            KvEngineKind::Strata => true,
            KvEngineKind::Fjall => cfg!(feature = "peer-fjall"),
            KvEngineKind::Rocksdb => cfg!(feature = "peer-rocksdb"),
        }
    }

    /// Returns whether the engine can write without its log. fjall always
    /// journals, so a `--wal off` run leaves it out rather than compare a
    /// logged engine with unlogged ones.
    pub fn can_skip_wal(self) -> bool {
        !matches!(self, KvEngineKind::Fjall)
    }

    /// Checks that this build includes every engine of `kinds`.
    pub fn check_built(kinds: &[KvEngineKind]) -> Result<(), EngineError> {
        match kinds.iter().find(|k| !k.is_built()) {
            Some(k) => Err(k.not_built()),
            None => Ok(()),
        }
    }

    fn not_built(self) -> EngineError {
        EngineError::msg(
            self.name(),
            "open",
            format!(
                "this strata-bench was built without {0}; rebuild with \
                 `cargo build --release -p strata-bench --features peer-{0}` \
                 (or `--features peers`; RocksDB needs `apt-get install -y libclang-dev`)",
                self.name()
            ),
        )
    }

    /// Opens (creating if needed) the engine in `dir` with `settings`.
    pub fn open(self, dir: &Path, settings: &KvSettings) -> Result<Box<dyn KvEngine>, EngineError> {
        match self {
            KvEngineKind::Strata => Ok(Box::new(super::strata::StrataKv::open(dir, settings)?)),
            #[cfg(feature = "peer-fjall")]
            KvEngineKind::Fjall => Ok(Box::new(super::fjall::FjallKv::open(dir, settings)?)),
            #[cfg(feature = "peer-rocksdb")]
            KvEngineKind::Rocksdb => Ok(Box::new(super::rocksdb::RocksKv::open(dir, settings)?)),
            #[allow(
                unreachable_patterns,
                reason = "the arms above cover the peers built in"
            )]
            _ => Err(self.not_built()),
        }
    }

    /// Removes what the engine left in `dir` from an earlier run, refusing
    /// to touch a directory that holds anything else.
    pub fn wipe(self, dir: &Path) -> Result<(), EngineError> {
        match self {
            KvEngineKind::Strata => super::strata::wipe(dir),
            #[cfg(feature = "peer-fjall")]
            KvEngineKind::Fjall => super::fjall::wipe(dir),
            #[cfg(feature = "peer-rocksdb")]
            KvEngineKind::Rocksdb => super::rocksdb::wipe(dir),
            #[allow(
                unreachable_patterns,
                reason = "the arms above cover the peers built in"
            )]
            _ => Err(self.not_built()),
        }
    }
}

/// The settings every engine is opened with, each mapped onto the engine's
/// own option of the same meaning. Defaults are Strata's own defaults, so
/// that Strata runs as shipped and the peers are brought to it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct KvSettings {
    /// Memtable size at which it is switched and flushed.
    pub write_buffer_bytes: u64,
    /// Memtables (active and waiting for flush) before writers wait.
    pub max_write_buffers: usize,
    /// Size at which flush and compaction outputs are cut.
    pub target_file_bytes: u64,
    /// Target size of the level L0 compacts into.
    pub base_level_bytes: u64,
    /// L0 files that make L0 due for compaction.
    pub level0_compaction_trigger: usize,
    /// Uncompressed bytes of a data block.
    pub block_bytes: u64,
    /// Bloom filter bits per key (0: no filter).
    pub bloom_bits_per_key: u32,
    /// LZ4 on every level (otherwise no compression).
    pub lz4: bool,
    /// Bytes of the block cache.
    pub block_cache_bytes: u64,
    /// Threads for flushes and compactions.
    pub background_threads: usize,
    /// Strata's compaction threads run this much nicer (the peers' keep
    /// the process's priority).
    pub compaction_nice: u8,
    /// fjall's unsynced writes stay in its user-space journal buffer (its
    /// default) instead of reaching the OS before the write returns.
    pub fjall_buffered_journal: bool,
    /// Key-value separation: values of at least this many bytes go to blob
    /// files (Strata's `min_blob_size`, RocksDB's BlobDB `min_blob_size`,
    /// fjall's `separation_threshold`); `None` keeps every value inline.
    pub blob_min_bytes: Option<u64>,
    /// Whether blob garbage collection runs (with separation on).
    pub blob_gc: bool,
    /// Strata's blob block size (decompressed bytes per compressed block);
    /// `None` keeps the engine's default. The peers compress each value
    /// on its own.
    pub blob_block_bytes: Option<u64>,
    /// Strata's blob files in zstd with a dictionary of at most this many
    /// bytes trained per file; `None` keeps them in the tables' compression.
    pub blob_zstd_dictionary_bytes: Option<u64>,
    /// Strata's blob space amplification target; `None` keeps the
    /// engine's default.
    pub blob_space_amp_target: Option<f64>,
}

impl Default for KvSettings {
    fn default() -> Self {
        KvSettings {
            write_buffer_bytes: 64 << 20,
            max_write_buffers: 4,
            target_file_bytes: 64 << 20,
            base_level_bytes: 256 << 20,
            level0_compaction_trigger: 4,
            block_bytes: 4 << 10,
            bloom_bits_per_key: 10,
            lz4: true,
            block_cache_bytes: 512 << 20,
            background_threads: 2,
            compaction_nice: 10,
            fjall_buffered_journal: false,
            blob_min_bytes: None,
            blob_gc: true,
            blob_block_bytes: None,
            blob_zstd_dictionary_bytes: None,
            blob_space_amp_target: None,
        }
    }
}

/// How one write is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteFlags {
    /// Sync the log before the write returns.
    pub sync: bool,
    /// Write the log at all (off: the write lives in the memtable until a
    /// flush).
    pub wal: bool,
}

/// One operation of a write batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvOp {
    /// Puts a value under a key.
    Put(Vec<u8>, Vec<u8>),
    /// Deletes a key.
    Delete(Vec<u8>),
}

/// The bytes a batch of `ops` takes, with room for each item's framing:
/// the capacity an adapter gives its engine's batch, so that building it
/// never regrows (and copies) the values already in it.
pub fn op_bytes(ops: &[KvOp]) -> usize {
    const ITEM_FRAMING: usize = 16;
    ops.iter()
        .map(|op| match op {
            KvOp::Put(k, v) => k.len() + v.len() + ITEM_FRAMING,
            KvOp::Delete(k) => k.len() + ITEM_FRAMING,
        })
        .sum()
}

/// What a seek and its nexts read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanOutcome {
    /// Entries read.
    pub entries: u64,
    /// Key and value bytes read.
    pub bytes: u64,
}

/// The operations the LSM workloads run against an engine. Shared by the
/// workload's threads.
pub trait KvEngine: Send + Sync + fmt::Debug {
    /// Writes `ops` atomically, as `flags` say.
    fn write(&self, ops: &[KvOp], flags: WriteFlags) -> Result<(), EngineError>;

    /// Returns the length of the value of `key`, if any. Only the length
    /// comes back, so that each engine reads through its cheapest API
    /// (RocksDB's pinned slices, fjall's shared slices) and no engine pays
    /// a copy the others skip.
    fn get(&self, key: &[u8]) -> Result<Option<usize>, EngineError>;

    /// Seeks to the first key at or after `start` and reads up to `count`
    /// entries from there, before `end` (the iterator's upper bound, given
    /// to the engine so that it may read ahead no further) when given.
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        count: u64,
    ) -> Result<ScanOutcome, EngineError>;

    /// Flushes every memtable to files and returns once the flushes are
    /// done; compactions may still run ([`settle`] waits for them).
    fn flush(&self) -> Result<(), EngineError>;

    /// Returns whether the engine says it has background work running or
    /// due (flushes, compactions); `false` where it cannot tell.
    fn background_busy(&self) -> Result<bool, EngineError>;

    /// Total time writers were stalled or slowed down by the engine, in
    /// microseconds, if the engine reports it.
    fn stall_micros(&self) -> Option<u64>;

    /// Bytes the engine's compactions have written since open, by the
    /// level written to, if the engine reports them (Strata does).
    fn compaction_bytes_by_level(&self) -> Option<Vec<u64>> {
        None
    }

    /// The engine's own account of its levels (files and bytes per level,
    /// compaction bytes where it keeps them), for `--print-levels`.
    fn level_report(&self) -> Option<String> {
        None
    }

    /// Makes everything durable and closes the engine.
    fn close(self: Box<Self>) -> Result<(), EngineError>;
}

/// How long the process must write nothing, with the engine reporting no
/// background work, for the tree to count as settled: longer than the pause
/// between a flush ending and the compaction it triggers starting.
const QUIET: Duration = Duration::from_millis(600);
/// How often settling looks.
const SETTLE_POLL: Duration = Duration::from_millis(100);
/// Longest wait for compactions to settle: beyond it the engine is
/// reported as not settling rather than waited for forever.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(900);

/// Flushes the engine, then waits until its compactions have settled: the
/// engine reports no background work and the process has sent nothing to
/// storage for [`QUIET`]. The second test is the same for every engine and
/// catches a long compaction an engine's own counters only show at its end.
pub fn settle(engine: &dyn KvEngine, name: &'static str) -> Result<Duration, EngineError> {
    let start = Instant::now();
    engine.flush()?;
    let mut last_written = ProcSample::now().write_bytes;
    let mut quiet_since = Instant::now();
    loop {
        std::thread::sleep(SETTLE_POLL);
        let written = ProcSample::now().write_bytes;
        if engine.background_busy()? || written != last_written {
            last_written = written;
            quiet_since = Instant::now();
        } else if quiet_since.elapsed() >= QUIET {
            return Ok(start.elapsed());
        }
        if start.elapsed() > SETTLE_TIMEOUT {
            return Err(EngineError::msg(
                name,
                "settle",
                format!(
                    "compactions still running after {} s",
                    SETTLE_TIMEOUT.as_secs()
                ),
            ));
        }
    }
}

/// Returns the bytes the file system allocated to every file under `dir`,
/// subdirectories included, by kind of file: its extension (`sst`, `blob`,
/// `log`), else the name's leading letters (`MANIFEST`, `LOCK`), so that a
/// space gap between engines is traced to the files that hold it. Allocated
/// bytes (`du`, not `du --apparent-size`): what the engine holds on disk,
/// measured the same way for every engine. Allocated rather
/// than apparent sizes, so that a log an engine sizes up front (fjall sets
/// its journal's length to 64 MiB) counts for what it really takes.
/// The engines' directories are theirs, not files the bench manages through
/// Strata's `FileSystem`, so `std::fs` reads them.
pub fn dir_bytes_by_kind(dir: &Path) -> std::io::Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    add_dir_bytes(dir, &mut out)?;
    Ok(out)
}

fn add_dir_bytes(dir: &Path, out: &mut BTreeMap<String, u64>) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    /// `st_blocks` counts 512-byte units whatever the file system's block.
    const STAT_BLOCK: u64 = 512;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_dir() {
            add_dir_bytes(&entry.path(), out)?;
        } else {
            let name = entry.file_name();
            *out.entry(file_kind(&name.to_string_lossy())).or_default() +=
                meta.blocks() * STAT_BLOCK;
        }
    }
    Ok(())
}

/// `000012.sst` is `sst`; `MANIFEST-000005` is `MANIFEST`; `LOG` is `LOG`.
fn file_kind(name: &str) -> String {
    match name.rsplit_once('.') {
        Some((_, ext)) if !ext.is_empty() && !ext.bytes().all(|b| b.is_ascii_digit()) => {
            ext.to_string()
        }
        _ => {
            let letters: String = name
                .chars()
                .take_while(|c| c.is_ascii_alphabetic() || *c == '_')
                .collect();
            if letters.is_empty() {
                "other".to_string()
            } else {
                letters
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::file_kind;

    #[test]
    fn files_are_grouped_by_extension_else_by_their_leading_letters() {
        assert_eq!(file_kind("00000000000000a1.sst"), "sst");
        assert_eq!(file_kind("000012.log"), "log");
        assert_eq!(file_kind("MANIFEST-000005"), "MANIFEST");
        assert_eq!(file_kind("OPTIONS-000007"), "OPTIONS");
        assert_eq!(file_kind("LOG"), "LOG");
        // A numeric suffix is not a kind; nor is a name of digits.
        assert_eq!(file_kind("LOG.old.1700000000"), "LOG");
        assert_eq!(file_kind("42"), "other");
    }
}
