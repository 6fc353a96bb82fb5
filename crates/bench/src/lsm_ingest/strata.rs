//! [`IngestEngine`] for Strata's lsm: the `lsm` bench's [`StrataKv`] for
//! puts, `strata_lsm::SstWriter` for external files (every entry at seqno
//! 0, as `docs/lsm.md`, "Ingestion", asks, with the column family's own
//! table options), and `Db::ingest` with `move_files`.

use std::path::{Path, PathBuf};

use strata_fs::DiskFs;
use strata_lsm::{IngestOptions, InternalKey, SstWriter, SstWriterOptions, ValueKind};

use super::engine::{Entry, IngestEngine, Ingested};
use crate::engines::EngineError;
use crate::lsm::engine::{KvEngine, KvSettings};
use crate::lsm::strata::{options, StrataKv};

const NAME: &str = "strata";

fn err(op: &'static str) -> impl FnOnce(strata_lsm::Error) -> EngineError {
    move |e| EngineError::new(NAME, op, e)
}

/// Strata's lsm with ingestion.
#[derive(Debug)]
pub struct StrataIngest {
    kv: StrataKv,
    /// The table options of the family: external files are written with
    /// the blocks, filter and compression of the engine's own files.
    table: SstWriterOptions,
}

impl StrataIngest {
    /// Opens (creating) the database in `dir`.
    pub fn open(dir: &Path, settings: &KvSettings) -> Result<StrataIngest, EngineError> {
        let table = options(settings).default_column_family.table;
        Ok(StrataIngest {
            kv: StrataKv::open(dir, settings)?,
            table,
        })
    }
}

impl IngestEngine for StrataIngest {
    fn kv(&self) -> &dyn KvEngine {
        &self.kv
    }

    fn write_external(
        &self,
        path: &Path,
        entries: &mut dyn Iterator<Item = Entry>,
    ) -> Result<u64, EngineError> {
        let fs = DiskFs::new();
        let mut w = SstWriter::create(&fs, path, self.table.clone()).map_err(err("create sst"))?;
        for (k, v) in entries {
            w.add(InternalKey::new(&k, 0, ValueKind::Put).encoded(), &v)
                .map_err(err("add to sst"))?;
        }
        // `finish` syncs the file.
        let info = w.finish().map_err(err("finish sst"))?;
        Ok(info.file_size)
    }

    fn ingest(&self, path: &Path) -> Result<Ingested, EngineError> {
        let report = self
            .kv
            .db()
            .ingest(
                self.kv.cf(),
                &[PathBuf::from(path)],
                &IngestOptions { move_files: true },
            )
            .map_err(err("ingest"))?;
        Ok(Ingested {
            seqno_hold: Some(report.seqno_hold),
            seqno_reserved: Some(report.seqno_reserved),
        })
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        Box::new(self.kv).close()
    }
}
