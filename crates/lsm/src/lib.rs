//! lsm: Strata's LSM-tree key-value engine, the home of the regions' data.
//!
//! Built on the same foundation as raftlog (`strata-fs` for every byte of
//! I/O, `strata-codec` for checksums, varints and compression). The design is
//! in `docs/lsm.md`; the bytes on disk in `docs/format/`.
//!
//! This crate is being built in layers, bottom up: the internal key format
//! (`key`) comes first, then SST files (`sst`, with the shared block cache in
//! `cache`), the memtable, the write-ahead log,
//! versions and compaction.

pub mod cache;
pub mod error;
pub mod key;
pub mod sst;

pub use cache::BlockCache;
pub use error::{Error, Result};
pub use key::{InternalKey, SeqNo, ValueKind, MAX_SEQNO};
pub use sst::{
    Compression, Properties, PropertiesCollector, RangeTombstone, SstFileInfo, SstIter, SstReader,
    SstWriter, SstWriterOptions,
};
