//! [`KvEngine`] for Strata's lsm: one database, its default column family,
//! opened with the shared [`KvSettings`].

use std::path::Path;

use strata_lsm::{ColumnFamily, Compression, Db, Options, ReadOptions, WriteBatch, WriteOptions};

use super::engine::{op_bytes, KvEngine, KvOp, KvSettings, ScanOutcome, WriteFlags};
use crate::engines::wipe::wipe_dir;
use crate::engines::EngineError;

const NAME: &str = "strata";

/// Strata's lsm behind the bench's trait.
#[derive(Debug)]
pub struct StrataKv {
    db: Db,
    cf: ColumnFamily,
}

fn err(op: &'static str) -> impl FnOnce(strata_lsm::Error) -> EngineError {
    move |e| EngineError::new(NAME, op, e)
}

/// Returns Strata's options for `s`: each shared setting on the option of
/// the same meaning; everything else at Strata's default.
pub fn options(s: &KvSettings) -> Options {
    let mut o = Options {
        block_cache_bytes: s.block_cache_bytes,
        background_threads: s.background_threads,
        compaction_nice: s.compaction_nice,
        ..Options::default()
    };
    let cf = &mut o.default_column_family;
    cf.write_buffer_bytes = s.write_buffer_bytes;
    cf.max_write_buffers = s.max_write_buffers;
    cf.table.block_size_bytes = s.block_bytes as usize;
    cf.table.bloom_bits_per_key = s.bloom_bits_per_key;
    cf.table.compression = if s.lz4 {
        Compression::Lz4
    } else {
        Compression::None
    };
    cf.compaction.target_file_bytes = s.target_file_bytes;
    cf.compaction.base_level_bytes = s.base_level_bytes;
    cf.compaction.level0_compaction_trigger = s.level0_compaction_trigger;
    cf.blob.min_blob_size = s.blob_min_bytes;
    cf.blob.compression = cf.table.compression;
    if let Some(bytes) = s.blob_block_bytes {
        // Out of range is the engine's to refuse, with its own message.
        cf.blob.block_size_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    }
    if let Some(bytes) = s.blob_zstd_dictionary_bytes {
        cf.blob.compression = Compression::Zstd;
        cf.blob.zstd_dictionary_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    }
    if let Some(target) = s.blob_space_amp_target {
        // Out of range is the engine's to refuse, with its own message.
        cf.blob.space_amp_target = target;
    }
    if !s.blob_gc {
        // Only files no SST references any more are dropped.
        cf.blob.garbage_ratio = 1.0;
        cf.blob.space_amp_target = 10.0;
        cf.blob.space_amp_limit = 10.0;
    }
    o
}

/// Whether engines opened from now on print their flushes and compactions
/// (`--print-levels`).
static PRINT_EVENTS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes the engines opened from now on print every flush and compaction
/// to stderr as it ends (`--print-levels`), or stop.
pub fn print_events(on: bool) {
    PRINT_EVENTS.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Prints every flush and compaction to stderr, with the seconds since the
/// engine opened.
struct EventLog(std::time::Instant);

impl strata_lsm::EventListener for EventLog {
    fn on_flush_completed(&self, info: &strata_lsm::FlushInfo) {
        let bytes: u64 = info.files.iter().map(|f| f.size).sum();
        eprintln!(
            "event {:8.3} flush {} files {bytes}",
            self.0.elapsed().as_secs_f64(),
            info.files.len()
        );
    }
    fn on_compaction_completed(&self, info: &strata_lsm::CompactionInfo) {
        let bytes: u64 = info.outputs.iter().map(|f| f.size).sum();
        eprintln!(
            "event {:8.3} compaction L{}->L{} inputs {} outputs {} bytes {bytes}",
            self.0.elapsed().as_secs_f64(),
            info.input_level,
            info.output_level,
            info.inputs.len(),
            info.outputs.len()
        );
    }
}

impl StrataKv {
    /// Opens (creating) the database in `dir`.
    pub fn open(dir: &Path, settings: &KvSettings) -> Result<StrataKv, EngineError> {
        let options = options(settings);
        options.validate().map_err(err("options"))?;
        let mut hooks = strata_lsm::Hooks::default();
        if PRINT_EVENTS.load(std::sync::atomic::Ordering::Relaxed) {
            hooks
                .listeners
                .push(std::sync::Arc::new(EventLog(std::time::Instant::now())));
        }
        let db = Db::open_with(
            std::sync::Arc::new(strata_fs::DiskFs::new()),
            dir,
            options,
            hooks,
        )
        .map_err(err("open"))?;
        let cf = db.default_column_family();
        Ok(StrataKv { db, cf })
    }

    /// The database, for what the trait does not cover (ingestion).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The column family every operation goes to.
    pub fn cf(&self) -> &ColumnFamily {
        &self.cf
    }
}

impl KvEngine for StrataKv {
    fn write(&self, ops: &[KvOp], flags: WriteFlags) -> Result<(), EngineError> {
        let mut batch = WriteBatch::with_capacity(op_bytes(ops));
        for op in ops {
            match op {
                KvOp::Put(k, v) => batch.put(self.cf.id(), k, v),
                KvOp::Delete(k) => batch.delete(self.cf.id(), k),
            }
        }
        let options = WriteOptions {
            sync: flags.sync,
            disable_wal: !flags.wal,
            ..WriteOptions::default()
        };
        self.db.write_batch(&options, batch).map_err(err("write"))
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>, EngineError> {
        let value = self
            .db
            .get(&ReadOptions::default(), &self.cf, key)
            .map_err(err("get"))?;
        Ok(value.map(|v| v.len()))
    }

    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        count: u64,
    ) -> Result<ScanOutcome, EngineError> {
        let read = ReadOptions {
            upper_bound: end.map(<[u8]>::to_vec),
            ..ReadOptions::default()
        };
        let mut it = self.db.iter(&read, &self.cf).map_err(err("iter"))?;
        it.seek(start).map_err(err("seek"))?;
        let mut out = ScanOutcome::default();
        while it.valid() && out.entries < count {
            out.entries += 1;
            out.bytes += (it.key().len() + it.value().len()) as u64;
            it.next().map_err(err("next"))?;
        }
        Ok(out)
    }

    fn flush(&self) -> Result<(), EngineError> {
        self.db.flush(&self.cf, true).map_err(err("flush"))
    }

    fn background_busy(&self) -> Result<bool, EngineError> {
        // Work due or running: memtables waiting for a flush, a level due
        // for compaction (as RocksDB's `compaction-pending`), a compaction
        // running, blob GC over the space target.
        let prop = |name: &str| -> Result<u64, EngineError> {
            Ok(self
                .db
                .property(&self.cf, name)
                .map_err(err("property"))?
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0))
        };
        Ok(prop("strata.num-immutable-memtables")? > 0
            || prop("strata.compaction-pending")? > 0
            || prop("strata.num-running-compactions")? > 0
            || prop("strata.blob-gc-pending")? > 0)
    }

    fn compaction_bytes_by_level(&self) -> Option<Vec<u64>> {
        Some(self.db.statistics().compaction_bytes_written_by_level)
    }

    fn stall_micros(&self) -> Option<u64> {
        let s = self.db.statistics();
        Some(s.stall_micros + s.slowdown_micros)
    }

    fn level_report(&self) -> Option<String> {
        let levels = self.db.property(&self.cf, "strata.levels").ok().flatten()?;
        let st = self.db.statistics();
        let d = st.write_delays;
        Some(format!(
            "{levels}flushes {} ({} bytes), compactions {} (read {}, written {}), \
             written by level {:?}\n\
             writes held back since open (ms), stopped / slowed: memtables {} / {}, \
             L0 {} / {}, compaction debt {} / {}",
            st.flushes,
            st.flush_bytes,
            st.compactions,
            st.compaction_bytes_read,
            st.compaction_bytes_written,
            st.compaction_bytes_written_by_level,
            d.memtable_stop_micros / 1000,
            d.memtable_slowdown_micros / 1000,
            d.level0_stop_micros / 1000,
            d.level0_slowdown_micros / 1000,
            d.debt_stop_micros / 1000,
            d.debt_slowdown_micros / 1000,
        ))
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        let StrataKv { db, cf } = *self;
        drop(cf);
        db.close().map_err(err("close"))
    }
}

/// Removes Strata's files from `dir`, refusing if it holds anything else.
pub fn wipe(dir: &Path) -> Result<(), EngineError> {
    wipe_dir(NAME, dir, |name| {
        matches!(name, "CURRENT" | "CURRENT.tmp" | "LOCK")
            || name.starts_with("MANIFEST-")
            || name.ends_with(".sst")
            || name.ends_with(".wal")
            || name.ends_with(".blob")
            || name.ends_with(".tmp")
    })
}
