//! `strata-bench raftlog-memory`: what each engine's in-memory index costs per
//! group and per live entry, measured apart, since a node with a million mostly
//! idle regions pays the first and a node with a few busy ones the second.
//!
//! For each engine and each `--groups G` (a fresh directory each):
//! 1. open the empty directory;
//! 2. give each of the G groups one entry and its 64-byte state (an idle Raft
//!    group still has both), then measure: per idle group, live;
//! 3. close and reopen: per idle group, after recovery;
//! 4. append `--fill-entries` more entries to the first `--fill-groups` groups
//!    (16 groups per batch, as TiKV batches), no compaction: per live entry,
//!    live;
//! 5. close and reopen: per live entry, after recovery.
//!
//! Memory is the process's resident set, with glibc's free memory handed back
//! before each reading and one malloc arena for the whole run (as in
//! `recovery`), so that a difference between two readings is what the engine
//! keeps. A per-group figure divides the growth from the empty engine (or its
//! open) by G; a per-entry figure divides the growth from the idle state by the
//! entries added. Engines that count their own index (Strata) are reported
//! beside it. Writes are unsynced but for the last of each phase.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::engines::{EngineKind, EngineOptions, EngineStats, LogEngine, WriteBatch};
use crate::error::BenchError;
use crate::proc_stats::{limit_malloc_arenas, release_free_heap, rss_bytes};
use crate::raftlog::OnOff;
use crate::report::{fmt_count, fmt_duration, or_na, print_json, ratio_cells, say, RatioOf, Table};
use crate::units::{fmt_bytes, parse_bytes};
use crate::verify;
use crate::workload::{next_append, EntrySizes, GroupLog};

/// Groups per batch while every group gets its first entry.
const IDLE_GROUPS_PER_BATCH: usize = 256;
/// Groups per batch while the first groups are filled, as preset A writes.
const FILL_GROUPS_PER_BATCH: usize = 16;

/// Arguments of `raftlog-memory`.
#[derive(Debug, clap::Args)]
pub struct MemoryArgs {
    /// Engines to measure, in this order, comma-separated. Peers need a build
    /// with `--features peers` (or `peer-raft-engine`).
    #[arg(
        long = "engines",
        alias = "engine",
        value_enum,
        value_delimiter = ',',
        default_value = "strata"
    )]
    engines: Vec<EngineKind>,
    /// Idle groups, comma-separated: one measurement each.
    #[arg(long, value_delimiter = ',', default_value = "100000,1000000")]
    groups: Vec<u64>,
    /// Entries appended after the idle phase, to measure the cost of a live entry.
    #[arg(long, default_value_t = 1_000_000)]
    fill_entries: u64,
    /// Groups that receive those entries (the first ones).
    #[arg(long, default_value_t = 1000)]
    fill_groups: u64,
    /// Entries per group in each batch of the fill phase.
    #[arg(long, default_value_t = 1)]
    entries_per_append: usize,
    /// Bytes of each entry.
    #[arg(long, default_value = "128", value_parser = parse_bytes)]
    entry_bytes: u64,
    /// Batch compression.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    compression: OnOff,
    /// Parent directory; each engine gets a subdirectory, wiped first and after.
    #[arg(long, default_value = "./strata-data/raftlog-memory")]
    dir: PathBuf,
    /// glibc malloc arenas for the whole run (0: glibc's default). One keeps the
    /// resident-memory differences exact (see `limit_malloc_arenas`).
    #[arg(long, default_value_t = 1)]
    malloc_arenas: u32,
    /// Print one JSON object per engine and group count instead of tables
    /// (progress goes to stderr).
    #[arg(long)]
    json: bool,
}

/// One engine at one group count: a column of a table, a JSON record.
#[derive(Debug, Clone, Serialize)]
struct MemoryRecord {
    kind: &'static str,
    engine: &'static str,
    groups: u64,
    fill_groups: u64,
    fill_entries: u64,
    entries_per_append: usize,
    entry_bytes: u64,
    /// Resident bytes per idle group, the engine still open after writing.
    bytes_per_group_live: Option<f64>,
    /// Resident bytes per idle group that an open of the idle directory keeps.
    bytes_per_group_reopened: Option<f64>,
    /// The engine's own count of its index, per idle group (after reopening).
    engine_bytes_per_group: Option<f64>,
    /// Resident bytes per live entry added, the engine still open.
    bytes_per_entry_live: Option<f64>,
    /// Resident bytes per live entry added, after reopening.
    bytes_per_entry_reopened: Option<f64>,
    /// The engine's own count, per live entry added (after reopening).
    engine_bytes_per_entry: Option<f64>,
    /// Open of the idle directory, in seconds.
    open_seconds_idle: f64,
    /// Open of the filled directory, in seconds.
    open_seconds_filled: f64,
    /// The raw readings, in bytes: resident growth of each open (empty, idle,
    /// filled) and of each write phase (idle, fill).
    rss_open_empty: Option<u64>,
    rss_open_idle: Option<u64>,
    rss_open_filled: Option<u64>,
    rss_write_idle: Option<u64>,
    rss_write_fill: Option<u64>,
    /// The engine's own index count after each reopen.
    index_bytes_idle: Option<u64>,
    index_bytes_filled: Option<u64>,
}

/// Measures each engine at each group count.
pub fn run(args: &MemoryArgs) -> Result<(), BenchError> {
    EngineKind::check_built(&args.engines)?;
    if args.groups.is_empty() || args.groups.contains(&0) {
        return Err(BenchError::Usage("--groups must be at least 1".into()));
    }
    if args.fill_groups == 0 || args.fill_entries == 0 || args.entries_per_append == 0 {
        return Err(BenchError::Usage(
            "--fill-groups, --fill-entries and --entries-per-append must be at least 1".into(),
        ));
    }
    // Before any thread of the run allocates.
    if args.malloc_arenas > 0 && !limit_malloc_arenas(args.malloc_arenas) {
        say(
            args.json,
            "raftlog-memory: cannot limit malloc arenas here; resident memory is noisy".into(),
        );
    }
    let options = EngineOptions {
        compression: args.compression == OnOff::On,
        ..EngineOptions::default()
    };
    for &groups in &args.groups {
        say(
            args.json,
            format!(
                "raftlog-memory: {} idle groups (one {} B entry and a state each), then {} \
                 entries into the first {} groups, for {}",
                fmt_count(groups),
                args.entry_bytes,
                fmt_count(args.fill_entries),
                fmt_count(args.fill_groups.min(groups)),
                args.engines
                    .iter()
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        let mut records = Vec::with_capacity(args.engines.len());
        for &kind in &args.engines {
            records.push(measure(kind, groups, args, &options)?);
        }
        if args.json {
            for r in &records {
                print_json(r);
            }
        } else {
            println!();
            print!("{}", table(groups, &records).render());
            println!();
        }
    }
    Ok(())
}

/// Returns the resident memory now, the allocator's free memory handed back.
fn settled_rss() -> Option<u64> {
    release_free_heap();
    rss_bytes()
}

fn growth(after: Option<u64>, before: Option<u64>) -> Option<u64> {
    after.zip(before).map(|(a, b)| a.saturating_sub(b))
}

/// An engine just opened, with what the open cost.
struct Opened {
    engine: Box<dyn LogEngine>,
    /// Wall time of the open.
    took: Duration,
    /// Resident memory the open kept.
    rss_kept: Option<u64>,
}

/// Opens `kind` in `dir`, timing the open and measuring what it kept.
fn timed_open(
    kind: EngineKind,
    dir: &std::path::Path,
    options: &EngineOptions,
) -> Result<Opened, BenchError> {
    let before = settled_rss();
    let t = Instant::now();
    let engine = kind.open(dir, options)?;
    let took = t.elapsed();
    Ok(Opened {
        engine,
        took,
        rss_kept: growth(settled_rss(), before),
    })
}

fn measure(
    kind: EngineKind,
    groups: u64,
    args: &MemoryArgs,
    options: &EngineOptions,
) -> Result<MemoryRecord, BenchError> {
    let name = kind.name();
    let dir = args.dir.join(name);
    std::fs::create_dir_all(&args.dir).map_err(BenchError::io("create dir", &args.dir))?;
    kind.wipe(&dir)?;
    let sizes = EntrySizes::Fixed(args.entry_bytes as usize);
    let mut logs: Vec<GroupLog> = (1..=groups).map(GroupLog::empty).collect();

    // 1-2. Every group gets one entry and its state.
    let Opened {
        engine,
        rss_kept: rss_open_empty,
        ..
    } = timed_open(kind, &dir, options)?;
    let before = settled_rss();
    let t = Instant::now();
    let positions: Vec<usize> = (0..logs.len()).collect();
    for (i, chunk) in positions.chunks(IDLE_GROUPS_PER_BATCH).enumerate() {
        let last = (i + 1) * IDLE_GROUPS_PER_BATCH >= positions.len();
        append(engine.as_ref(), &mut logs, chunk, 1, sizes, last)?;
    }
    let rss_write_idle = growth(settled_rss(), before);
    engine.close()?;
    say(
        args.json,
        format!(
            "{name}: {} groups written in {}",
            fmt_count(groups),
            fmt_duration(t.elapsed())
        ),
    );

    // 3. Reopen the idle directory.
    let Opened {
        engine,
        took: open_idle,
        rss_kept: rss_open_idle,
    } = timed_open(kind, &dir, options)?;
    let idle_stats = engine.stats();
    check(engine.as_ref(), &logs, sizes)?;
    say(
        args.json,
        format!(
            "{name}: reopened {} idle groups in {}, resident memory +{}",
            fmt_count(groups),
            fmt_duration(open_idle),
            or_na(rss_open_idle, fmt_bytes)
        ),
    );

    // 4. Fill the first groups, 16 per batch, round robin.
    let fill_groups = args.fill_groups.min(groups) as usize;
    let per_batch = FILL_GROUPS_PER_BATCH.min(fill_groups);
    let per_append = args.entries_per_append as u64;
    let before = settled_rss();
    let t = Instant::now();
    let mut added = 0u64;
    let mut cursor = 0usize;
    let mut picked = Vec::with_capacity(per_batch);
    while added < args.fill_entries {
        picked.clear();
        for _ in 0..per_batch {
            picked.push(cursor);
            cursor = (cursor + 1) % fill_groups;
        }
        added += (picked.len() as u64) * per_append;
        let last = added >= args.fill_entries;
        append(
            engine.as_ref(),
            &mut logs,
            &picked,
            args.entries_per_append,
            sizes,
            last,
        )?;
    }
    let rss_write_fill = growth(settled_rss(), before);
    engine.close()?;
    say(
        args.json,
        format!(
            "{name}: {} entries added in {}",
            fmt_count(added),
            fmt_duration(t.elapsed())
        ),
    );

    // 5. Reopen the filled directory.
    let Opened {
        engine,
        took: open_filled,
        rss_kept: rss_open_filled,
    } = timed_open(kind, &dir, options)?;
    let filled_stats = engine.stats();
    check(engine.as_ref(), &logs, sizes)?;
    engine.close()?;
    kind.wipe(&dir)?;
    say(
        args.json,
        format!(
            "{name}: reopened with {} more entries in {}, resident memory +{}",
            fmt_count(added),
            fmt_duration(open_filled),
            or_na(rss_open_filled, fmt_bytes)
        ),
    );

    let per = |bytes: Option<u64>, n: u64| bytes.map(|b| b as f64 / n.max(1) as f64);
    let diff = |a: Option<u64>, b: Option<u64>| a.zip(b).map(|(a, b)| a as f64 - b as f64);
    let index = |s: &EngineStats| s.index_memory_bytes;
    Ok(MemoryRecord {
        kind: "memory",
        engine: name,
        groups,
        fill_groups: fill_groups as u64,
        fill_entries: added,
        entries_per_append: args.entries_per_append,
        entry_bytes: args.entry_bytes,
        bytes_per_group_live: per(rss_write_idle, groups),
        bytes_per_group_reopened: diff(rss_open_idle, rss_open_empty).map(|d| d / groups as f64),
        engine_bytes_per_group: per(index(&idle_stats), groups),
        bytes_per_entry_live: per(rss_write_fill, added),
        bytes_per_entry_reopened: diff(rss_open_filled, rss_open_idle).map(|d| d / added as f64),
        engine_bytes_per_entry: diff(index(&filled_stats), index(&idle_stats))
            .map(|d| d / added as f64),
        open_seconds_idle: open_idle.as_secs_f64(),
        open_seconds_filled: open_filled.as_secs_f64(),
        rss_open_empty,
        rss_open_idle,
        rss_open_filled,
        rss_write_idle,
        rss_write_fill,
        index_bytes_idle: index(&idle_stats),
        index_bytes_filled: index(&filled_stats),
    })
}

/// Appends `count` entries (and the state) to each group at `positions` of
/// `logs` in one batch, synced if `sync`.
fn append(
    engine: &dyn LogEngine,
    logs: &mut [GroupLog],
    positions: &[usize],
    count: usize,
    sizes: EntrySizes,
    sync: bool,
) -> Result<(), BenchError> {
    let batch = WriteBatch {
        appends: positions
            .iter()
            .map(|&i| next_append(&logs[i], count, sizes))
            .collect(),
    };
    engine.write(&batch, sync)?;
    for &i in positions {
        logs[i].last += count as u64;
    }
    Ok(())
}

/// Spot-checks the reopened engine: the last entry and the state of every
/// group, so that no figure comes from an engine that lost data.
fn check(engine: &dyn LogEngine, logs: &[GroupLog], sizes: EntrySizes) -> Result<(), BenchError> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    verify::verify(engine, logs, sizes, threads, true)?.check()
}

/// One column per engine; then, when Strata ran beside peers, one
/// `strata/<peer>` column per peer (below 1 is Strata smaller).
fn table(groups: u64, records: &[MemoryRecord]) -> Table {
    let strata = records
        .iter()
        .find(|r| r.engine == EngineKind::Strata.name());
    let peers: Vec<&MemoryRecord> = match strata {
        Some(_) => records
            .iter()
            .filter(|r| r.engine != EngineKind::Strata.name())
            .collect(),
        None => Vec::new(),
    };
    let mut t = Table::new(
        std::iter::once(format!("index memory, {} groups", fmt_count(groups)))
            .chain(records.iter().map(|r| r.engine.to_string()))
            .chain(peers.iter().map(|p| format!("strata/{}", p.engine))),
    );
    let bytes = |v: Option<f64>| or_na(v, |b| format!("{b:.1}"));
    let mut row =
        |name: &str, cell: &dyn Fn(&MemoryRecord) -> String, ratio: RatioOf<MemoryRecord>| {
            let ratios = ratio_cells(strata, &peers, ratio);
            t.row(
                std::iter::once(name.to_string())
                    .chain(records.iter().map(cell))
                    .chain(ratios),
            );
        };
    row(
        "per idle group (B), live",
        &|r| bytes(r.bytes_per_group_live),
        Some(&|r| r.bytes_per_group_live),
    );
    row(
        "per idle group (B), after reopen",
        &|r| bytes(r.bytes_per_group_reopened),
        Some(&|r| r.bytes_per_group_reopened),
    );
    row(
        "per idle group (B), engine's count",
        &|r| bytes(r.engine_bytes_per_group),
        None,
    );
    row(
        "live entries added",
        &|r| {
            format!(
                "{} in {} groups",
                fmt_count(r.fill_entries),
                fmt_count(r.fill_groups)
            )
        },
        None,
    );
    row(
        "per live entry (B), live",
        &|r| bytes(r.bytes_per_entry_live),
        Some(&|r| r.bytes_per_entry_live),
    );
    row(
        "per live entry (B), after reopen",
        &|r| bytes(r.bytes_per_entry_reopened),
        Some(&|r| r.bytes_per_entry_reopened),
    );
    row(
        "per live entry (B), engine's count",
        &|r| bytes(r.engine_bytes_per_entry),
        None,
    );
    row(
        "open time, idle groups",
        &|r| fmt_duration(Duration::from_secs_f64(r.open_seconds_idle)),
        Some(&|r| Some(r.open_seconds_idle)),
    );
    row(
        "open time, filled",
        &|r| fmt_duration(Duration::from_secs_f64(r.open_seconds_filled)),
        Some(&|r| Some(r.open_seconds_filled)),
    );
    t
}
