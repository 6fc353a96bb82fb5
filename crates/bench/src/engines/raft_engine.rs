//! [`LogEngine`] for TiKV's raft-engine (crates.io `raft-engine` 0.4), built
//! only with the `peers` (or `peer-raft-engine`) feature.
//!
//! The engine runs with raft-engine's own defaults (`Config::default()`), the
//! settings TiKV ships, in its own directory; only the bench's explicit
//! options (compression off, file size, purge threshold, recycling off) are
//! mapped onto its config.
//!
//! Entries are stored as raft-engine requires and as TiKV stores them: each
//! entry is a raft-rs `eraftpb::Entry` (rust-protobuf 2 codec, the codec
//! raft-engine itself depends on) with the payload in `data` and the index in
//! `index`, so raft-engine pays the protobuf encoding a real deployment pays.
//! The per-group state is a key-value put, compaction is `compact_to`, purge
//! is `purge_expired_files`, and a synced write is `write(&mut batch, true)`.
//!
//! raft-engine has no close: dropping it stops its background threads. Its
//! counters are Prometheus metrics in the process-wide default registry, so
//! this wrapper reads them as deltas from the moment it opened.

use std::path::Path;

use ::raft_engine::{Config, Engine, LogBatch, MessageExt};
use prometheus::proto::MetricFamily;
use raft::eraftpb::Entry;

use super::wipe::wipe_dir;
use super::{
    EngineError, EngineOptions, EngineStats, LogEngine, PurgeReport, WriteBatch, STATE_KEY,
};

const NAME: &str = "raft-engine";

/// Term written into every entry: the workloads never change leader, and a
/// constant keeps every engine's entries the same size from run to run.
const TERM: u64 = 1;

/// Tells raft-engine how to find an entry's index.
#[derive(Debug, Clone, Copy)]
struct EntryExt;

impl MessageExt for EntryExt {
    type Entry = Entry;

    fn index(e: &Entry) -> u64 {
        e.index
    }
}

/// raft-engine behind the bench's trait.
pub struct RaftEngineLog {
    engine: Engine,
    /// Counters at open, subtracted from later readings.
    baseline: Counters,
}

impl std::fmt::Debug for RaftEngineLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftEngineLog")
            .field("dir", &self.engine.path())
            .finish_non_exhaustive()
    }
}

impl RaftEngineLog {
    /// Opens raft-engine in `dir` with its default config.
    pub fn open(dir: &Path, options: &EngineOptions) -> Result<RaftEngineLog, EngineError> {
        let dir_str = dir.to_str().ok_or_else(|| {
            EngineError::msg(
                NAME,
                "open",
                format!("{} is not valid UTF-8", dir.display()),
            )
        })?;
        let mut config = Config {
            dir: dir_str.to_string(),
            ..Config::default()
        };
        if !options.compression {
            config.batch_compression_threshold = ::raft_engine::ReadableSize(0);
        }
        if let Some(bytes) = options.target_file_bytes {
            config.target_file_size = ::raft_engine::ReadableSize(bytes);
        }
        if let Some(bytes) = options.purge_threshold_bytes {
            config.purge_threshold = ::raft_engine::ReadableSize(bytes);
        }
        if options.recycle_files_max == Some(0) {
            config.enable_log_recycle = false;
        }
        let baseline = Counters::read();
        let engine = Engine::open(config).map_err(|e| EngineError::new(NAME, "open", e))?;
        Ok(RaftEngineLog { engine, baseline })
    }
}

impl LogEngine for RaftEngineLog {
    fn name(&self) -> &'static str {
        NAME
    }

    fn write(&self, batch: &WriteBatch, sync: bool) -> Result<(), EngineError> {
        let mut log_batch = LogBatch::default();
        let mut entries = Vec::new();
        for a in &batch.appends {
            entries.clear();
            entries.extend(a.entries.iter().enumerate().map(|(i, data)| Entry {
                index: a.first_index + i as u64,
                term: TERM,
                data: data.clone().into(),
                ..Entry::default()
            }));
            log_batch
                .add_entries::<EntryExt>(a.group, &entries)
                .map_err(|e| EngineError::new(NAME, "write", e))?;
            log_batch
                .put(a.group, STATE_KEY.to_vec(), a.state.clone())
                .map_err(|e| EngineError::new(NAME, "write", e))?;
        }
        self.engine
            .write(&mut log_batch, sync)
            .map(drop)
            .map_err(|e| EngineError::new(NAME, "write", e))
    }

    fn compact_to(&self, group: u64, index: u64) -> Result<(), EngineError> {
        // raft-engine logs a failed compaction and returns the count only.
        self.engine.compact_to(group, index);
        Ok(())
    }

    fn purge(&self) -> Result<PurgeReport, EngineError> {
        let before = Counters::read();
        let groups_to_compact = self
            .engine
            .purge_expired_files()
            .map_err(|e| EngineError::new(NAME, "purge", e))?;
        let after = Counters::read();
        Ok(PurgeReport {
            files_purged: before.files.saturating_sub(after.files),
            entries_rewritten: 0,
            bytes_rewritten: after.rewrite_bytes.saturating_sub(before.rewrite_bytes),
            groups_to_compact,
        })
    }

    fn get_entry(&self, group: u64, index: u64) -> Result<Option<Vec<u8>>, EngineError> {
        let entry = self
            .engine
            .get_entry::<EntryExt>(group, index)
            .map_err(|e| EngineError::new(NAME, "get entry", e))?;
        Ok(entry.map(|e| e.data.to_vec()))
    }

    fn fetch_entries(&self, group: u64, begin: u64, end: u64) -> Result<Vec<Vec<u8>>, EngineError> {
        let mut out = Vec::with_capacity(end.saturating_sub(begin) as usize);
        let n = self
            .engine
            .fetch_entries_to::<EntryExt>(group, begin, end, None, &mut out)
            .map_err(|e| EngineError::new(NAME, "fetch entries", e))?;
        if n as u64 != end.saturating_sub(begin) {
            return Err(EngineError::msg(
                NAME,
                "fetch entries",
                format!("group {group}: asked for {begin}..{end}, got {n} entries"),
            ));
        }
        Ok(out.into_iter().map(|e| e.data.to_vec()).collect())
    }

    fn first_index(&self, group: u64) -> Result<Option<u64>, EngineError> {
        Ok(self.engine.first_index(group))
    }

    fn last_index(&self, group: u64) -> Result<Option<u64>, EngineError> {
        Ok(self.engine.last_index(group))
    }

    fn get_state(&self, group: u64, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        Ok(self.engine.get(group, key))
    }

    fn stats(&self) -> EngineStats {
        let now = Counters::read();
        let base = &self.baseline;
        EngineStats {
            fsyncs: Some(now.syncs.saturating_sub(base.syncs)),
            bytes_written: Some(
                now.append_bytes.saturating_sub(base.append_bytes)
                    + now.rewrite_bytes.saturating_sub(base.rewrite_bytes),
            ),
            files: Some(now.files),
            ..EngineStats::default()
        }
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.engine
            .sync()
            .map_err(|e| EngineError::new(NAME, "close", e))?;
        drop(self);
        Ok(())
    }
}

/// The raft-engine metrics the bench reports, read from Prometheus' default
/// registry (raft-engine registers them there; they add up over every
/// raft-engine opened in the process).
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    /// `raft_engine_sync_log_duration_seconds`: one sample per fsync.
    syncs: u64,
    /// `raft_engine_write_size`: bytes of every batch appended by `write`.
    append_bytes: u64,
    /// `raft_engine_background_rewrite_bytes`: bytes copied by purge.
    rewrite_bytes: u64,
    /// `raft_engine_log_file_count`: files of both queues now.
    files: u64,
}

impl Counters {
    fn read() -> Counters {
        let families = prometheus::gather();
        let find = |name: &str| families.iter().find(|f| f.get_name() == name);
        let hist_count = |f: Option<&MetricFamily>| {
            f.map_or(0, |f| {
                f.get_metric()
                    .iter()
                    .map(|m| m.get_histogram().get_sample_count())
                    .sum()
            })
        };
        let hist_sum = |f: Option<&MetricFamily>| {
            f.map_or(0.0, |f| {
                f.get_metric()
                    .iter()
                    .map(|m| m.get_histogram().get_sample_sum())
                    .sum()
            })
        };
        let gauge_sum = |f: Option<&MetricFamily>| {
            f.map_or(0.0, |f| {
                f.get_metric()
                    .iter()
                    .map(|m| m.get_gauge().get_value())
                    .sum()
            })
        };
        Counters {
            syncs: hist_count(find("raft_engine_sync_log_duration_seconds")),
            append_bytes: hist_sum(find("raft_engine_write_size")) as u64,
            rewrite_bytes: hist_sum(find("raft_engine_background_rewrite_bytes")) as u64,
            files: gauge_sum(find("raft_engine_log_file_count")) as u64,
        }
    }
}

/// Removes raft-engine's files from `dir`, refusing if it holds anything else.
pub fn wipe(dir: &Path) -> Result<(), EngineError> {
    wipe_dir(NAME, dir, |name| {
        name == "LOCK"
            || name.ends_with(".raftlog")
            || name.ends_with(".rewrite")
            || name.ends_with(".raftlog.reserved")
    })
}
