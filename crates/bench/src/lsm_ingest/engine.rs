//! `IngestEngine`: what `lsm-ingest` needs beyond the `lsm` workloads'
//! [`KvEngine`]: writing an external SST file in the engine's own format
//! and ingesting it. Every engine is opened through the `lsm` bench's
//! [`KvEngineKind`] with the shared [`KvSettings`], so that its writes go
//! through the very code `strata-bench lsm` measures.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use crate::engines::EngineError;
use crate::error::BenchError;
use crate::lsm::engine::{KvEngine, KvEngineKind, KvSettings};

/// One entry of an external file: a key and its value, in key order.
pub type Entry = (Vec<u8>, Vec<u8>);

/// What one ingestion call reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ingested {
    /// How long the ingestion alone held the engine's visible seqno back,
    /// where it says (Strata's `IngestReport::seqno_hold`).
    pub seqno_hold: Option<Duration>,
    /// The hold plus the wait, after publishing, until its seqnos were
    /// visible (earlier writes in flight finishing), where it says
    /// (`IngestReport::seqno_reserved`).
    pub seqno_reserved: Option<Duration>,
}

/// An engine that takes puts and ingests external SST files. Shared by the
/// writers and the ingesting thread.
pub trait IngestEngine: Send + Sync + fmt::Debug {
    /// The engine's puts, reads, flushes and stall counter.
    fn kv(&self) -> &dyn KvEngine;

    /// Writes an external SST file at `path` (which must not exist) holding
    /// `entries` (keys strictly ascending), as the engine's ingestion wants
    /// it, synced; returns the file's size in bytes.
    fn write_external(
        &self,
        path: &Path,
        entries: &mut dyn Iterator<Item = Entry>,
    ) -> Result<u64, EngineError>;

    /// Ingests the external file at `path` into the database, moving it
    /// (a hard link; the external name is gone once it returns).
    fn ingest(&self, path: &Path) -> Result<Ingested, EngineError>;

    /// Makes everything durable and closes the engine.
    fn close(self: Box<Self>) -> Result<(), EngineError>;
}

/// Checks that every engine of `kinds` can ingest and is built in.
pub fn check_kinds(kinds: &[KvEngineKind]) -> Result<(), BenchError> {
    if kinds.contains(&KvEngineKind::Fjall) {
        return Err(BenchError::Usage(
            "lsm-ingest: fjall has no ingestion of external SST files; use strata and rocksdb"
                .into(),
        ));
    }
    KvEngineKind::check_built(kinds)?;
    Ok(())
}

/// Opens (creating) engine `kind` in `dir` with `settings`.
pub fn open(
    kind: KvEngineKind,
    dir: &Path,
    settings: &KvSettings,
) -> Result<Box<dyn IngestEngine>, EngineError> {
    match kind {
        KvEngineKind::Strata => Ok(Box::new(super::strata::StrataIngest::open(dir, settings)?)),
        #[cfg(feature = "peer-rocksdb")]
        KvEngineKind::Rocksdb => Ok(Box::new(super::rocksdb::RocksIngest::open(dir, settings)?)),
        #[allow(
            unreachable_patterns,
            reason = "the arms above cover the engines built in"
        )]
        _ => Err(EngineError::msg(
            kind.name(),
            "open",
            "not an engine lsm-ingest can run in this build".into(),
        )),
    }
}
