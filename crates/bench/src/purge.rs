//! `strata-bench raftlog-purge`: how long the purge takes that frees most of a
//! large log, each engine on the same data, in one invocation.
//!
//! Per run, for each engine in turn (the first one rotating between runs), in
//! a fresh subdirectory: write `--total-bytes` of entries over `--groups`
//! groups, unsynced and without purges, each group compacted to its last
//! `--keep` entries, with the groups of each batch chosen by `--group-skew`
//! (so with Zipf a long tail of nearly idle groups lags in the oldest files).
//! Close, and reopen with a purge threshold of half the payload written: the
//! purge must then free the older files by copying the live data that still
//! holds them, or name the groups to compact. Time that purge and
//! a second one right after (which has nothing left to do), then check every
//! group's range, last entry and state.
//!
//! Reported per engine, medians of `--runs`: the purge's wall time and CPU
//! time, bytes it copied, files it freed, groups it named, the engine's files
//! before and after; and strata/peer ratios of the times.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::engines::{EngineKind, EngineOptions, PurgeReport};
use crate::error::BenchError;
use crate::proc_stats::ProcSample;
use crate::report::{
    fmt_count, fmt_duration, median, or_na, print_json, ratio_cells, say, RatioOf, Table,
};
use crate::runner::{self, Stop, WorkloadSpec};
use crate::units::{fmt_bytes, parse_bytes};
use crate::verify;
use crate::workload::{parse_entry_bytes, EntrySizes, GroupSkew};

/// Arguments of `raftlog-purge`.
#[derive(Debug, clap::Args)]
pub struct PurgeArgs {
    /// Engines to measure, comma-separated (default: every engine compiled
    /// in). Peers need a build with `--features peers`.
    #[arg(long = "engines", alias = "engine", value_enum, value_delimiter = ',')]
    engines: Vec<EngineKind>,
    /// Raft groups.
    #[arg(long, default_value_t = 100_000)]
    groups: u64,
    /// How each writer picks the groups of a batch among its own:
    /// round-robin, uniform or zipf:S.
    #[arg(long, default_value = "round-robin")]
    group_skew: GroupSkew,
    /// Bytes of each entry, or `mixed` (64 B to 64 KiB, log-uniform).
    #[arg(long, default_value = "1024", value_parser = parse_entry_bytes)]
    entry_bytes: EntrySizes,
    /// Groups each batch appends to.
    #[arg(long, default_value_t = 16)]
    groups_per_batch: usize,
    /// Entries each group keeps after a compaction (0: never compact).
    #[arg(long, default_value_t = 32)]
    keep: u64,
    /// Payload written before the purge.
    #[arg(long, default_value = "1G", value_parser = parse_bytes)]
    total_bytes: u64,
    /// Writer threads of the write phase.
    #[arg(long, default_value_t = 2)]
    writers: usize,
    /// Runs; the report gives the median.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Parent directory; each engine gets a subdirectory, wiped before each run.
    #[arg(long, default_value = "./strata-data/raftlog-purge")]
    dir: PathBuf,
    /// Print one JSON object per run and per engine's median instead of tables.
    #[arg(long)]
    json: bool,
}

/// One engine's run, and (with `kind` "purge_median") the medians of its runs.
#[derive(Debug, Clone, Serialize)]
struct PurgeRecord {
    kind: &'static str,
    engine: &'static str,
    runs: usize,
    groups: u64,
    group_skew: String,
    entry_bytes: String,
    keep: u64,
    payload_bytes: u64,
    fill_seconds: f64,
    /// The engine's files after the write phase, as it counts them.
    files_before: Option<u64>,
    purge_threshold_bytes: u64,
    purge_seconds: f64,
    purge_cpu_seconds: Option<f64>,
    /// Bytes the process sent to the device during the purge.
    purge_device_write_bytes: Option<u64>,
    files_purged: u64,
    bytes_rewritten: u64,
    groups_to_compact: u64,
    files_after: Option<u64>,
    second_purge_seconds: f64,
}

/// Runs the fill and the timed purges for every engine, `--runs` times.
pub fn run(args: &PurgeArgs) -> Result<(), BenchError> {
    if args.runs == 0 {
        return Err(BenchError::Usage("--runs must be at least 1".into()));
    }
    let engines = if args.engines.is_empty() {
        EngineKind::all()
    } else {
        args.engines.clone()
    };
    EngineKind::check_built(&engines)?;
    let spec = WorkloadSpec {
        groups: args.groups,
        groups_per_batch: args.groups_per_batch,
        entries_per_group: 1,
        sizes: args.entry_bytes,
        writers: args.writers,
        skew: args.group_skew,
        sync: false,
        compact_lag: args.keep,
        purge_interval: None,
        force_compact: false,
        stop: Stop::PayloadBytes(args.total_bytes),
        progress: true,
    };
    spec.validate()?;
    say(
        args.json,
        format!(
            "raftlog-purge: {} of {} entries over {} groups ({}), {} groups per batch, \
             keep {}, then one timed purge at half the log; {} runs of {}",
            fmt_bytes(args.total_bytes),
            args.entry_bytes,
            fmt_count(args.groups),
            args.group_skew,
            args.groups_per_batch,
            args.keep,
            args.runs,
            engines
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    let mut by_engine: Vec<Vec<PurgeRecord>> = vec![Vec::new(); engines.len()];
    for r in 1..=args.runs {
        for k in runner::interleaved(r, engines.len()) {
            let rec = run_one(engines[k], args, &spec)?;
            say(
                args.json,
                format!(
                    "run {r} {}: purge {} ({} CPU s), copied {}, freed {} files, named {} \
                     groups, files {} -> {}; second purge {}",
                    rec.engine,
                    fmt_duration(Duration::from_secs_f64(rec.purge_seconds)),
                    or_na(rec.purge_cpu_seconds, |c| format!("{c:.2}")),
                    fmt_bytes(rec.bytes_rewritten),
                    rec.files_purged,
                    fmt_count(rec.groups_to_compact),
                    or_na(rec.files_before, fmt_count),
                    or_na(rec.files_after, fmt_count),
                    fmt_duration(Duration::from_secs_f64(rec.second_purge_seconds)),
                ),
            );
            if args.json {
                print_json(&rec);
            }
            by_engine[k].push(rec);
        }
    }
    let medians: Vec<PurgeRecord> = by_engine.iter().map(|runs| median_record(runs)).collect();
    if args.json {
        for m in &medians {
            print_json(m);
        }
    } else {
        println!();
        print!("{}", table(&medians).render());
    }
    Ok(())
}

fn run_one(
    kind: EngineKind,
    args: &PurgeArgs,
    spec: &WorkloadSpec,
) -> Result<PurgeRecord, BenchError> {
    let dir = args.dir.join(kind.name());
    kind.wipe(&dir)?;
    let fill_options = EngineOptions::default();
    let engine = kind.open(&dir, &fill_options)?;
    let outcome = runner::run(engine.as_ref(), spec)?;
    engine.close()?;
    let threshold = (outcome.payload_bytes / 2).max(1);
    let options = EngineOptions {
        purge_threshold_bytes: Some(threshold),
        ..fill_options
    };
    let engine = kind.open(&dir, &options)?;
    let files_before = engine.stats().files;
    let before = ProcSample::now();
    let t = Instant::now();
    let report: PurgeReport = engine.purge()?;
    let took = t.elapsed();
    let used = ProcSample::now().since(&before);
    let t = Instant::now();
    engine.purge()?;
    let second = t.elapsed();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let checked = verify::verify(engine.as_ref(), &outcome.groups, spec.sizes, threads, true)?;
    let files_after = engine.stats().files;
    engine.close()?;
    checked.check()?;
    kind.wipe(&dir)?;
    Ok(PurgeRecord {
        kind: "purge",
        engine: kind.name(),
        runs: 1,
        groups: args.groups,
        group_skew: args.group_skew.to_string(),
        entry_bytes: args.entry_bytes.to_string(),
        keep: args.keep,
        payload_bytes: outcome.payload_bytes,
        fill_seconds: outcome.duration.as_secs_f64(),
        files_before,
        purge_threshold_bytes: threshold,
        purge_seconds: took.as_secs_f64(),
        purge_cpu_seconds: used.cpu_seconds,
        purge_device_write_bytes: used.write_bytes,
        files_purged: report.files_purged,
        bytes_rewritten: report.bytes_rewritten,
        groups_to_compact: report.groups_to_compact.len() as u64,
        files_after,
        second_purge_seconds: second.as_secs_f64(),
    })
}

/// The median of each measured field over `runs` (all of one engine).
fn median_record(runs: &[PurgeRecord]) -> PurgeRecord {
    let first = runs[0].clone();
    let f =
        |get: &dyn Fn(&PurgeRecord) -> f64| median(runs.iter().map(get).collect()).unwrap_or(0.0);
    let u = |get: &dyn Fn(&PurgeRecord) -> u64| f(&|r| get(r) as f64).round() as u64;
    let opt_f =
        |get: &dyn Fn(&PurgeRecord) -> Option<f64>| median(runs.iter().filter_map(get).collect());
    PurgeRecord {
        kind: "purge_median",
        runs: runs.len(),
        payload_bytes: u(&|r| r.payload_bytes),
        fill_seconds: f(&|r| r.fill_seconds),
        files_before: opt_f(&|r| r.files_before.map(|b| b as f64)).map(|b| b.round() as u64),
        purge_threshold_bytes: u(&|r| r.purge_threshold_bytes),
        purge_seconds: f(&|r| r.purge_seconds),
        purge_cpu_seconds: opt_f(&|r| r.purge_cpu_seconds),
        purge_device_write_bytes: opt_f(&|r| r.purge_device_write_bytes.map(|b| b as f64))
            .map(|b| b.round() as u64),
        files_purged: u(&|r| r.files_purged),
        bytes_rewritten: u(&|r| r.bytes_rewritten),
        groups_to_compact: u(&|r| r.groups_to_compact),
        files_after: opt_f(&|r| r.files_after.map(|b| b as f64)).map(|b| b.round() as u64),
        second_purge_seconds: f(&|r| r.second_purge_seconds),
        ..first
    }
}

fn table(medians: &[PurgeRecord]) -> Table {
    let strata = medians
        .iter()
        .find(|m| m.engine == EngineKind::Strata.name());
    let peers: Vec<&PurgeRecord> = medians
        .iter()
        .filter(|m| m.engine != EngineKind::Strata.name())
        .collect();
    let mut header = vec![format!(
        "median of {} (groups {}, {}, {} entries)",
        medians.first().map_or(0, |m| m.runs),
        medians.first().map_or(0, |m| m.groups),
        medians.first().map_or("", |m| m.group_skew.as_str()),
        medians.first().map_or("", |m| m.entry_bytes.as_str()),
    )];
    header.extend(medians.iter().map(|m| m.engine.to_string()));
    header.extend(peers.iter().map(|p| format!("strata/{}", p.engine)));
    let mut t = Table::new(header);
    let mut row =
        |label: &str, cell: &dyn Fn(&PurgeRecord) -> String, ratio: RatioOf<PurgeRecord>| {
            let mut cells = vec![label.to_string()];
            cells.extend(medians.iter().map(cell));
            cells.extend(ratio_cells(strata, &peers, ratio));
            t.row(cells);
        };
    let secs = |s: f64| fmt_duration(Duration::from_secs_f64(s));
    row("payload written", &|r| fmt_bytes(r.payload_bytes), None);
    row(
        "purge threshold",
        &|r| fmt_bytes(r.purge_threshold_bytes),
        None,
    );
    row(
        "files before purge",
        &|r| or_na(r.files_before, fmt_count),
        None,
    );
    row(
        "purge time",
        &|r| secs(r.purge_seconds),
        Some(&|r| Some(r.purge_seconds)),
    );
    row(
        "purge CPU (s)",
        &|r| or_na(r.purge_cpu_seconds, |c| format!("{c:.2}")),
        Some(&|r| r.purge_cpu_seconds),
    );
    row("bytes copied", &|r| fmt_bytes(r.bytes_rewritten), None);
    row(
        "device bytes written",
        &|r| or_na(r.purge_device_write_bytes, fmt_bytes),
        None,
    );
    row("files freed", &|r| fmt_count(r.files_purged), None);
    row(
        "groups named for compaction",
        &|r| fmt_count(r.groups_to_compact),
        None,
    );
    row(
        "files after purge",
        &|r| or_na(r.files_after, fmt_count),
        None,
    );
    row(
        "second purge",
        &|r| secs(r.second_purge_seconds),
        Some(&|r| Some(r.second_purge_seconds)),
    );
    t
}
