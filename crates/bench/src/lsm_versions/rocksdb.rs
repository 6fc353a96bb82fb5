//! [`VersionsEngine`] for RocksDB (feature `peer-rocksdb`): one DB, its
//! default column family, opened with `strata-bench lsm`'s mapping of the
//! shared settings, plus `max_open_files`.
//!
//! In RocksDB a snapshot is taken under the DB mutex (`GetSnapshot`), the
//! mutex `LogAndApply` also holds while it merges a version edit into the
//! file set; an iterator refs the thread-local super version, falling back
//! to the mutex when a new one was installed since.

use std::path::Path;
use std::time::{Duration, Instant};

use ::rocksdb::{IngestExternalFileOptions, Options, ReadOptions, SstFileWriter, WriteOptions, DB};
use strata_lsm::InstallTiming;

use super::engine::{IterTimes, Tuning, VersionsEngine};
use super::phase::Switches;
use crate::engines::EngineError;
use crate::lsm::engine::KvSettings;

const NAME: &str = "rocksdb";

/// Levels whose file counts are summed: RocksDB's default `num_levels`,
/// which the shared settings leave as it is.
const NUM_LEVELS: usize = 7;

/// RocksDB behind the bench's trait.
pub struct RocksVersions {
    db: DB,
    /// The options the DB was opened with: an `SstFileWriter` made from
    /// them writes blocks, filters and compression as the DB's own files.
    options: Options,
    /// The block cache, kept alive as long as the DB.
    _cache: ::rocksdb::Cache,
}

impl std::fmt::Debug for RocksVersions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksVersions")
            .field("dir", &self.db.path())
            .finish_non_exhaustive()
    }
}

fn err(op: &'static str) -> impl FnOnce(::rocksdb::Error) -> EngineError {
    move |e| EngineError::new(NAME, op, e)
}

impl RocksVersions {
    /// Opens (creating) the DB in `dir`.
    pub fn open(
        dir: &Path,
        settings: &KvSettings,
        tuning: &Tuning,
    ) -> Result<RocksVersions, EngineError> {
        let (mut options, cache) = crate::lsm::rocksdb::options(settings);
        options.set_max_open_files(tuning.max_open_files);
        let db = DB::open(&options, dir).map_err(err("open"))?;
        Ok(RocksVersions {
            db,
            options,
            _cache: cache,
        })
    }

    fn int_property(&self, name: &str) -> Result<u64, EngineError> {
        Ok(self
            .db
            .property_int_value(name)
            .map_err(err("property"))?
            .unwrap_or(0))
    }
}

impl VersionsEngine for RocksVersions {
    fn write(&self, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<(), EngineError> {
        let mut batch = ::rocksdb::WriteBatch::default();
        for (k, v) in pairs {
            batch.put(k, v);
        }
        let mut w = WriteOptions::default();
        w.set_sync(false);
        w.disable_wal(true);
        self.db.write_opt(batch, &w).map_err(err("write"))
    }

    fn ingest(&self, dir: &Path, files: &[Vec<(Vec<u8>, Vec<u8>)>]) -> Result<(), EngineError> {
        let mut paths = Vec::with_capacity(files.len());
        for (n, entries) in files.iter().enumerate() {
            let path = dir.join(format!("external-{n:06}.sst"));
            let mut w = SstFileWriter::create(&self.options);
            w.open(&path).map_err(err("create sst"))?;
            for (k, v) in entries {
                w.put(k, v).map_err(err("add to sst"))?;
            }
            // `Finish` syncs the file.
            w.finish().map_err(err("finish sst"))?;
            paths.push(path);
        }
        let mut o = IngestExternalFileOptions::default();
        o.set_move_files(true);
        self.db
            .ingest_external_file_opts(&o, paths)
            .map_err(err("ingest"))
    }

    fn snapshot(&self) -> Result<Duration, EngineError> {
        let start = Instant::now();
        let snapshot = self.db.snapshot();
        let took = start.elapsed();
        drop(snapshot);
        Ok(took)
    }

    fn iterate(&self, key: &[u8], upper: Option<&[u8]>) -> Result<IterTimes, EngineError> {
        let mut options = ReadOptions::default();
        if let Some(upper) = upper {
            options.set_iterate_lower_bound(key.to_vec());
            options.set_iterate_upper_bound(upper.to_vec());
        }
        let start = Instant::now();
        let mut it = self.db.raw_iterator_opt(options);
        let create = start.elapsed();
        let switches_at_create = Switches::now();
        let created = Instant::now();
        it.seek(key);
        if let (Some(k), Some(v)) = (it.key(), it.value()) {
            std::hint::black_box((k.len(), v.len()));
        }
        it.status().map_err(err("iterate"))?;
        drop(it);
        Ok(IterTimes {
            create,
            seek_read_drop: created.elapsed(),
            switches_at_create,
        })
    }

    fn get(&self, key: &[u8]) -> Result<bool, EngineError> {
        Ok(self.db.get_pinned(key).map_err(err("get"))?.is_some())
    }

    fn compact_all(&self) -> Result<(), EngineError> {
        let mut o = ::rocksdb::CompactOptions::default();
        // Strata's manual compaction rewrites the bottom level too.
        o.set_bottommost_level_compaction(::rocksdb::BottommostLevelCompaction::Force);
        self.db.compact_range_opt(None::<&[u8]>, None::<&[u8]>, &o);
        Ok(())
    }

    fn live_files(&self) -> Result<u64, EngineError> {
        (0..NUM_LEVELS).try_fold(0, |sum, l| {
            Ok(sum + self.int_property(&format!("rocksdb.num-files-at-level{l}"))?)
        })
    }

    fn versions_installed(&self) -> Result<u64, EngineError> {
        self.int_property("rocksdb.current-super-version-number")
    }

    fn install_timing(&self) -> Option<InstallTiming> {
        None
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        // Nothing was logged and the directory is wiped next: a drop is
        // the whole close.
        drop(self);
        Ok(())
    }
}
