//! `strata-bench recovery`: how fast each engine reopens a directory full of
//! live entries. For each engine in turn (a fresh subdirectory each): write
//! `--total-bytes` of entries over `--groups` groups (no compaction, no purge,
//! so all of it stays live), close, then time `--reopens` opens and spot-check
//! the data after each. The opens are warm (the files in the page cache, as
//! after a process restart) unless `--drop-caches` drops the page cache before
//! each one (cold, as after a machine restart; needs root).
//!
//! Besides the time, each open's growth of the process's resident memory is
//! measured (the allocator's free memory handed back first), the one measure
//! of an engine's in-memory index that every engine can be held to.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::engines::{EngineKind, EngineOptions, EngineStats};
use crate::error::BenchError;
use crate::proc_stats::{
    drop_page_cache, peak_rss_bytes, release_free_heap, reset_peak_rss, rss_bytes, DROP_CACHES,
};
use crate::raftlog::OnOff;
use crate::report::{
    fmt_count, fmt_duration, fmt_rate, median, or_na, ratio_cells, RatioOf, Table,
};
use crate::runner::{self, Stop, WorkloadSpec};
use crate::units::{fmt_bytes, parse_bytes};
use crate::verify;
use crate::workload::EntrySizes;

/// Arguments of `recovery`.
#[derive(Debug, clap::Args)]
pub struct RecoveryArgs {
    /// Engines to measure, in this order, comma-separated. Peers need a build
    /// with `--features peers`.
    #[arg(
        long = "engines",
        alias = "engine",
        value_enum,
        value_delimiter = ',',
        default_value = "strata"
    )]
    engines: Vec<EngineKind>,
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
    /// Reopens to time; the report gives the median.
    #[arg(long, default_value_t = 3)]
    reopens: usize,
    /// Drop the page cache before each reopen (cold numbers; needs root).
    #[arg(long)]
    drop_caches: bool,
    /// Batch compression.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    compression: OnOff,
    /// Parent directory; each engine gets a subdirectory, wiped first and after.
    #[arg(long, default_value = "./strata-data/recovery")]
    dir: PathBuf,
}

/// One engine's results.
#[derive(Debug, Clone)]
struct EngineRecovery {
    engine: &'static str,
    payload_bytes: u64,
    entries: u64,
    write_time: Duration,
    /// Median open time.
    open: Duration,
    /// Median growth of resident memory over an open.
    rss_growth: Option<u64>,
    peak_rss: Option<u64>,
    /// The engine's counters after the last reopen.
    stats: EngineStats,
}

impl EngineRecovery {
    fn secs(&self) -> f64 {
        self.open.as_secs_f64().max(1e-9)
    }
}

/// Writes, then times the reopens, for each engine.
pub fn run(args: &RecoveryArgs) -> Result<(), BenchError> {
    if args.reopens == 0 {
        return Err(BenchError::Usage("--reopens must be at least 1".into()));
    }
    EngineKind::check_built(&args.engines)?;
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
    println!(
        "recovery: writing {} of {} entries over {} groups into {}, then {} {} reopens, for {}",
        fmt_bytes(args.total_bytes),
        sizes,
        args.groups,
        args.dir.display(),
        args.reopens,
        if args.drop_caches {
            "cold (page cache dropped)"
        } else {
            "warm"
        },
        args.engines
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut results = Vec::with_capacity(args.engines.len());
    for &kind in &args.engines {
        results.push(run_engine(kind, args, &spec, &options)?);
    }
    println!();
    print!("{}", table(&results).render());
    Ok(())
}

fn run_engine(
    kind: EngineKind,
    args: &RecoveryArgs,
    spec: &WorkloadSpec,
    options: &EngineOptions,
) -> Result<EngineRecovery, BenchError> {
    let dir = args.dir.join(kind.name());
    kind.wipe(&dir)?;
    reset_peak_rss();
    let engine = kind.open(&dir, options)?;
    let outcome = runner::run(engine.as_ref(), spec)?;
    engine.close()?;
    println!(
        "{}: wrote {} entries ({}) in {}",
        kind.name(),
        fmt_count(outcome.entries),
        fmt_bytes(outcome.payload_bytes),
        fmt_duration(outcome.duration)
    );

    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut times = Vec::with_capacity(args.reopens);
    let mut growths = Vec::with_capacity(args.reopens);
    let mut last_stats = EngineStats::default();
    for i in 1..=args.reopens {
        if args.drop_caches {
            drop_page_cache().map_err(BenchError::io("drop the page cache via", DROP_CACHES))?;
        }
        release_free_heap();
        let rss_before = rss_bytes();
        let t = Instant::now();
        let engine = kind.open(&dir, options)?;
        let took = t.elapsed();
        let growth = rss_bytes()
            .zip(rss_before)
            .map(|(a, b)| a.saturating_sub(b));
        let stats = engine.stats();
        let checked = verify::verify(engine.as_ref(), &outcome.groups, spec.sizes, threads, true)?;
        engine.close()?;
        checked.check()?;
        println!(
            "{} reopen {i}: {} ({:.2} GB/s of payload), resident memory +{}, \
             last entry and state of {} groups OK",
            kind.name(),
            fmt_duration(took),
            outcome.payload_bytes as f64 / 1e9 / took.as_secs_f64().max(1e-9),
            or_na(growth, fmt_bytes),
            checked.groups
        );
        times.push(took.as_secs_f64());
        if let Some(g) = growth {
            growths.push(g as f64);
        }
        last_stats = stats;
    }
    let peak_rss = peak_rss_bytes();
    kind.wipe(&dir)?;
    Ok(EngineRecovery {
        engine: kind.name(),
        payload_bytes: outcome.payload_bytes,
        entries: outcome.entries,
        write_time: outcome.duration,
        open: Duration::from_secs_f64(median(times).unwrap_or(0.0)),
        rss_growth: median(growths).map(|g| g.round() as u64),
        peak_rss,
        stats: last_stats,
    })
}

/// One column per engine; then, when Strata ran beside peers, one
/// `strata/<peer>` column per peer on the rows where a ratio means something
/// (open time: below 1 is Strata faster; rates: above 1 is Strata faster).
fn table(results: &[EngineRecovery]) -> Table {
    let strata = results
        .iter()
        .find(|r| r.engine == EngineKind::Strata.name());
    let peers: Vec<&EngineRecovery> = match strata {
        Some(_) => results
            .iter()
            .filter(|r| r.engine != EngineKind::Strata.name())
            .collect(),
        None => Vec::new(),
    };
    let mut t = Table::new(
        std::iter::once("recovery".to_string())
            .chain(results.iter().map(|r| r.engine.to_string()))
            .chain(peers.iter().map(|p| format!("strata/{}", p.engine))),
    );
    let mut row =
        |name: &str, cell: &dyn Fn(&EngineRecovery) -> String, ratio: RatioOf<EngineRecovery>| {
            let ratios = ratio_cells(strata, &peers, ratio);
            t.row(
                std::iter::once(name.to_string())
                    .chain(results.iter().map(cell))
                    .chain(ratios),
            );
        };
    row("payload written", &|r| fmt_bytes(r.payload_bytes), None);
    row("entries (all live)", &|r| fmt_count(r.entries), None);
    row("write time", &|r| fmt_duration(r.write_time), None);
    row(
        "open time (median)",
        &|r| fmt_duration(r.open),
        Some(&|r| Some(r.open.as_secs_f64())),
    );
    row(
        "payload GB/s",
        &|r| format!("{:.2}", r.payload_bytes as f64 / 1e9 / r.secs()),
        Some(&|r| Some(r.payload_bytes as f64 / r.secs())),
    );
    row(
        "entries/s",
        &|r| fmt_rate(r.entries as f64 / r.secs()),
        Some(&|r| Some(r.entries as f64 / r.secs())),
    );
    row(
        "files read",
        &|r| or_na(r.stats.recovery, |x| fmt_count(x.files)),
        None,
    );
    row(
        "bytes read",
        &|r| or_na(r.stats.recovery, |x| fmt_bytes(x.bytes_read)),
        None,
    );
    row(
        "records",
        &|r| or_na(r.stats.recovery, |x| fmt_count(x.records)),
        None,
    );
    row(
        "resident memory growth over open (noisy)",
        &|r| or_na(r.rss_growth, fmt_bytes),
        Some(&|r| r.rss_growth.map(|g| g as f64)),
    );
    row(
        "  per live entry (bytes)",
        &|r| {
            or_na(r.rss_growth, |g| {
                format!("{:.1}", g as f64 / r.entries.max(1) as f64)
            })
        },
        Some(&|r| r.rss_growth.map(|g| g as f64 / r.entries.max(1) as f64)),
    );
    row(
        "index bytes per entry (engine's count)",
        &|r| or_na(r.stats.index_bytes_per_entry, |b| format!("{b:.2}")),
        None,
    );
    row(
        "index memory (engine's count)",
        &|r| or_na(r.stats.index_memory_bytes, fmt_bytes),
        None,
    );
    row("peak RSS", &|r| or_na(r.peak_rss, fmt_bytes), None);
    t
}
