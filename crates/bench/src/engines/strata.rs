//! [`LogEngine`] for Strata's raftlog, on the real disk.

use std::path::Path;

use strata_raftlog::format::{FileId, LOCK_FILE_NAME, RECYCLE_PREFIX};
use strata_raftlog::{Config, Engine, LogBatch};

use super::wipe::wipe_dir;
use super::{
    EngineError, EngineOptions, EngineStats, LogEngine, PurgeReport, RecoveryStats, WriteBatch,
    STATE_KEY,
};

const NAME: &str = "strata";

/// Strata's raftlog behind the bench's trait.
#[derive(Debug)]
pub struct StrataEngine {
    engine: Engine,
}

impl StrataEngine {
    /// Opens the engine in `dir` with the bench's options mapped onto [`Config`].
    pub fn open(dir: &Path, options: &EngineOptions) -> Result<StrataEngine, EngineError> {
        let mut config = Config::default();
        if !options.compression {
            config.compression_threshold_bytes = 0;
        }
        if let Some(bytes) = options.target_file_bytes {
            config.target_file_size_bytes = bytes;
        }
        if let Some(bytes) = options.purge_threshold_bytes {
            config.purge_threshold_bytes = bytes;
        }
        if let Some(n) = options.recycle_files_max {
            config.recycle_files_max = Some(n);
        }
        if let Some(bytes) = options.cached_tail_bytes {
            config.cached_tail_bytes = bytes;
        }
        let engine = Engine::open(dir, config).map_err(|e| EngineError::new(NAME, "open", e))?;
        Ok(StrataEngine { engine })
    }
}

impl LogEngine for StrataEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn write(&self, batch: &WriteBatch, sync: bool) -> Result<(), EngineError> {
        let mut log_batch = LogBatch::new();
        for a in &batch.appends {
            log_batch.add_entries(a.group, a.first_index, &a.entries);
            log_batch.put(a.group, STATE_KEY, &a.state);
        }
        self.engine
            .write(&mut log_batch, sync)
            .map(drop)
            .map_err(|e| EngineError::new(NAME, "write", e))
    }

    fn compact_to(&self, group: u64, index: u64) -> Result<(), EngineError> {
        self.engine
            .compact_to(group, index)
            .map(drop)
            .map_err(|e| EngineError::new(NAME, "compact", e))
    }

    fn purge(&self) -> Result<PurgeReport, EngineError> {
        let out = self
            .engine
            .purge()
            .map_err(|e| EngineError::new(NAME, "purge", e))?;
        Ok(PurgeReport {
            files_purged: out.files_purged,
            entries_rewritten: out.entries_rewritten,
            bytes_rewritten: out.bytes_rewritten,
            groups_to_compact: out.groups_to_compact,
        })
    }

    fn get_entry(&self, group: u64, index: u64) -> Result<Option<Vec<u8>>, EngineError> {
        self.engine
            .get_entry(group, index)
            .map_err(|e| EngineError::new(NAME, "get entry", e))
    }

    fn fetch_entries(&self, group: u64, begin: u64, end: u64) -> Result<Vec<Vec<u8>>, EngineError> {
        let entries = self
            .engine
            .fetch_entries(group, begin, end, usize::MAX)
            .map_err(|e| EngineError::new(NAME, "fetch entries", e))?;
        if entries.len() as u64 != end.saturating_sub(begin) {
            return Err(EngineError::msg(
                NAME,
                "fetch entries",
                format!(
                    "group {group}: asked for {begin}..{end}, got {} entries",
                    entries.len()
                ),
            ));
        }
        Ok(entries)
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
        let m = self.engine.metrics();
        let index = self.engine.index_stats();
        let files = self.engine.file_stats();
        let report = self.engine.recovery_report();
        EngineStats {
            fsyncs: Some(m.fsyncs),
            bytes_written: Some(m.bytes_written),
            payload_bytes: Some(m.payload_bytes),
            write_latency_us: Some([
                m.write_latency_us[0],
                m.write_latency_us[1],
                m.write_latency_us[2],
            ]),
            compressed_batches: Some(m.compressed_batches),
            files_purged: Some(m.files_purged),
            entries_rewritten: Some(m.entries_rewritten),
            live_entries: Some(index.entries),
            index_bytes_per_entry: Some(index.entry_bytes_per_entry),
            index_memory_bytes: Some(index.memory_bytes),
            files: Some(files.append_files + files.rewrite_files),
            recovery: Some(RecoveryStats {
                files: report.files,
                bytes_read: report.bytes_read,
                records: report.records,
                damaged: report.damage.len() as u64,
                duration: report.duration,
            }),
        }
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.engine
            .close()
            .map_err(|e| EngineError::new(NAME, "close", e))
    }
}

/// Removes the engine's files from `dir`, refusing if it holds anything else.
pub fn wipe(dir: &Path) -> Result<(), EngineError> {
    wipe_dir(NAME, dir, |name| {
        name == LOCK_FILE_NAME
            || name.starts_with(RECYCLE_PREFIX)
            || FileId::parse_file_name(name).is_some()
    })
}
