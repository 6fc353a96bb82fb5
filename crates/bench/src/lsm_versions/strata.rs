//! [`VersionsEngine`] for Strata's lsm: one database, its default column
//! family, opened with `strata-bench lsm`'s mapping of the shared settings.

use std::path::Path;
use std::time::{Duration, Instant};

use strata_fs::DiskFs;
use strata_lsm::{
    ColumnFamily, Db, IngestOptions, InstallTiming, InternalKey, ReadOptions, SstWriter,
    SstWriterOptions, ValueKind, WriteBatch, WriteOptions,
};

use super::engine::{IterTimes, VersionsEngine};
use super::phase::Switches;
use crate::engines::EngineError;
use crate::lsm::engine::KvSettings;

const NAME: &str = "strata";

/// Strata's lsm behind the bench's trait.
#[derive(Debug)]
pub struct StrataVersions {
    db: Db,
    cf: ColumnFamily,
    /// The family's table options: external files are written with the
    /// blocks, filter and compression of the engine's own files.
    table: SstWriterOptions,
}

fn err(op: &'static str) -> impl FnOnce(strata_lsm::Error) -> EngineError {
    move |e| EngineError::new(NAME, op, e)
}

impl StrataVersions {
    /// Opens (creating) the database in `dir`.
    pub fn open(
        dir: &Path,
        settings: &KvSettings,
        tuning: &super::engine::Tuning,
    ) -> Result<StrataVersions, EngineError> {
        let mut options = crate::lsm::strata::options(settings);
        // -1: every file open, as far as Strata's bound goes.
        options.max_open_files = usize::try_from(tuning.max_open_files).unwrap_or(1 << 22);
        options.validate().map_err(err("options"))?;
        let table = options.default_column_family.table.clone();
        let db = Db::open(dir, options).map_err(err("open"))?;
        let cf = db.default_column_family();
        Ok(StrataVersions { db, cf, table })
    }

    fn int_property(&self, name: &str) -> Result<u64, EngineError> {
        Ok(self
            .db
            .property(&self.cf, name)
            .map_err(err("property"))?
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0))
    }
}

impl VersionsEngine for StrataVersions {
    fn write(&self, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<(), EngineError> {
        let mut batch = WriteBatch::new();
        for (k, v) in pairs {
            batch.put(self.cf.id(), k, v);
        }
        let options = WriteOptions {
            sync: false,
            disable_wal: true,
            ..WriteOptions::default()
        };
        self.db.write(&options, &batch).map_err(err("write"))
    }

    fn ingest(&self, dir: &Path, files: &[Vec<(Vec<u8>, Vec<u8>)>]) -> Result<(), EngineError> {
        let fs = DiskFs::new();
        let mut paths = Vec::with_capacity(files.len());
        for (n, entries) in files.iter().enumerate() {
            let path = dir.join(format!("external-{n:06}.sst"));
            let mut w =
                SstWriter::create(&fs, &path, self.table.clone()).map_err(err("create sst"))?;
            for (k, v) in entries {
                w.add(InternalKey::new(k, 0, ValueKind::Put).encoded(), v)
                    .map_err(err("add to sst"))?;
            }
            // `finish` syncs the file.
            w.finish().map_err(err("finish sst"))?;
            paths.push(path);
        }
        self.db
            .ingest(&self.cf, &paths, &IngestOptions { move_files: true })
            .map_err(err("ingest"))?;
        Ok(())
    }

    fn snapshot(&self) -> Result<Duration, EngineError> {
        let start = Instant::now();
        let snapshot = self.db.snapshot();
        let took = start.elapsed();
        drop(snapshot);
        Ok(took)
    }

    fn iterate(&self, key: &[u8], upper: Option<&[u8]>) -> Result<IterTimes, EngineError> {
        let options = ReadOptions {
            lower_bound: upper.map(|_| key.to_vec()),
            upper_bound: upper.map(<[u8]>::to_vec),
            ..ReadOptions::default()
        };
        let start = Instant::now();
        let mut it = self.db.iter(&options, &self.cf).map_err(err("iter"))?;
        let create = start.elapsed();
        let switches_at_create = Switches::now();
        let created = Instant::now();
        it.seek(key).map_err(err("seek"))?;
        if it.valid() {
            std::hint::black_box((it.key().len(), it.value().len()));
        }
        drop(it);
        Ok(IterTimes {
            create,
            seek_read_drop: created.elapsed(),
            switches_at_create,
        })
    }

    fn get(&self, key: &[u8]) -> Result<bool, EngineError> {
        let value = self
            .db
            .get(&ReadOptions::default(), &self.cf, key)
            .map_err(err("get"))?;
        Ok(value.is_some())
    }

    fn compact_all(&self) -> Result<(), EngineError> {
        self.db
            .compact_range(&self.cf, None, None)
            .map_err(err("compact_range"))
    }

    fn live_files(&self) -> Result<u64, EngineError> {
        self.int_property("strata.num-files")
    }

    fn versions_installed(&self) -> Result<u64, EngineError> {
        Ok(self.db.statistics().install.installs)
    }

    fn install_timing(&self) -> Option<InstallTiming> {
        Some(self.db.statistics().install)
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        let StrataVersions { db, cf, .. } = *self;
        drop(cf);
        db.close().map_err(err("close"))
    }
}
