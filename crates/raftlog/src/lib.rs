//! raftlog: an append-only, log-structured engine for the Raft logs of many
//! groups.
//!
//! Writes are [`LogBatch`]es appended to the active file of the append queue by
//! group commit (one append and at most one sync for all concurrent writers).
//! An in-memory index, sharded by group, maps every live entry to its record.
//! [`Engine::purge`] frees old files, copying the little live data left in them
//! into a rewrite queue. Opening the engine rebuilds the index by scanning the
//! files in parallel. The design and the durability argument are in
//! `docs/raftlog.md`; the bytes on disk in `docs/format/raftlog.md`.
//! [`inspect`] replays scanned records into that same index without opening
//! the engine, for tools.
//!
//! ```
//! use strata_raftlog::{Config, Engine, LogBatch};
//! # let dir = tempfile::tempdir().unwrap();
//! let engine = Engine::open(dir.path(), Config::default()).unwrap();
//! let mut batch = LogBatch::new();
//! batch.add_entries(1, 1, &[b"first entry".as_slice(), b"second"]);
//! batch.put(1, b"raft_state", b"term=3");
//! engine.write(&mut batch, true).unwrap();
//! assert_eq!(engine.get_entry(1, 2).unwrap().as_deref(), Some(&b"second"[..]));
//! assert_eq!(engine.last_index(1), Some(2));
//! ```

mod cache_drop;
mod config;
mod engine;
mod error;
pub mod format;
mod generation;
mod index;
pub mod inspect;
mod log_batch;
mod metrics;
mod pipe;
mod prepare;
mod purge;
pub mod reader;
mod recovery;
mod run_entries;
pub mod section;

pub use config::{Config, RecoveryMode};
pub use engine::{Engine, FileStats, IndexStats};
pub use error::{Error, Result};
pub use log_batch::{decode_items, entry_at, Item, LogBatch};
pub use metrics::MetricsSnapshot;
pub use purge::PurgeOutcome;
pub use recovery::{Damage, RecoveryReport};
