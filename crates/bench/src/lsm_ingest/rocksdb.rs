//! [`IngestEngine`] for RocksDB (feature `peer-rocksdb`): the `lsm`
//! bench's [`RocksKv`] for puts, `rocksdb::SstFileWriter` made from the
//! DB's own options for external files, and `ingest_external_file_opts`
//! with `move_files` and RocksDB's defaults otherwise (global seqno
//! allowed, blocking flush allowed, snapshot consistency on).

use std::path::Path;

use ::rocksdb::{IngestExternalFileOptions, SstFileWriter};

use super::engine::{Entry, IngestEngine, Ingested};
use crate::engines::EngineError;
use crate::lsm::engine::{KvEngine, KvSettings};
use crate::lsm::rocksdb::RocksKv;

const NAME: &str = "rocksdb";

fn err(op: &'static str) -> impl FnOnce(::rocksdb::Error) -> EngineError {
    move |e| EngineError::new(NAME, op, e)
}

/// RocksDB with ingestion.
#[derive(Debug)]
pub struct RocksIngest {
    kv: RocksKv,
}

impl RocksIngest {
    /// Opens (creating) the DB in `dir`.
    pub fn open(dir: &Path, settings: &KvSettings) -> Result<RocksIngest, EngineError> {
        Ok(RocksIngest {
            kv: RocksKv::open(dir, settings)?,
        })
    }
}

impl IngestEngine for RocksIngest {
    fn kv(&self) -> &dyn KvEngine {
        &self.kv
    }

    fn write_external(
        &self,
        path: &Path,
        entries: &mut dyn Iterator<Item = Entry>,
    ) -> Result<u64, EngineError> {
        let mut w = SstFileWriter::create(self.kv.options());
        w.open(path).map_err(err("create sst"))?;
        for (k, v) in entries {
            w.put(&k, &v).map_err(err("add to sst"))?;
        }
        // `Finish` syncs the file.
        w.finish().map_err(err("finish sst"))?;
        Ok(w.file_size())
    }

    fn ingest(&self, path: &Path) -> Result<Ingested, EngineError> {
        let mut o = IngestExternalFileOptions::default();
        o.set_move_files(true);
        self.kv
            .db()
            .ingest_external_file_opts(&o, vec![path])
            .map_err(err("ingest"))?;
        Ok(Ingested::default())
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        Box::new(self.kv).close()
    }
}
