//! `strata-bench demo`: the project's main job. Runs a TiKV-like multi-group
//! workload on raftlog on the real disk, then closes, reopens (timing
//! recovery), verifies every live entry byte for byte and prints a summary;
//! then the same for an LSM workload on the lsm engine (`lsm_demo.rs`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::engines::{EngineKind, EngineOptions, EngineStats};
use crate::error::BenchError;
use crate::proc_stats::{peak_rss_bytes, ProcSample};
use crate::report::{fmt_count, fmt_duration, fmt_rate, or_na, Table};
use crate::runner::{self, Stop, WorkloadOutcome, WorkloadSpec};
use crate::units::{fmt_bytes, MB};
use crate::verify::{self, VerifyOutcome};
use crate::workload::{EntrySizes, GroupSkew, STATE_BYTES};

/// Groups each batch appends to, as a TiKV store's Raft poller batches the
/// ready regions of one round.
const GROUPS_PER_BATCH: usize = 16;
/// Entries each group keeps after a compaction.
const COMPACT_LAG: u64 = 32;
/// Time between purges.
const PURGE_INTERVAL: Duration = Duration::from_secs(2);
/// Small files and a low purge threshold, so that a ten-second demo seals
/// files, purges them and rewrites lagging data instead of only appending.
const DEMO_FILE_BYTES: u64 = 8 << 20;
const DEMO_PURGE_THRESHOLD_BYTES: u64 = 64 << 20;

/// Arguments of `demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Directory of the engine; an old demo there is wiped first unless --keep.
    #[arg(long, default_value = "./strata-data/demo")]
    dir: PathBuf,
    /// Raft groups.
    #[arg(long, default_value_t = 1000)]
    groups: u64,
    /// How long to write.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Write this many batches instead of writing for --seconds.
    #[arg(long, conflicts_with = "seconds")]
    batches: Option<u64>,
    /// Bytes of each entry.
    #[arg(long, default_value_t = 1024)]
    entry_bytes: usize,
    /// Writer threads, each owning groups/writers groups.
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// Purged files the engine keeps for reuse (default: the engine's own).
    #[arg(long)]
    recycle_files_max: Option<usize>,
    /// Keep the data of an earlier demo and continue its groups (use the same
    /// --entry-bytes, or verification will rightly fail).
    #[arg(long)]
    keep: bool,
    /// The lsm half of the demo.
    #[command(flatten)]
    lsm: crate::lsm_demo::LsmDemoArgs,
}

/// Runs the demo; fails if verification finds anything wrong.
pub fn run(args: &DemoArgs) -> Result<(), BenchError> {
    let kind = EngineKind::Strata;
    let stop = match args.batches {
        Some(n) => Stop::Batches(n),
        None if args.seconds > 0.0 && args.seconds.is_finite() => {
            Stop::After(Duration::from_secs_f64(args.seconds))
        }
        None => return Err(BenchError::Usage("--seconds must be above 0".into())),
    };
    let spec = WorkloadSpec {
        groups: args.groups,
        groups_per_batch: GROUPS_PER_BATCH,
        entries_per_group: 1,
        sizes: EntrySizes::Fixed(args.entry_bytes),
        writers: args.writers,
        skew: GroupSkew::RoundRobin,
        sync: true,
        compact_lag: COMPACT_LAG,
        purge_interval: Some(PURGE_INTERVAL),
        // The demo reports the groups purge names (see `print_purges`) and
        // leaves them as they are, so that purge has lagging data to rewrite.
        force_compact: false,
        stop,
        progress: true,
    };
    spec.validate()?;
    let options = EngineOptions {
        compression: true,
        target_file_bytes: Some(DEMO_FILE_BYTES),
        purge_threshold_bytes: Some(DEMO_PURGE_THRESHOLD_BYTES),
        recycle_files_max: args.recycle_files_max,
        cached_tail_bytes: None,
    };
    if !args.keep {
        kind.wipe(&args.dir)?;
    }
    print_intro(args, &spec);

    let proc_before = ProcSample::now();
    let engine = kind.open(&args.dir, &options)?;
    let outcome = runner::run(engine.as_ref(), &spec)?;
    let written = engine.stats();
    let t = Instant::now();
    engine.close()?;
    let close_time = t.elapsed();
    let device = ProcSample::now().since(&proc_before);
    print_purges(&outcome);

    println!("Closed in {}; reopening...", fmt_duration(close_time));
    let after = reopen_and_verify(kind, &options, &args.dir, &outcome, spec.sizes);
    println!();
    print!(
        "{}",
        summary(&outcome, &written, device, after.as_ref()).render()
    );
    let after = after?;
    if let Some(damaged) = after.stats.recovery.map(|r| r.damaged).filter(|d| *d > 0) {
        return Err(BenchError::Verify(format!(
            "recovery cut {damaged} damaged records after a clean close"
        )));
    }
    after.verified.check()?;
    println!(
        "\nverified {} entries OK ({} groups, {} state keys, {} compared)",
        fmt_count(after.verified.entries),
        fmt_count(after.verified.groups),
        fmt_count(after.verified.states),
        fmt_bytes(after.verified.bytes)
    );
    println!();
    crate::lsm_demo::run(&args.lsm)
}

/// What the reopen found.
#[derive(Debug)]
struct Reopened {
    /// The reopened engine's counters (its recovery report among them).
    stats: EngineStats,
    /// Wall time of `open`.
    open_time: Duration,
    /// What reading everything back found.
    verified: VerifyOutcome,
}

/// Reopens the engine, timing recovery, and verifies every live entry.
fn reopen_and_verify(
    kind: EngineKind,
    options: &EngineOptions,
    dir: &std::path::Path,
    outcome: &WorkloadOutcome,
    sizes: EntrySizes,
) -> Result<Reopened, BenchError> {
    let t = Instant::now();
    let engine = kind.open(dir, options)?;
    let open_time = t.elapsed();
    let stats = engine.stats();
    println!("Reopened in {}.", fmt_duration(open_time));
    println!("Verifying every live entry of every group...");
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let verified = verify::verify(engine.as_ref(), &outcome.groups, sizes, threads, false)?;
    engine.close()?;
    Ok(Reopened {
        stats,
        open_time,
        verified,
    })
}

fn print_intro(args: &DemoArgs, spec: &WorkloadSpec) {
    println!("Strata demo: a TiKV-like multi-group Raft log workload on raftlog");
    println!(
        "  dir        {}{}",
        args.dir.display(),
        if args.keep { " (kept)" } else { " (fresh)" }
    );
    println!(
        "  groups     {} over {} writers ({} each)",
        spec.groups,
        spec.writers,
        spec.groups / spec.writers as u64
    );
    println!(
        "  batch      {} groups x (1 entry of {} + a {STATE_BYTES} B raft_state put), fsync'd",
        spec.effective_groups_per_batch(),
        spec.sizes
    );
    println!(
        "  compact    each group to its last {COMPACT_LAG} entries once it holds {}",
        2 * COMPACT_LAG
    );
    println!(
        "  purge      every {} s in the background; files of {}, rewrite above {}",
        PURGE_INTERVAL.as_secs(),
        fmt_bytes(DEMO_FILE_BYTES),
        fmt_bytes(DEMO_PURGE_THRESHOLD_BYTES)
    );
    match spec.stop {
        Stop::After(d) => println!("  run        {:.1} s", d.as_secs_f64()),
        Stop::Batches(n) => println!("  run        {} batches", fmt_count(n)),
        Stop::PayloadBytes(n) => println!("  run        {}", fmt_bytes(n)),
    }
    println!();
}

fn print_purges(outcome: &WorkloadOutcome) {
    let p = &outcome.purge;
    println!(
        "Purges: {} run, {} freed files: {} files purged, {} entries ({}) rewritten, \
         {} groups asked to compact; longest {}, total {}.",
        p.calls,
        p.productive,
        p.files_purged,
        fmt_count(p.entries_rewritten),
        fmt_bytes(p.bytes_rewritten),
        p.groups_to_compact,
        fmt_duration(p.max_time),
        fmt_duration(p.total_time)
    );
}

fn summary(
    o: &WorkloadOutcome,
    written: &EngineStats,
    device: ProcSample,
    after: Result<&Reopened, &BenchError>,
) -> Table {
    let secs = o.duration.as_secs_f64().max(1e-9);
    let payload = o.payload_bytes as f64;
    let ratio = |bytes: u64| {
        format!(
            "{:.2}x ({})",
            bytes as f64 / payload.max(1.0),
            fmt_bytes(bytes)
        )
    };
    let mut t = Table::new(["summary", "value"]);
    t.row(["writes (batches)".to_string(), fmt_count(o.batches)]);
    t.row(["entries".to_string(), fmt_count(o.entries)]);
    t.row([
        "payload (entries + state)".to_string(),
        format!("{:.1} MB", payload / MB),
    ]);
    t.row(["duration".to_string(), fmt_duration(o.duration)]);
    t.row(["batches/s".to_string(), fmt_rate(o.batches as f64 / secs)]);
    t.row(["payload MB/s".to_string(), fmt_rate(payload / MB / secs)]);
    t.row([
        "write latency p50 / p99 / p99.9".to_string(),
        or_na(written.write_latency_us, |[p50, p99, p999]| {
            format!(
                "{} / {} / {}",
                fmt_duration(Duration::from_micros(p50)),
                fmt_duration(Duration::from_micros(p99)),
                fmt_duration(Duration::from_micros(p999))
            )
        }),
    ]);
    t.row([
        "fsyncs".to_string(),
        or_na(written.fsyncs, |n| {
            format!(
                "{} ({:.2} per batch)",
                fmt_count(n),
                n as f64 / o.batches.max(1) as f64
            )
        }),
    ]);
    t.row([
        "compressed batches".to_string(),
        or_na(written.compressed_batches, fmt_count),
    ]);
    t.row([
        "engine bytes written / payload".to_string(),
        or_na(written.bytes_written, ratio),
    ]);
    t.row([
        "device bytes written / payload".to_string(),
        or_na(device.write_bytes, ratio),
    ]);
    t.row(["compactions".to_string(), fmt_count(o.compactions)]);
    t.row([
        "files purged".to_string(),
        or_na(written.files_purged, fmt_count),
    ]);
    t.row([
        "entries rewritten".to_string(),
        or_na(written.entries_rewritten, fmt_count),
    ]);
    t.row(["peak RSS".to_string(), or_na(peak_rss_bytes(), fmt_bytes)]);
    let after = match after {
        Ok(after) => after,
        Err(e) => {
            t.row(["reopen".to_string(), format!("FAILED: {e}")]);
            return t;
        }
    };
    let reopened = &after.stats;
    t.row([
        "live entries".to_string(),
        or_na(reopened.live_entries, fmt_count),
    ]);
    t.row([
        "index bytes per live entry".to_string(),
        or_na(reopened.index_bytes_per_entry, |b| format!("{b:.2}")),
    ]);
    t.row([
        "index memory".to_string(),
        or_na(reopened.index_memory_bytes, fmt_bytes),
    ]);
    t.row([
        "recovery time (open)".to_string(),
        fmt_duration(after.open_time),
    ]);
    if let Some(r) = reopened.recovery {
        let open = after.open_time.as_secs_f64().max(1e-9);
        t.row([
            "recovery records/s".to_string(),
            format!(
                "{} ({} records, {} files)",
                fmt_rate(r.records as f64 / open),
                fmt_count(r.records),
                r.files
            ),
        ]);
        t.row([
            "recovery read".to_string(),
            format!(
                "{} at {:.0} MB/s",
                fmt_bytes(r.bytes_read),
                r.bytes_read as f64 / MB / open
            ),
        ]);
    }
    let verified = &after.verified;
    t.row([
        "verified".to_string(),
        if verified.failure_count == 0 {
            format!(
                "{} entries OK in {}",
                fmt_count(verified.entries),
                fmt_duration(verified.duration)
            )
        } else {
            format!("{} FAILURES", fmt_count(verified.failure_count))
        },
    ]);
    t
}
