//! `strata-bench recovery`: how fast an engine reopens a directory full of
//! live entries. Writes `--total-bytes` of entries (no compaction, no purge,
//! so all of it stays live), closes, then times `--reopens` warm opens (the
//! files are in the page cache, as after a process restart) and spot-checks
//! the data after each.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::engines::{EngineKind, EngineOptions};
use crate::error::BenchError;
use crate::proc_stats::peak_rss_bytes;
use crate::raftlog::OnOff;
use crate::report::{fmt_count, fmt_duration, fmt_rate, median, or_na, Table};
use crate::runner::{self, Stop, WorkloadSpec};
use crate::units::{fmt_bytes, parse_bytes};
use crate::verify;
use crate::workload::EntrySizes;

/// Arguments of `recovery`.
#[derive(Debug, clap::Args)]
pub struct RecoveryArgs {
    /// Engine to measure.
    #[arg(long, value_enum, default_value_t = EngineKind::Strata)]
    engine: EngineKind,
    /// Raft groups.
    #[arg(long, default_value_t = 1000)]
    groups: u64,
    /// Payload to write before reopening.
    #[arg(long, default_value = "1G", value_parser = parse_bytes)]
    total_bytes: u64,
    /// Bytes of each entry.
    #[arg(long, default_value = "1024", value_parser = parse_bytes)]
    entry_bytes: u64,
    /// Groups each batch appends to.
    #[arg(long, default_value_t = 16)]
    groups_per_batch: usize,
    /// Writer threads for the write phase.
    #[arg(long, default_value_t = 2)]
    writers: usize,
    /// Warm reopens to time; the report gives the median.
    #[arg(long, default_value_t = 3)]
    reopens: usize,
    /// Batch compression.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    compression: OnOff,
    /// Directory of the engine, wiped first.
    #[arg(long, default_value = "./strata-data/recovery")]
    dir: PathBuf,
}

/// Writes, then times the reopens.
pub fn run(args: &RecoveryArgs) -> Result<(), BenchError> {
    if args.reopens == 0 {
        return Err(BenchError::Usage("--reopens must be at least 1".into()));
    }
    let sizes = EntrySizes::Fixed(args.entry_bytes as usize);
    let spec = WorkloadSpec {
        groups: args.groups,
        groups_per_batch: args.groups_per_batch,
        entries_per_group: 1,
        sizes,
        writers: args.writers,
        sync: false,
        compact_lag: 0,
        purge_interval: None,
        stop: Stop::PayloadBytes(args.total_bytes),
        progress: true,
    };
    spec.validate()?;
    let options = EngineOptions {
        compression: args.compression == OnOff::On,
        ..EngineOptions::default()
    };
    let kind = args.engine;
    kind.wipe(&args.dir)?;
    println!(
        "recovery: writing {} of {} entries over {} groups into {} ({}), then {} warm reopens",
        fmt_bytes(args.total_bytes),
        sizes,
        args.groups,
        args.dir.display(),
        kind.name(),
        args.reopens
    );
    let engine = kind.open(&args.dir, &options)?;
    let outcome = runner::run(engine.as_ref(), &spec)?;
    engine.close()?;
    println!(
        "wrote {} entries ({}) in {}",
        fmt_count(outcome.entries),
        fmt_bytes(outcome.payload_bytes),
        fmt_duration(outcome.duration)
    );

    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut times = Vec::with_capacity(args.reopens);
    let mut last_stats = None;
    for i in 1..=args.reopens {
        let t = Instant::now();
        let engine = kind.open(&args.dir, &options)?;
        let took = t.elapsed();
        let stats = engine.stats();
        let checked = verify::verify(engine.as_ref(), &outcome.groups, sizes, threads, true)?;
        engine.close()?;
        checked.check()?;
        let read = stats.recovery.map_or(0, |r| r.bytes_read);
        println!(
            "reopen {i}: {} ({:.2} GB/s), last entry and state of {} groups OK",
            fmt_duration(took),
            read as f64 / 1e9 / took.as_secs_f64().max(1e-9),
            checked.groups
        );
        times.push(took.as_secs_f64());
        last_stats = Some(stats);
    }
    kind.wipe(&args.dir)?;

    let open = Duration::from_secs_f64(median(times).unwrap_or(0.0));
    let secs = open.as_secs_f64().max(1e-9);
    let stats = last_stats.unwrap_or_default();
    let mut t = Table::new(["recovery", "value"]);
    t.row([
        "payload written".to_string(),
        fmt_bytes(outcome.payload_bytes),
    ]);
    t.row(["open time (median)".to_string(), fmt_duration(open)]);
    if let Some(r) = stats.recovery {
        t.row(["files".to_string(), fmt_count(r.files)]);
        t.row(["bytes read".to_string(), fmt_bytes(r.bytes_read)]);
        t.row(["records".to_string(), fmt_count(r.records)]);
        t.row([
            "GB/s".to_string(),
            format!("{:.2}", r.bytes_read as f64 / 1e9 / secs),
        ]);
        t.row([
            "payload GB/s".to_string(),
            format!("{:.2}", outcome.payload_bytes as f64 / 1e9 / secs),
        ]);
        t.row(["records/s".to_string(), fmt_rate(r.records as f64 / secs)]);
    }
    t.row([
        "live entries".to_string(),
        or_na(stats.live_entries, fmt_count),
    ]);
    t.row([
        "entries/s".to_string(),
        or_na(stats.live_entries, |n| fmt_rate(n as f64 / secs)),
    ]);
    t.row([
        "index bytes per entry".to_string(),
        or_na(stats.index_bytes_per_entry, |b| format!("{b:.2}")),
    ]);
    t.row([
        "index memory".to_string(),
        or_na(stats.index_memory_bytes, fmt_bytes),
    ]);
    t.row(["peak RSS".to_string(), or_na(peak_rss_bytes(), fmt_bytes)]);
    println!();
    print!("{}", t.render());
    Ok(())
}
