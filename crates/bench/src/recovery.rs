//! `strata-bench recovery`: how fast each engine reopens a directory full of
//! live entries. For each engine in turn (a fresh subdirectory each): write
//! `--total-bytes` of entries over `--groups` groups (no compaction, no purge,
//! so all of it stays live), close, then, for each of `--modes`, time
//! `--reopens` opens and spot-check the data after each. A warm open finds the
//! files in the page cache (as after a process restart); a cold one follows a
//! drop of the page cache (as after a machine restart; needs root). One write
//! phase serves every mode.
//!
//! Besides the time, each open's growth of the process's resident memory is
//! measured, with the allocator's free memory handed back before and after
//! the open (in one malloc arena, `--malloc-arenas`) so that only what the
//! engine keeps counts: the one measure of an in-memory index every engine
//! can be held to. Engines that count their own
//! index (Strata) are reported beside it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::engines::{EngineKind, EngineOptions, EngineStats};
use crate::error::BenchError;
use crate::proc_stats::{
    drop_page_cache, limit_malloc_arenas, peak_rss_bytes, release_free_heap, reset_peak_rss,
    rss_bytes, DROP_CACHES,
};
use crate::raftlog::OnOff;
use crate::report::{
    fmt_count, fmt_duration, fmt_rate, median, or_na, print_json, ratio_cells, say, RatioOf, Table,
};
use crate::runner::{self, Stop, WorkloadSpec};
use crate::units::{fmt_bytes, parse_bytes};
use crate::verify;
use crate::workload::{EntrySizes, GroupSkew};

/// How the page cache stands before a reopen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The files as the page cache holds them.
    Warm,
    /// Page cache dropped first (needs root).
    Cold,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Warm => "warm",
            Mode::Cold => "cold",
        }
    }
}

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
    /// Reopens to time per mode; the report gives the median.
    #[arg(long, default_value_t = 3)]
    reopens: usize,
    /// Reopen modes, comma-separated, measured in this order after one write
    /// phase per engine, e.g. `warm,cold` [default: warm; cold with --drop-caches].
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        conflicts_with = "drop_caches"
    )]
    modes: Vec<Mode>,
    /// Drop the page cache before each reopen (same as `--modes cold`; needs root).
    #[arg(long)]
    drop_caches: bool,
    /// Batch compression.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    compression: OnOff,
    /// Parent directory; each engine gets a subdirectory, wiped first and after.
    #[arg(long, default_value = "./strata-data/recovery")]
    dir: PathBuf,
    /// glibc malloc arenas for the whole run (0: glibc's default, one per
    /// thread up to 8 per core). One keeps the resident-memory measure exact
    /// (see `limit_malloc_arenas`); open times barely move.
    #[arg(long, default_value_t = 1)]
    malloc_arenas: u32,
    /// Print one JSON object per engine and mode on stdout instead of tables
    /// (progress goes to stderr).
    #[arg(long)]
    json: bool,
}

impl RecoveryArgs {
    fn modes(&self) -> Vec<Mode> {
        match (self.modes.is_empty(), self.drop_caches) {
            (false, _) => self.modes.clone(),
            (true, true) => vec![Mode::Cold],
            (true, false) => vec![Mode::Warm],
        }
    }
}

/// One engine's write phase and its reopens in each mode.
#[derive(Debug, Clone)]
struct EngineRecovery {
    engine: &'static str,
    payload_bytes: u64,
    entries: u64,
    write_time: Duration,
    /// Peak resident memory over the write phase.
    write_peak_rss: Option<u64>,
    reopened: Vec<Reopened>,
}

/// The reopens of one mode.
#[derive(Debug, Clone)]
struct Reopened {
    mode: Mode,
    /// Each open's time, in seconds.
    opens: Vec<f64>,
    /// Median open time.
    open: Duration,
    /// Median growth of resident memory over an open.
    rss_growth: Option<u64>,
    /// Peak resident memory over this mode's reopens.
    peak_rss: Option<u64>,
    /// The engine's counters after the last reopen.
    stats: EngineStats,
}

/// One engine in one mode: a column of a table, a JSON record.
#[derive(Debug, Clone, Copy)]
struct View<'a> {
    w: &'a EngineRecovery,
    r: &'a Reopened,
}

impl View<'_> {
    fn secs(&self) -> f64 {
        self.r.open.as_secs_f64().max(1e-9)
    }

    fn live_entries(&self) -> u64 {
        self.r.stats.live_entries.unwrap_or(self.w.entries).max(1)
    }

    fn rss_growth_per_entry(&self) -> Option<f64> {
        self.r
            .rss_growth
            .map(|g| g as f64 / self.w.entries.max(1) as f64)
    }

    fn index_memory_per_entry(&self) -> Option<f64> {
        self.r
            .stats
            .index_memory_bytes
            .map(|b| b as f64 / self.live_entries() as f64)
    }

    fn record(&self, args: &RecoveryArgs) -> RecoveryRecord {
        let (w, r) = (self.w, self.r);
        let rec = r.stats.recovery;
        RecoveryRecord {
            kind: "recovery",
            engine: w.engine,
            mode: r.mode,
            groups: args.groups,
            entry_bytes: args.entry_bytes,
            total_bytes: args.total_bytes,
            payload_bytes: w.payload_bytes,
            entries: w.entries,
            write_seconds: w.write_time.as_secs_f64(),
            write_peak_rss_bytes: w.write_peak_rss,
            reopens: r.opens.len(),
            open_seconds: r.open.as_secs_f64(),
            open_seconds_each: r.opens.clone(),
            payload_gb_per_sec: w.payload_bytes as f64 / 1e9 / self.secs(),
            entries_per_sec: w.entries as f64 / self.secs(),
            rss_growth_bytes: r.rss_growth,
            rss_growth_bytes_per_entry: self.rss_growth_per_entry(),
            index_memory_bytes: r.stats.index_memory_bytes,
            index_memory_bytes_per_entry: self.index_memory_per_entry(),
            index_location_bytes_per_entry: r.stats.index_bytes_per_entry,
            live_entries: r.stats.live_entries,
            files_read: rec.map(|x| x.files),
            bytes_read: rec.map(|x| x.bytes_read),
            records: rec.map(|x| x.records),
            peak_rss_bytes: r.peak_rss,
        }
    }
}

/// `--json`'s record for one engine in one mode.
#[derive(Debug, Serialize)]
struct RecoveryRecord {
    kind: &'static str,
    engine: &'static str,
    mode: Mode,
    groups: u64,
    entry_bytes: u64,
    total_bytes: u64,
    payload_bytes: u64,
    entries: u64,
    write_seconds: f64,
    write_peak_rss_bytes: Option<u64>,
    reopens: usize,
    /// Median.
    open_seconds: f64,
    open_seconds_each: Vec<f64>,
    payload_gb_per_sec: f64,
    entries_per_sec: f64,
    rss_growth_bytes: Option<u64>,
    rss_growth_bytes_per_entry: Option<f64>,
    /// The engine's own count of its index's heap bytes.
    index_memory_bytes: Option<u64>,
    index_memory_bytes_per_entry: Option<f64>,
    /// The engine's own count, entry locations only.
    index_location_bytes_per_entry: Option<f64>,
    live_entries: Option<u64>,
    files_read: Option<u64>,
    bytes_read: Option<u64>,
    records: Option<u64>,
    peak_rss_bytes: Option<u64>,
}

/// Writes, then times the reopens, for each engine.
pub fn run(args: &RecoveryArgs) -> Result<(), BenchError> {
    if args.reopens == 0 {
        return Err(BenchError::Usage("--reopens must be at least 1".into()));
    }
    EngineKind::check_built(&args.engines)?;
    // Before any thread of the run allocates.
    if args.malloc_arenas > 0 && !limit_malloc_arenas(args.malloc_arenas) {
        say(
            args.json,
            "recovery: cannot limit malloc arenas here; resident memory growth is noisy".into(),
        );
    }
    let modes = args.modes();
    let sizes = EntrySizes::Fixed(args.entry_bytes as usize);
    let spec = WorkloadSpec {
        groups: args.groups,
        groups_per_batch: args.groups_per_batch,
        entries_per_group: 1,
        sizes,
        writers: args.writers,
        skew: GroupSkew::RoundRobin,
        sync: false,
        compact_lag: 0,
        purge_interval: None,
        force_compact: false,
        stop: Stop::PayloadBytes(args.total_bytes),
        progress: true,
    };
    spec.validate()?;
    let options = EngineOptions {
        compression: args.compression == OnOff::On,
        ..EngineOptions::default()
    };
    say(
        args.json,
        format!(
            "recovery: writing {} of {} entries over {} groups into {}, then {} reopens each {}, for {}",
            fmt_bytes(args.total_bytes),
            sizes,
            args.groups,
            args.dir.display(),
            args.reopens,
            modes
                .iter()
                .map(|m| match m {
                    Mode::Warm => "warm",
                    Mode::Cold => "cold (page cache dropped)",
                })
                .collect::<Vec<_>>()
                .join(", then "),
            args.engines
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    let mut results = Vec::with_capacity(args.engines.len());
    for &kind in &args.engines {
        results.push(run_engine(kind, args, &modes, &spec, &options)?);
    }
    for (i, &mode) in modes.iter().enumerate() {
        let views: Vec<View> = results
            .iter()
            .map(|w| View {
                w,
                r: &w.reopened[i],
            })
            .collect();
        if args.json {
            for v in &views {
                print_json(&v.record(args));
            }
        } else {
            println!();
            print!("{}", table(mode, &views).render());
        }
    }
    Ok(())
}

fn run_engine(
    kind: EngineKind,
    args: &RecoveryArgs,
    modes: &[Mode],
    spec: &WorkloadSpec,
    options: &EngineOptions,
) -> Result<EngineRecovery, BenchError> {
    let dir = args.dir.join(kind.name());
    kind.wipe(&dir)?;
    reset_peak_rss();
    let engine = kind.open(&dir, options)?;
    let outcome = runner::run(engine.as_ref(), spec)?;
    engine.close()?;
    let write_peak_rss = peak_rss_bytes();
    say(
        args.json,
        format!(
            "{}: wrote {} entries ({}) in {}",
            kind.name(),
            fmt_count(outcome.entries),
            fmt_bytes(outcome.payload_bytes),
            fmt_duration(outcome.duration)
        ),
    );

    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut reopened = Vec::with_capacity(modes.len());
    for &mode in modes {
        release_free_heap();
        reset_peak_rss();
        let mut times = Vec::with_capacity(args.reopens);
        let mut growths = Vec::with_capacity(args.reopens);
        let mut last_stats = EngineStats::default();
        for i in 1..=args.reopens {
            if mode == Mode::Cold {
                drop_page_cache()
                    .map_err(BenchError::io("drop the page cache via", DROP_CACHES))?;
            }
            release_free_heap();
            let rss_before = rss_bytes();
            let t = Instant::now();
            let engine = kind.open(&dir, options)?;
            let took = t.elapsed();
            // What recovery allocated and freed again is not the index.
            release_free_heap();
            let growth = rss_bytes()
                .zip(rss_before)
                .map(|(a, b)| a.saturating_sub(b));
            let stats = engine.stats();
            let checked =
                verify::verify(engine.as_ref(), &outcome.groups, spec.sizes, threads, true)?;
            engine.close()?;
            checked.check()?;
            say(
                args.json,
                format!(
                    "{} {} reopen {i}: {} ({:.2} GB/s of payload), resident memory +{}, \
                     last entry and state of {} groups OK",
                    kind.name(),
                    mode.name(),
                    fmt_duration(took),
                    outcome.payload_bytes as f64 / 1e9 / took.as_secs_f64().max(1e-9),
                    or_na(growth, fmt_bytes),
                    checked.groups
                ),
            );
            times.push(took.as_secs_f64());
            if let Some(g) = growth {
                growths.push(g as f64);
            }
            last_stats = stats;
        }
        reopened.push(Reopened {
            mode,
            open: Duration::from_secs_f64(median(times.clone()).unwrap_or(0.0)),
            opens: times,
            rss_growth: median(growths).map(|g| g.round() as u64),
            peak_rss: peak_rss_bytes(),
            stats: last_stats,
        });
    }
    kind.wipe(&dir)?;
    Ok(EngineRecovery {
        engine: kind.name(),
        payload_bytes: outcome.payload_bytes,
        entries: outcome.entries,
        write_time: outcome.duration,
        write_peak_rss,
        reopened,
    })
}

/// One column per engine; then, when Strata ran beside peers, one
/// `strata/<peer>` column per peer on the rows where a ratio means something
/// (open time and memory: below 1 is Strata faster or smaller; rates: above 1
/// is Strata faster).
fn table<'a>(mode: Mode, views: &'a [View<'a>]) -> Table {
    let strata = views
        .iter()
        .find(|v| v.w.engine == EngineKind::Strata.name());
    let peers: Vec<&View<'a>> = match strata {
        Some(_) => views
            .iter()
            .filter(|v| v.w.engine != EngineKind::Strata.name())
            .collect(),
        None => Vec::new(),
    };
    let mut t = Table::new(
        std::iter::once(format!("recovery ({})", mode.name()))
            .chain(views.iter().map(|v| v.w.engine.to_string()))
            .chain(peers.iter().map(|p| format!("strata/{}", p.w.engine))),
    );
    let mut row = |name: &str, cell: &dyn Fn(&View<'a>) -> String, ratio: RatioOf<View<'a>>| {
        let ratios = ratio_cells(strata, &peers, ratio);
        t.row(
            std::iter::once(name.to_string())
                .chain(views.iter().map(cell))
                .chain(ratios),
        );
    };
    row("payload written", &|v| fmt_bytes(v.w.payload_bytes), None);
    row("entries (all live)", &|v| fmt_count(v.w.entries), None);
    row("write time", &|v| fmt_duration(v.w.write_time), None);
    row(
        "open time (median)",
        &|v| fmt_duration(v.r.open),
        Some(&|v| Some(v.r.open.as_secs_f64())),
    );
    row(
        "payload GB/s",
        &|v| format!("{:.2}", v.w.payload_bytes as f64 / 1e9 / v.secs()),
        Some(&|v| Some(v.w.payload_bytes as f64 / v.secs())),
    );
    row(
        "entries/s",
        &|v| fmt_rate(v.w.entries as f64 / v.secs()),
        Some(&|v| Some(v.w.entries as f64 / v.secs())),
    );
    row(
        "files read",
        &|v| or_na(v.r.stats.recovery, |x| fmt_count(x.files)),
        None,
    );
    row(
        "bytes read",
        &|v| or_na(v.r.stats.recovery, |x| fmt_bytes(x.bytes_read)),
        None,
    );
    row(
        "records",
        &|v| or_na(v.r.stats.recovery, |x| fmt_count(x.records)),
        None,
    );
    row(
        "resident memory kept by open",
        &|v| or_na(v.r.rss_growth, fmt_bytes),
        Some(&|v| v.r.rss_growth.map(|g| g as f64)),
    );
    row(
        "  per live entry (bytes, every engine)",
        &|v| or_na(v.rss_growth_per_entry(), |b| format!("{b:.1}")),
        Some(&|v| v.rss_growth_per_entry()),
    );
    row(
        "index memory (engine's count)",
        &|v| or_na(v.r.stats.index_memory_bytes, fmt_bytes),
        None,
    );
    row(
        "  per live entry (bytes, engine's count)",
        &|v| or_na(v.index_memory_per_entry(), |b| format!("{b:.1}")),
        None,
    );
    row(
        "  entry locations per entry (engine's count)",
        &|v| or_na(v.r.stats.index_bytes_per_entry, |b| format!("{b:.2}")),
        None,
    );
    row(
        "peak RSS over the reopens",
        &|v| or_na(v.r.peak_rss, fmt_bytes),
        None,
    );
    row(
        "peak RSS over the write",
        &|v| or_na(v.w.write_peak_rss, fmt_bytes),
        None,
    );
    t
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: RecoveryArgs,
    }

    fn modes(flags: &[&str]) -> Result<Vec<Mode>, clap::Error> {
        Cli::try_parse_from(std::iter::once("recovery").chain(flags.iter().copied()))
            .map(|c| c.args.modes())
    }

    #[test]
    fn modes_default_to_warm_and_drop_caches_means_cold() {
        assert_eq!(modes(&[]).unwrap(), [Mode::Warm]);
        assert_eq!(modes(&["--drop-caches"]).unwrap(), [Mode::Cold]);
        assert_eq!(
            modes(&["--modes", "warm,cold"]).unwrap(),
            [Mode::Warm, Mode::Cold]
        );
        assert!(modes(&["--modes", "cold", "--drop-caches"]).is_err());
        assert!(modes(&["--modes", "hot"]).is_err());
    }
}
