//! Counters the engine keeps, and the statistics and properties it
//! reports from them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cf::ColumnFamily;
use super::Db;
use crate::error::Result;
use crate::install_timing::{InstallTimes, InstallTiming};
use crate::version::NUM_LEVELS_MAX;

/// What held a write back: the write path checks each family it touches
/// against its marks (`ColumnFamilyOptions`, `CompactionOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DelayCause {
    /// Immutable memtables waiting for their flush.
    Memtables = 0,
    /// Files in L0 at the slowdown or stop trigger.
    Level0 = 1,
    /// Bytes compaction is behind, at the soft or hard limit.
    CompactionDebt = 2,
}

impl DelayCause {
    const COUNT: usize = 3;
}

/// Time writers were held back, by cause: a stop waits for a flush or a
/// compaction to get under the mark; a slowdown sleeps a little per write.
/// The slowdowns sum to `Statistics::slowdown_micros`; the stops to about
/// `stall_micros` (the checks between two waits are not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteDelays {
    /// Microseconds stopped while every memtable was full.
    pub memtable_stop_micros: u64,
    /// Microseconds of slowdown one memtable short of that.
    pub memtable_slowdown_micros: u64,
    /// Microseconds stopped at `level0_stop_trigger`.
    pub level0_stop_micros: u64,
    /// Microseconds of slowdown from `level0_slowdown_trigger` on.
    pub level0_slowdown_micros: u64,
    /// Microseconds stopped at `hard_pending_compaction_bytes`.
    pub debt_stop_micros: u64,
    /// Microseconds of slowdown from `soft_pending_compaction_bytes` on.
    pub debt_slowdown_micros: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    writes: AtomicU64,
    write_groups: AtomicU64,
    keys_written: AtomicU64,
    wal_bytes: AtomicU64,
    wal_syncs: AtomicU64,
    memtable_hits: AtomicU64,
    flushes: AtomicU64,
    flush_bytes: AtomicU64,
    compactions: AtomicU64,
    compaction_bytes_read: AtomicU64,
    compaction_bytes_written: AtomicU64,
    /// The same bytes by the level the compaction wrote to.
    compaction_bytes_written_by_level: [AtomicU64; NUM_LEVELS_MAX],
    stalls: AtomicU64,
    stall_micros: AtomicU64,
    slowdowns: AtomicU64,
    slowdown_micros: AtomicU64,
    /// Microseconds of stops, then of slowdowns, by [`DelayCause`].
    delay_micros: [[AtomicU64; DelayCause::COUNT]; 2],
    manifest_rewrites: AtomicU64,
    /// Shared by the installers of every column family, so that a dropped
    /// family's installs still count.
    pub install_times: Arc<InstallTimes>,
    ingestions: AtomicU64,
    ingest_seqno_hold_micros: AtomicU64,
    ingest_seqno_hold_micros_max: AtomicU64,
    /// The write count last seen by [`Counters::writers_idle`], and when it
    /// changed. A leaf lock.
    writes_seen: parking_lot::Mutex<Option<(u64, Instant)>>,
}

fn add(c: &AtomicU64, v: u64) {
    c.fetch_add(v, Ordering::Relaxed);
}

impl Counters {
    /// True once no write has come for `quiet`, as far as the calls to
    /// this tell: the first call that sees a new count starts the clock.
    /// Background work asks it about twice a second.
    pub fn writers_idle(&self, quiet: Duration) -> bool {
        let writes = self.writes.load(Ordering::Relaxed);
        let now = Instant::now();
        let mut seen = self.writes_seen.lock();
        match *seen {
            Some((w, since)) if w == writes => now.duration_since(since) >= quiet,
            _ => {
                *seen = Some((writes, now));
                false
            }
        }
    }
    pub fn add_writes(&self, writes: u64, keys: u64) {
        add(&self.writes, writes);
        add(&self.write_groups, 1);
        add(&self.keys_written, keys);
    }
    pub fn add_wal_bytes(&self, n: u64) {
        add(&self.wal_bytes, n);
    }
    pub fn add_wal_sync(&self) {
        add(&self.wal_syncs, 1);
    }
    pub fn add_memtable_hit(&self) {
        add(&self.memtable_hits, 1);
    }
    pub fn add_flush(&self, bytes: u64) {
        add(&self.flushes, 1);
        add(&self.flush_bytes, bytes);
    }
    pub fn add_compaction(&self, output_level: u8, read: u64, written: u64) {
        add(&self.compactions, 1);
        add(&self.compaction_bytes_read, read);
        add(&self.compaction_bytes_written, written);
        let level = usize::from(output_level).min(NUM_LEVELS_MAX - 1);
        add(&self.compaction_bytes_written_by_level[level], written);
    }
    /// A write that stopped, for `d` in all.
    pub fn add_stall(&self, d: Duration) {
        add(&self.stalls, 1);
        add(&self.stall_micros, d.as_micros() as u64);
    }
    /// Part of a stop, spent waiting on `cause`.
    pub fn add_stall_part(&self, cause: DelayCause, d: Duration) {
        add(&self.delay_micros[0][cause as usize], d.as_micros() as u64);
    }
    pub fn add_slowdown(&self, cause: DelayCause, d: Duration) {
        add(&self.slowdowns, 1);
        add(&self.slowdown_micros, d.as_micros() as u64);
        add(&self.delay_micros[1][cause as usize], d.as_micros() as u64);
    }
    pub fn add_manifest_rewrite(&self) {
        add(&self.manifest_rewrites, 1);
    }
    pub fn add_ingestion(&self, seqno_hold: Duration) {
        let us = seqno_hold.as_micros() as u64;
        add(&self.ingestions, 1);
        add(&self.ingest_seqno_hold_micros, us);
        self.ingest_seqno_hold_micros_max
            .fetch_max(us, Ordering::Relaxed);
    }
}

/// A copy of the engine's counters since open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Statistics {
    /// Writes (batches) applied.
    pub writes: u64,
    /// Group commits (one WAL append each).
    pub write_groups: u64,
    /// Keys written (items of the batches).
    pub keys_written: u64,
    /// Bytes of batches appended to the WAL.
    pub wal_bytes: u64,
    /// WAL syncs.
    pub wal_syncs: u64,
    /// WAL files made out of older ones no memtable needed (`docs/lsm.md`,
    /// "WAL files are recycled").
    pub wal_files_recycled: u64,
    /// Point reads answered by a memtable.
    pub memtable_hits: u64,
    /// Flushes finished, and the bytes of SST they wrote.
    pub flushes: u64,
    /// Bytes of SST files written by flushes.
    pub flush_bytes: u64,
    /// Compactions finished.
    pub compactions: u64,
    /// Bytes of SST files compactions read.
    pub compaction_bytes_read: u64,
    /// Bytes of SST files compactions wrote.
    pub compaction_bytes_written: u64,
    /// The same bytes by output level (index 0 is L0, written only by
    /// blob GC's in-place rewrites of L0 files): where write amplification
    /// comes from.
    pub compaction_bytes_written_by_level: Vec<u64>,
    /// Writes that stopped until a flush or compaction caught up, and the
    /// total time they waited.
    pub stalls: u64,
    /// Microseconds writers waited at a stop.
    pub stall_micros: u64,
    /// Writes slowed down by compaction debt, and the total delay.
    pub slowdowns: u64,
    /// Microseconds of delay added to slowed-down writes.
    pub slowdown_micros: u64,
    /// The stops and slowdowns by cause.
    pub write_delays: WriteDelays,
    /// Times the manifest was rewritten as a snapshot.
    pub manifest_rewrites: u64,
    /// Ingestions (`Db::ingest`, `Db::replace_range`) committed.
    pub ingestions: u64,
    /// Microseconds the committed ingestions alone held the visible seqno
    /// back, in total (`IngestReport::seqno_hold`): the time the
    /// acknowledgement of every later write, its reads and the flushes of
    /// the memtables holding it may have waited for them.
    pub ingest_seqno_hold_micros: u64,
    /// The longest of those holds, in microseconds.
    pub ingest_seqno_hold_micros_max: u64,
    /// Snapshots held now.
    pub snapshots: u64,
    /// Bytes in the block cache now.
    pub block_cache_bytes: u64,
    /// SST files open for reads now (at most about `Options::max_open_files`).
    pub open_sst_files: u64,
    /// Version installs (flushes, compactions, ingestions of every family)
    /// and how long each waited for and held its family's installer lock,
    /// built the version and persisted the edits under it
    /// (`install_timing.rs`).
    pub install: InstallTiming,
}

impl Db {
    /// The engine's counters since open.
    pub fn statistics(&self) -> Statistics {
        let i = self.inner();
        let c = &i.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Statistics {
            writes: g(&c.writes),
            write_groups: g(&c.write_groups),
            keys_written: g(&c.keys_written),
            wal_bytes: g(&c.wal_bytes),
            wal_syncs: g(&c.wal_syncs),
            wal_files_recycled: i.wal_keeper.recycled(),
            memtable_hits: g(&c.memtable_hits),
            flushes: g(&c.flushes),
            flush_bytes: g(&c.flush_bytes),
            compactions: g(&c.compactions),
            compaction_bytes_read: g(&c.compaction_bytes_read),
            compaction_bytes_written: g(&c.compaction_bytes_written),
            compaction_bytes_written_by_level: c
                .compaction_bytes_written_by_level
                .iter()
                .map(g)
                .collect(),
            stalls: g(&c.stalls),
            stall_micros: g(&c.stall_micros),
            slowdowns: g(&c.slowdowns),
            slowdown_micros: g(&c.slowdown_micros),
            write_delays: {
                let [stop, slow] = &c.delay_micros;
                let (m, l, d) = (
                    DelayCause::Memtables as usize,
                    DelayCause::Level0 as usize,
                    DelayCause::CompactionDebt as usize,
                );
                WriteDelays {
                    memtable_stop_micros: g(&stop[m]),
                    memtable_slowdown_micros: g(&slow[m]),
                    level0_stop_micros: g(&stop[l]),
                    level0_slowdown_micros: g(&slow[l]),
                    debt_stop_micros: g(&stop[d]),
                    debt_slowdown_micros: g(&slow[d]),
                }
            },
            manifest_rewrites: g(&c.manifest_rewrites),
            ingestions: g(&c.ingestions),
            ingest_seqno_hold_micros: g(&c.ingest_seqno_hold_micros),
            ingest_seqno_hold_micros_max: g(&c.ingest_seqno_hold_micros_max),
            snapshots: i.snapshots.len() as u64,
            block_cache_bytes: i.cache.as_ref().map_or(0, |c| c.used_bytes()),
            open_sst_files: i.table_access.tables.len() as u64,
            install: c.install_times.snapshot(),
        }
    }

    /// The properties of every SST file of `cf` (its live version), by file
    /// number: counts, key and seqno ranges, and the collectors' user
    /// properties.
    pub fn table_properties(
        &self,
        cf: &ColumnFamily,
    ) -> Result<Vec<(crate::version::FileNumber, crate::sst::Properties)>> {
        let inner = self.inner();
        inner.check_open()?;
        let rs = cf.live()?.installer.load_full();
        rs.version
            .iter()
            .map(|(_, f)| Ok((f.number(), inner.open_table(f)?.properties().clone())))
            .collect()
    }

    /// A property of `cf` by name, or `None` for a name it does not know:
    /// - `strata.num-files-at-level<N>`, `strata.bytes-at-level<N>`;
    /// - `strata.num-immutable-memtables`, `strata.memtable-bytes`;
    /// - `strata.total-sst-bytes`, `strata.num-files`;
    /// - `strata.levels`: a table of files and bytes per level;
    /// - `strata.blob-space-amp`: value bytes in blob files over live ones;
    /// - `strata.blob-gc-pending`: 1 while blob GC has work it will do once
    ///   writers pause (the family is over its space target), else 0;
    /// - `strata.compaction-pending`: 1 while a level is due for compaction
    ///   (L0 at its trigger, or a level over its target), else 0;
    /// - `strata.num-running-compactions`: compactions running on the
    ///   family, blob GC's rewrites included. A database has settled when
    ///   this, `strata.compaction-pending`, `strata.blob-gc-pending` and
    ///   `strata.num-immutable-memtables` are all 0.
    pub fn property(&self, cf: &ColumnFamily, name: &str) -> Result<Option<String>> {
        let state = cf.live()?;
        let rs = state.installer.load();
        let v = &rs.version;
        let level_arg = |prefix: &str| {
            name.strip_prefix(prefix)
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n < v.num_levels())
        };
        if let Some(l) = level_arg("strata.num-files-at-level") {
            return Ok(Some(v.level_len(l).to_string()));
        }
        if let Some(l) = level_arg("strata.bytes-at-level") {
            return Ok(Some(v.level_bytes(l).to_string()));
        }
        Ok(match name {
            "strata.num-immutable-memtables" => Some(rs.immutables.len().to_string()),
            "strata.memtable-bytes" => Some(
                (rs.active.approximate_bytes() + rs.immutables.approximate_bytes()).to_string(),
            ),
            "strata.total-sst-bytes" => Some(
                (0..v.num_levels())
                    .map(|l| v.level_bytes(l))
                    .sum::<u64>()
                    .to_string(),
            ),
            "strata.num-files" => Some(v.total_files().to_string()),
            "strata.blob-space-amp" => Some(format!("{:.3}", crate::compaction::blob_space_amp(v))),
            "strata.blob-gc-pending" => {
                let policy = state.gc_policy(true);
                let due = crate::compaction::pick_blob_gc(v, &policy, &|_| false).is_some();
                Some(u8::from(due).to_string())
            }
            "strata.compaction-pending" => {
                let due = crate::compaction::pick(v, &state.options.compaction, &|_| false);
                Some(u8::from(due.is_some()).to_string())
            }
            "strata.num-running-compactions" => Some(
                self.handle
                    .inner
                    .bg
                    .compactions_running(state.id)
                    .to_string(),
            ),
            "strata.levels" => {
                let mut s = String::from("level files bytes\n");
                for l in 0..v.num_levels() {
                    s.push_str(&format!("{l} {} {}\n", v.level_len(l), v.level_bytes(l)));
                }
                Some(s)
            }
            _ => None,
        })
    }
}
