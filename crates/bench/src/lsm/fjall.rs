//! [`KvEngine`] for fjall 3 (feature `peer-fjall`): one database, one
//! keyspace, opened with the shared [`KvSettings`].
//!
//! Mapping notes (`docs/bench/lsm-vs-peers.md` has the table):
//! - fjall's leveled strategy sizes L1 as `target_file_bytes x L0 trigger`,
//!   which with the defaults (64 MiB x 4) is the 256 MiB base level of the
//!   others; it has no separate base-level setting.
//! - It has no count of memtables before writers wait (its database-wide
//!   write-buffer cap is hidden, deprecated and off by default): sealed
//!   memtables queue for flush and writers are delayed by its own L0 rules.
//! - It always journals: a run with the WAL off leaves fjall out.
//! - A synced write persists the journal with `SyncData` (fdatasync), as
//!   RocksDB and Strata sync their logs. An unsynced one persists it with
//!   `Buffer`, which hands the journal's user-space buffer (8 KiB) to the
//!   OS: Strata and RocksDB write every batch to their log file before the
//!   write returns, so a process crash loses none of them. Left in the
//!   buffer (`--fjall-buffered-journal`, fjall's default), up to 8 KiB of
//!   acknowledged writes die with the process, and most writes make no
//!   system call at all.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use fjall::compaction::Leveled;
use fjall::config::{
    BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry,
};
use fjall::{
    CompressionType, Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions, PersistMode,
};

use super::engine::{KvEngine, KvOp, KvSettings, ScanOutcome, WriteFlags};
use crate::engines::EngineError;

const NAME: &str = "fjall";
/// The keyspace the bench writes.
const KEYSPACE: &str = "bench";

/// fjall behind the bench's trait.
pub struct FjallKv {
    db: Database,
    keyspace: Keyspace,
    /// How an unsynced write persists the journal (`None`: not at all).
    unsynced: Option<PersistMode>,
}

impl std::fmt::Debug for FjallKv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FjallKv").finish_non_exhaustive()
    }
}

fn err(op: &'static str) -> impl FnOnce(fjall::Error) -> EngineError {
    move |e| EngineError::new(NAME, op, e)
}

impl FjallKv {
    /// Opens (creating) the database in `dir`.
    pub fn open(dir: &Path, s: &KvSettings) -> Result<FjallKv, EngineError> {
        // fjall panics on a block size outside 1 KiB..=1 MiB; check first.
        let block = u32::try_from(s.block_bytes)
            .ok()
            .filter(|b| (1 << 10..=1 << 20).contains(b))
            .ok_or_else(|| {
                EngineError::msg(
                    NAME,
                    "open",
                    format!("block size {} B: fjall needs 1 KiB to 1 MiB", s.block_bytes),
                )
            })?;
        let l0 = u8::try_from(s.level0_compaction_trigger)
            .map_err(|_| EngineError::msg(NAME, "open", "L0 trigger above 255".to_string()))?;
        let db = Database::builder(dir)
            .cache_size(s.block_cache_bytes)
            .worker_threads(s.background_threads)
            .open()
            .map_err(err("open"))?;
        let filter = if s.bloom_bits_per_key == 0 {
            FilterPolicy::disabled()
        } else {
            FilterPolicy::all(FilterPolicyEntry::Bloom(
                BloomConstructionPolicy::BitsPerKey(s.bloom_bits_per_key as f32),
            ))
        };
        let compression = if s.lz4 {
            CompressionPolicy::all(CompressionType::Lz4)
        } else {
            CompressionPolicy::disabled()
        };
        let strategy = Leveled::default()
            .with_table_target_size(s.target_file_bytes)
            .with_l0_threshold(l0);
        let write_buffer = s.write_buffer_bytes;
        let separation = s.blob_min_bytes.map(|min| {
            KvSeparationOptions::default().separation_threshold(min.min(u64::from(u32::MAX)) as u32)
        });
        let keyspace = db
            .keyspace(KEYSPACE, move || {
                KeyspaceCreateOptions::default()
                    .max_memtable_size(write_buffer)
                    .data_block_size_policy(BlockSizePolicy::all(block))
                    .filter_policy(filter)
                    .data_block_compression_policy(compression.clone())
                    .index_block_compression_policy(compression)
                    .compaction_strategy(Arc::new(strategy))
                    .with_kv_separation(separation.clone())
            })
            .map_err(err("open keyspace"))?;
        let unsynced = (!s.fjall_buffered_journal).then_some(PersistMode::Buffer);
        Ok(FjallKv {
            db,
            keyspace,
            unsynced,
        })
    }
}

impl KvEngine for FjallKv {
    fn write(&self, ops: &[KvOp], flags: WriteFlags) -> Result<(), EngineError> {
        if !flags.wal {
            return Err(EngineError::msg(
                NAME,
                "write",
                "fjall cannot write without its journal".to_string(),
            ));
        }
        let mut batch = self.db.batch().durability(if flags.sync {
            Some(PersistMode::SyncData)
        } else {
            self.unsynced
        });
        for op in ops {
            match op {
                KvOp::Put(k, v) => batch.insert(&self.keyspace, k.as_slice(), v.as_slice()),
                KvOp::Delete(k) => batch.remove(&self.keyspace, k.as_slice()),
            }
        }
        batch.commit().map_err(err("write"))
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>, EngineError> {
        Ok(self.keyspace.get(key).map_err(err("get"))?.map(|v| v.len()))
    }

    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        count: u64,
    ) -> Result<ScanOutcome, EngineError> {
        let mut out = ScanOutcome::default();
        let upper = end.map_or(Bound::Unbounded, Bound::Excluded);
        for guard in self
            .keyspace
            .range::<&[u8], _>((Bound::Included(start), upper))
        {
            if out.entries >= count {
                break;
            }
            let (k, v) = guard.into_inner().map_err(err("next"))?;
            out.entries += 1;
            out.bytes += (k.len() + v.len()) as u64;
        }
        Ok(out)
    }

    fn flush(&self) -> Result<(), EngineError> {
        // fjall 3 has no public flush: this is the memtable rotation its
        // own tests use to wait for one, public but hidden from its docs.
        self.keyspace
            .rotate_memtable_and_wait()
            .map_err(err("flush"))
    }

    fn background_busy(&self) -> Result<bool, EngineError> {
        Ok(self.db.active_compactions() > 0 || self.db.outstanding_flushes() > 0)
    }

    fn stall_micros(&self) -> Option<u64> {
        None
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.db.persist(PersistMode::SyncAll).map_err(err("close"))
    }
}

/// Removes fjall's files from `dir`. fjall lays out subdirectories, so this
/// wipes recursively, and only a directory whose top level holds nothing but
/// the names fjall writes (`version`, `lock`, `keyspaces`, `<n>.jnl`).
pub fn wipe(dir: &Path) -> Result<(), EngineError> {
    if !dir.exists() {
        return Ok(());
    }
    let io = |e: std::io::Error| EngineError::new(NAME, "wipe", format!("{}: {e}", dir.display()));
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let name = entry.map_err(io)?.file_name();
        let name = name.to_string_lossy();
        if !(FJALL_NAMES.contains(&name.as_ref()) || is_journal(&name)) {
            return Err(EngineError::msg(
                NAME,
                "wipe",
                format!(
                    "{} holds {name:?}, which fjall did not write; pass an empty directory \
                     or one used by an earlier run",
                    dir.display()
                ),
            ));
        }
    }
    std::fs::remove_dir_all(dir).map_err(io)
}

/// What fjall 3 writes at the top of its directory, besides its journals.
const FJALL_NAMES: &[&str] = &["version", "lock", "keyspaces"];

/// Returns whether `name` is one of fjall's journal files: `<number>.jnl`.
fn is_journal(name: &str) -> bool {
    name.strip_suffix(".jnl")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}
