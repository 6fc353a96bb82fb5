//! lsm: Strata's LSM-tree key-value engine, the home of the regions' data.
//!
//! Built on the same foundation as raftlog (`strata-fs` for every byte of
//! I/O, `strata-codec` for checksums, varints and compression). The design is
//! in `docs/lsm.md`; the bytes on disk in `docs/format/`.
//!
//! This crate is being built in layers, bottom up: the internal key format
//! (`key`) comes first, then SST files, the memtable, the write-ahead log,
//! versions and compaction.

pub mod error;
pub mod key;

pub use error::{Error, Result};
pub use key::{InternalKey, SeqNo, ValueKind, MAX_SEQNO};
