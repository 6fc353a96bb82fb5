//! [`LogEngine`] for RocksDB laid out as TiKV's raftdb (the RocksDB instance
//! TiKV kept its Raft logs in before raft-engine), built only with the
//! `peers` (or `peer-rocksdb`) feature.
//!
//! Layout, as TiKV's raftdb keys it (TiKV adds a two-byte local prefix that
//! every key shares; it changes nothing here and is left out):
//! - an entry: key `{ u64 BE group | u64 BE index }`, value the entry bytes,
//!   so a group's entries are contiguous and in index order;
//! - a state value: key `{ 0xFF | u64 BE group | key }`. Groups are far below
//!   2^56, so every entry key starts with 0x00 and no state key falls inside a
//!   group's entry range.
//!
//! Writes go through the WAL; a synced write sets `WriteOptions::set_sync`.
//! Compaction deletes the compacted indexes one key at a time in one unsynced
//! batch, as TiKV's raftdb GC did; RocksDB then drops them in its own
//! compactions, so `purge` has nothing to do.
//!
//! Appends never overwrite here (the workloads only append), so the Raft rule
//! that an append at or below the last index drops the old suffix is not
//! implemented.
//!
//! Concurrency: RocksDB is thread-safe. `floors` (each group's first live
//! index, so that compaction knows where to start deleting) is behind a mutex
//! held only to read or update one entry, never across a RocksDB call.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use ::rocksdb::statistics::Ticker;
use ::rocksdb::{
    BlockBasedOptions, DBCompressionType, Direction, IteratorMode, Options, WriteOptions, DB,
};

use super::wipe::wipe_dir;
use super::{
    EngineError, EngineOptions, EngineStats, LogEngine, PurgeReport, WriteBatch, STATE_KEY,
};

const NAME: &str = "rocksdb";

/// First byte of every state key; entry keys start with 0x00.
const STATE_PREFIX: u8 = 0xFF;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// RocksDB behind the bench's trait.
pub struct RocksLog {
    db: DB,
    /// The options the DB was opened with; they hold its statistics.
    options: Options,
    /// Each group's first live index, once known.
    floors: Mutex<HashMap<u64, u64>>,
}

impl std::fmt::Debug for RocksLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksLog")
            .field("dir", &self.db.path())
            .finish_non_exhaustive()
    }
}

/// Returns the key of entry `index` of `group`.
fn entry_key(group: u64, index: u64) -> [u8; 16] {
    debug_assert!(
        group >> 56 == 0,
        "group {group} would collide with state keys"
    );
    let mut key = [0; 16];
    key[..8].copy_from_slice(&group.to_be_bytes());
    key[8..].copy_from_slice(&index.to_be_bytes());
    key
}

/// Returns the index of `key` if it is an entry key of `group`.
fn entry_index(group: u64, key: &[u8]) -> Option<u64> {
    if key.len() != 16 || key[..8] != group.to_be_bytes() {
        return None;
    }
    Some(u64::from_be_bytes(key[8..].try_into().ok()?))
}

/// Returns the key of state `name` of `group`.
fn state_key(group: u64, name: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(9 + name.len());
    key.push(STATE_PREFIX);
    key.extend_from_slice(&group.to_be_bytes());
    key.extend_from_slice(name);
    key
}

/// Options as TiKV's raftdb defaults them, from TiKV's documented
/// `[raftdb]` / `[raftdb.defaultcf]` config template: the same values, so the
/// comparison is with RocksDB as TiKV tuned it for Raft logs.
fn raftdb_options(compression: bool) -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    // [raftdb]
    o.set_max_background_jobs(4); // max-background-jobs = 4
    o.set_max_subcompactions(2); // max-sub-compactions = 2
    o.set_max_open_files(40960); // max-open-files = 40960
    o.set_max_manifest_file_size(20 * MIB); // max-manifest-file-size = "20MB"
    o.set_writable_file_max_buffer_size(MIB as u64); // writable-file-max-buffer-size = "1MB"
    o.set_enable_pipelined_write(true); // enable-pipelined-write = true
    o.set_allow_concurrent_memtable_write(false); // allow-concurrent-memtable-write = false
    o.set_bytes_per_sync(MIB as u64); // bytes-per-sync = "1MB"
    o.set_wal_bytes_per_sync(512 * KIB as u64); // wal-bytes-per-sync = "512KB"
    o.enable_statistics(); // enable-statistics = true (also how fsyncs are counted)
                           // [raftdb.defaultcf]
    let lz4 = DBCompressionType::Lz4;
    let none = DBCompressionType::None;
    if compression {
        // compression-per-level = ["no", "no", "lz4", "lz4", "lz4", "zstd", "zstd"];
        // this build has no zstd, so lz4 stands in on levels 5 and 6, which a
        // Raft log (deleted soon after it is written) never reaches.
        o.set_compression_per_level(&[none, none, lz4, lz4, lz4, lz4, lz4]);
    } else {
        o.set_compression_per_level(&[none; 7]);
    }
    let mut table = BlockBasedOptions::default();
    table.set_block_size(64 * KIB); // block-size = "64KB"
    table.set_cache_index_and_filter_blocks(true); // cache-index-and-filter-blocks = true
    table.set_pin_l0_filter_and_index_blocks_in_cache(true); // pin-l0-filter-and-index-blocks = true
    o.set_block_based_table_factory(&table);
    o.set_write_buffer_size(128 * MIB); // write-buffer-size = "128MB"
    o.set_max_write_buffer_number(5); // max-write-buffer-number = 5
    o.set_min_write_buffer_number_to_merge(1); // min-write-buffer-number-to-merge = 1
    o.set_max_bytes_for_level_base(512 * MIB as u64); // max-bytes-for-level-base = "512MB"
                                                      // target-file-size-base = "8MB" in the current template (the early
                                                      // `[rocksdb.raftcf]` template had "32MB"); the current one is used.
    o.set_target_file_size_base(8 * MIB as u64);
    o.set_level_zero_file_num_compaction_trigger(4); // level0-file-num-compaction-trigger = 4
    o.set_level_zero_slowdown_writes_trigger(20); // level0-slowdown-writes-trigger = 20
    o.set_level_zero_stop_writes_trigger(36); // level0-stop-writes-trigger = 36
    o.set_level_compaction_dynamic_level_bytes(true); // dynamic-level-bytes = true
    o.set_optimize_filters_for_hits(true); // optimize-filters-for-hits = true
    o
}

impl RocksLog {
    /// Opens (creating if needed) the DB in `dir` with raftdb's options. The
    /// bench's file-size, purge and recycling options have no RocksDB
    /// counterpart and are ignored; compression off turns it off on every level.
    pub fn open(dir: &Path, options: &EngineOptions) -> Result<RocksLog, EngineError> {
        let opts = raftdb_options(options.compression);
        let db = DB::open(&opts, dir).map_err(|e| EngineError::new(NAME, "open", e))?;
        Ok(RocksLog {
            db,
            options: opts,
            floors: Mutex::new(HashMap::new()),
        })
    }

    fn floor(&self, group: u64) -> Option<u64> {
        self.floors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&group)
            .copied()
    }

    fn set_floor(&self, group: u64, index: u64) {
        self.floors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(group, index);
    }
}

impl LogEngine for RocksLog {
    fn name(&self) -> &'static str {
        NAME
    }

    fn write(&self, batch: &WriteBatch, sync: bool) -> Result<(), EngineError> {
        let mut wb = ::rocksdb::WriteBatch::default();
        for a in &batch.appends {
            for (i, e) in a.entries.iter().enumerate() {
                wb.put(entry_key(a.group, a.first_index + i as u64), e);
            }
            wb.put(state_key(a.group, STATE_KEY), &a.state);
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(sync);
        self.db
            .write_opt(wb, &wo)
            .map_err(|e| EngineError::new(NAME, "write", e))
    }

    fn compact_to(&self, group: u64, index: u64) -> Result<(), EngineError> {
        let from = match self.floor(group) {
            Some(f) => f,
            None => match self.first_index(group)? {
                Some(f) => f,
                None => return Ok(()),
            },
        };
        if index <= from {
            return Ok(());
        }
        let mut wb = ::rocksdb::WriteBatch::default();
        for i in from..index {
            wb.delete(entry_key(group, i));
        }
        self.db
            .write_opt(wb, &WriteOptions::default())
            .map_err(|e| EngineError::new(NAME, "compact", e))?;
        self.set_floor(group, index);
        Ok(())
    }

    fn purge(&self) -> Result<PurgeReport, EngineError> {
        // RocksDB reclaims deleted keys in its background compactions.
        Ok(PurgeReport::default())
    }

    fn get_entry(&self, group: u64, index: u64) -> Result<Option<Vec<u8>>, EngineError> {
        if self.floor(group).is_some_and(|f| index < f) {
            return Ok(None);
        }
        self.db
            .get(entry_key(group, index))
            .map_err(|e| EngineError::new(NAME, "get entry", e))
    }

    fn first_index(&self, group: u64) -> Result<Option<u64>, EngineError> {
        let start = entry_key(group, self.floor(group).unwrap_or(0));
        let mut iter = self
            .db
            .iterator(IteratorMode::From(&start, Direction::Forward));
        match iter.next() {
            Some(Ok((key, _))) => Ok(entry_index(group, &key)),
            Some(Err(e)) => Err(EngineError::new(NAME, "first index", e)),
            None => Ok(None),
        }
    }

    fn last_index(&self, group: u64) -> Result<Option<u64>, EngineError> {
        let end = entry_key(group, u64::MAX);
        let mut iter = self
            .db
            .iterator(IteratorMode::From(&end, Direction::Reverse));
        match iter.next() {
            Some(Ok((key, _))) => Ok(entry_index(group, &key)),
            Some(Err(e)) => Err(EngineError::new(NAME, "last index", e)),
            None => Ok(None),
        }
    }

    fn get_state(&self, group: u64, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        self.db
            .get(state_key(group, key))
            .map_err(|e| EngineError::new(NAME, "get state", e))
    }

    fn stats(&self) -> EngineStats {
        let t = |ticker| self.options.get_ticker_count(ticker);
        EngineStats {
            fsyncs: Some(t(Ticker::WalFileSynced)),
            bytes_written: Some(
                t(Ticker::WalFileBytes) + t(Ticker::FlushWriteBytes) + t(Ticker::CompactWriteBytes),
            ),
            ..EngineStats::default()
        }
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.db
            .flush_wal(true)
            .map_err(|e| EngineError::new(NAME, "close", e))?;
        drop(self);
        Ok(())
    }
}

/// Removes RocksDB's files from `dir`, refusing if it holds anything else.
pub fn wipe(dir: &Path) -> Result<(), EngineError> {
    wipe_dir(NAME, dir, |name| {
        matches!(name, "CURRENT" | "IDENTITY" | "LOCK" | "LOG")
            || name.starts_with("LOG.old.")
            || name.starts_with("MANIFEST-")
            || name.starts_with("OPTIONS-")
            || name.ends_with(".log")
            || name.ends_with(".sst")
            || name.ends_with(".blob")
            || name.ends_with(".dbtmp")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_group_then_index_and_states_stay_apart() {
        assert!(entry_key(1, u64::MAX) < entry_key(2, 0));
        assert!(entry_key(2, 9) < entry_key(2, 10));
        assert_eq!(entry_index(7, &entry_key(7, 42)), Some(42));
        assert_eq!(entry_index(7, &entry_key(8, 42)), None);
        let state = state_key(1, STATE_KEY);
        assert!(state.as_slice() > entry_key(u64::MAX >> 8, u64::MAX).as_slice());
        assert_eq!(entry_index(1, &state), None);
    }
}
