//! [`KvEngine`] for RocksDB (feature `peer-rocksdb`, the `rocksdb` crate
//! the raftlog peer uses): one DB, its default column family, opened with
//! the shared [`KvSettings`]; everything else at RocksDB's defaults.

use std::path::Path;

use ::rocksdb::statistics::Ticker;
use ::rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options, WriteOptions, DB};

use super::engine::{KvEngine, KvOp, KvSettings, ScanOutcome, WriteFlags};
use crate::engines::EngineError;

const NAME: &str = "rocksdb";

/// RocksDB behind the bench's trait.
pub struct RocksKv {
    db: DB,
    /// The options the DB was opened with; they hold its statistics.
    options: Options,
    /// The block cache, kept alive as long as the DB.
    _cache: Cache,
}

impl std::fmt::Debug for RocksKv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksKv")
            .field("dir", &self.db.path())
            .finish_non_exhaustive()
    }
}

fn err(op: &'static str) -> impl FnOnce(::rocksdb::Error) -> EngineError {
    move |e| EngineError::new(NAME, op, e)
}

/// Returns RocksDB's options for `s` and the block cache they point to.
pub(crate) fn options(s: &KvSettings) -> (Options, Cache) {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.enable_statistics(); // the stall ticker
    o.set_max_background_jobs(s.background_threads as i32);
    o.set_write_buffer_size(s.write_buffer_bytes as usize);
    o.set_max_write_buffer_number(s.max_write_buffers as i32);
    o.set_target_file_size_base(s.target_file_bytes);
    o.set_max_bytes_for_level_base(s.base_level_bytes);
    o.set_level_zero_file_num_compaction_trigger(s.level0_compaction_trigger as i32);
    // Strata sizes levels from the last one by default, as does RocksDB
    // since 8.4; set explicitly so that an older library matches too.
    o.set_level_compaction_dynamic_level_bytes(true);
    if let Some(min) = s.blob_min_bytes {
        // BlobDB, integrated: blob files written by flush and compaction,
        // GC in compaction (its defaults: age cutoff 0.25).
        o.set_enable_blob_files(true);
        o.set_min_blob_size(min);
        o.set_enable_blob_gc(s.blob_gc);
        o.set_blob_compression_type(if s.lz4 {
            DBCompressionType::Lz4
        } else {
            DBCompressionType::None
        });
    }
    o.set_compression_type(if s.lz4 {
        DBCompressionType::Lz4
    } else {
        DBCompressionType::None
    });
    let cache = Cache::new_lru_cache(s.block_cache_bytes as usize);
    let mut table = BlockBasedOptions::default();
    table.set_block_size(s.block_bytes as usize);
    if s.bloom_bits_per_key > 0 {
        // Full (not block-based) filters, whole keys, as Strata's.
        table.set_bloom_filter(f64::from(s.bloom_bits_per_key), false);
    }
    table.set_block_cache(&cache);
    o.set_block_based_table_factory(&table);
    (o, cache)
}

impl RocksKv {
    /// Opens (creating) the DB in `dir`.
    pub fn open(dir: &Path, settings: &KvSettings) -> Result<RocksKv, EngineError> {
        let (options, cache) = options(settings);
        let db = DB::open(&options, dir).map_err(err("open"))?;
        Ok(RocksKv {
            db,
            options,
            _cache: cache,
        })
    }

    /// The DB, for what the trait does not cover (ingestion).
    pub fn db(&self) -> &DB {
        &self.db
    }

    /// The options the DB was opened with (an `SstFileWriter` made from
    /// them writes blocks, filters and compression as the DB's own files).
    pub fn options(&self) -> &Options {
        &self.options
    }

    fn int_property(&self, name: &str) -> Result<u64, EngineError> {
        Ok(self
            .db
            .property_int_value(name)
            .map_err(err("property"))?
            .unwrap_or(0))
    }
}

impl KvEngine for RocksKv {
    fn write(&self, ops: &[KvOp], flags: WriteFlags) -> Result<(), EngineError> {
        let mut batch = ::rocksdb::WriteBatch::with_capacity_bytes(super::engine::op_bytes(ops));
        for op in ops {
            match op {
                KvOp::Put(k, v) => batch.put(k, v),
                KvOp::Delete(k) => batch.delete(k),
            }
        }
        let mut w = WriteOptions::default();
        w.set_sync(flags.sync);
        w.disable_wal(!flags.wal);
        self.db.write_opt(batch, &w).map_err(err("write"))
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>, EngineError> {
        Ok(self
            .db
            .get_pinned(key)
            .map_err(err("get"))?
            .map(|v| v.len()))
    }

    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        count: u64,
    ) -> Result<ScanOutcome, EngineError> {
        let mut read = rocksdb::ReadOptions::default();
        if let Some(end) = end {
            read.set_iterate_upper_bound(end.to_vec());
        }
        let mut it = self.db.raw_iterator_opt(read);
        it.seek(start);
        let mut out = ScanOutcome::default();
        while out.entries < count {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            out.entries += 1;
            out.bytes += (k.len() + v.len()) as u64;
            it.next();
        }
        it.status().map_err(err("iterate"))?;
        Ok(out)
    }

    fn flush(&self) -> Result<(), EngineError> {
        self.db.flush().map_err(err("flush"))
    }

    fn background_busy(&self) -> Result<bool, EngineError> {
        Ok(self.int_property("rocksdb.compaction-pending")? > 0
            || self.int_property("rocksdb.num-running-compactions")? > 0
            || self.int_property("rocksdb.num-running-flushes")? > 0
            || self.int_property("rocksdb.mem-table-flush-pending")? > 0)
    }

    fn stall_micros(&self) -> Option<u64> {
        Some(self.options.get_ticker_count(Ticker::StallMicros))
    }

    fn level_report(&self) -> Option<String> {
        self.db.property_value("rocksdb.stats").ok().flatten()
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.db.flush_wal(true).map_err(err("close"))
    }
}

/// Removes RocksDB's files from `dir`: the raftlog peer's wipe, which knows
/// every name RocksDB writes.
pub fn wipe(dir: &Path) -> Result<(), EngineError> {
    crate::engines::rocksdb::wipe(dir)
}
