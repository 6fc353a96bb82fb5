//! `strata-bench raftlog`: the multi-group raft log workload against every
//! engine compiled in, side by side in one run.
//!
//! The defaults are the workload TiKV puts on its raft log: 1,000 groups, 16
//! groups per batch, one 1 KiB entry and a 64-byte state put per group, sync,
//! compaction to the last 32 entries, a purge every 2 s (the groups it names
//! force-compacted, as TiKV does), and writers that each own their groups.
//! Every engine runs with its own default configuration. Flags take it to
//! scale: many groups (`--groups 100000`), a skewed choice of groups
//! (`--group-skew zipf:0.99`), mixed entry sizes (`--entry-bytes mixed`, 64 B
//! to 64 KiB), unsynced batches (`--sync false`).
//!
//! Measured per run: write latency around each write call (in the bench, so
//! every engine is measured the same way) up to p99.99, writes/s and payload
//! MB/s, the bytes the process sent to the device over the payload
//! (`/proc/self/io`), fsyncs (the engine's count), the time of each purge
//! call (median and max), peak RSS and CPU seconds. With `--runs R` the report
//! gives the median of the R runs.
//!
//! After the runs, the built-in disk probe (`probe::measure`) writes with
//! fdatasync at each engine's own flush size (device bytes per fsync of its
//! median run), so every report shows how close each engine came to what the
//! device sustains at that size, measured on the same disk in the same run.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::engines::{EngineKind, EngineOptions};
use crate::error::BenchError;
use crate::probe;
use crate::proc_stats::{peak_rss_bytes, reset_peak_rss, ProcSample};
use crate::report::{fmt_count, fmt_rate, print_json};
use crate::runner::{self, Stop, WorkloadSpec};
use crate::units::{fmt_bytes, parse_bytes, MB};
use crate::workload::{parse_entry_bytes, EntrySizes, GroupSkew};

mod record;

use self::record::{median_record, ms, table, RunRecord, WorkloadEcho};

/// On or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// A named workload of the comparison with raft-engine and RocksDB
/// (`docs/bench/raftlog-vs-peers.md`), so that each of its cells is one command.
/// Explicit flags override what a preset sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// TiKV-like: 1,000 groups (64 per writer from 64 writers on), 16 groups
    /// per batch, one 1 KiB entry and a 64-byte state put per group, sync,
    /// compact to last - 32, purge every 2 s, 30 s.
    A,
    /// A with 16 KiB entries.
    B,
    /// One writer (unless --writers says otherwise), 256 groups per batch,
    /// 1 KiB entries, as TiKV's async store writer batches.
    C,
}

/// Arguments of `raftlog`.
#[derive(Debug, clap::Args)]
pub struct RaftlogArgs {
    /// Engines to run, in this order, comma-separated (default: every engine
    /// compiled in). Peers need a build with `--features peers`.
    #[arg(long = "engines", alias = "engine", value_enum, value_delimiter = ',')]
    engines: Vec<EngineKind>,
    /// A named workload of the matrix against raft-engine and RocksDB (A, B or
    /// C); the flags below override it.
    #[arg(long, value_enum, ignore_case = true)]
    preset: Option<Preset>,
    /// Raft groups [default: 1000; presets A and B: 64 per writer from 64
    /// writers on].
    #[arg(long)]
    groups: Option<u64>,
    /// Groups each batch appends to [default: 16; preset C: 256].
    #[arg(long)]
    groups_per_batch: Option<usize>,
    /// Entries appended to each group of a batch.
    #[arg(long, default_value_t = 1)]
    entries_per_group: usize,
    /// Bytes of each entry, or `mixed`: 64 B to 64 KiB, log-uniform (as many
    /// entries in each doubling of size) [default: 1024; preset B: 16K].
    #[arg(long, value_parser = parse_entry_bytes)]
    entry_bytes: Option<EntrySizes>,
    /// Entry lengths spread evenly over min:max bytes instead, or their
    /// logarithm spread evenly over log:min:max.
    #[arg(long, conflicts_with = "entry_bytes")]
    entry_bytes_dist: Option<EntrySizes>,
    /// How each writer picks the groups of a batch among its own: round-robin
    /// (every group at the same pace), uniform (at random), or zipf:S (rank k
    /// with probability proportional to 1/k^S, e.g. zipf:0.99: a few hot
    /// groups and a long, nearly idle tail).
    #[arg(long, default_value = "round-robin")]
    group_skew: GroupSkew,
    /// Writer threads, each owning groups/writers groups [default: 4; preset C: 1].
    #[arg(long)]
    writers: Option<usize>,
    /// Sync every write: true (the default) or false.
    #[arg(
        long,
        num_args = 0..=1,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new(),
        overrides_with = "no_sync"
    )]
    sync: Option<bool>,
    /// Do not sync writes (same as --sync false).
    #[arg(long, overrides_with = "sync")]
    no_sync: bool,
    /// Entries each group keeps after a compaction (0: never compact).
    #[arg(long, default_value_t = 32)]
    compact_lag: u64,
    /// Milliseconds between purges (0: never purge). Each purge is timed.
    #[arg(long, default_value_t = 2000)]
    purge_interval_ms: u64,
    /// Compact the groups a purge names (those holding back the oldest
    /// files) down to their newest entry before their next append, as TiKV
    /// force-compacts the regions raft-engine names.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    force_compact: OnOff,
    /// How long each run writes [default: 10; with a preset: 30].
    #[arg(long)]
    seconds: Option<f64>,
    /// Write this much payload per run instead of writing for --seconds.
    #[arg(long, value_parser = parse_bytes, conflicts_with = "seconds")]
    total_bytes: Option<u64>,
    /// Batch compression.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    compression: OnOff,
    /// Log file size (default: each engine's own).
    #[arg(long, value_parser = parse_bytes)]
    target_file_bytes: Option<u64>,
    /// Log size above which purge rewrites lagging data (default: each engine's own).
    #[arg(long, value_parser = parse_bytes)]
    purge_threshold_bytes: Option<u64>,
    /// Purged files kept for reuse (default: each engine's own).
    #[arg(long)]
    recycle_files_max: Option<usize>,
    /// Strata: how far behind the active file's end its synced pages stay
    /// cached after large appends, 0 for all of them (default: the engine's).
    #[arg(long, value_parser = parse_bytes)]
    cached_tail_bytes: Option<u64>,
    /// Parent directory; each engine gets a subdirectory, wiped before each run.
    #[arg(long, default_value = "./strata-data/raftlog")]
    dir: PathBuf,
    /// Print one JSON object per run (and one for the median) instead of tables.
    #[arg(long)]
    json: bool,
    /// Runs per engine; the report gives the median.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Seconds of the disk probe run for each engine after the runs, at that
    /// engine's device bytes per fsync, in --dir (0: no probe).
    #[arg(long, default_value_t = 3.0)]
    probe_seconds: f64,
    /// Seconds to pause after each run's wipe, before the next run opens:
    /// the memory the wipe freed (the run's page cache) settles first. In a
    /// virtual machine whose balloon reports free memory to its host, that
    /// memory is handed back over the next seconds, and a run started at
    /// once pays for it, whichever engine freed it.
    #[arg(long, default_value_t = 0.0)]
    settle_seconds: f64,
}

/// The probe's flush size is rounded to this (a page, the unit the device
/// sees writes in).
const PROBE_ALIGN: u64 = 4 << 10;
/// Largest probe flush: a run without syncs has one huge "flush".
const PROBE_MAX_FLUSH: u64 = 16 << 20;
/// Smallest probe file; writes wrap around at its end.
const PROBE_MIN_FILE: u64 = 64 << 20;

/// Returns the bytes per flush the disk probe uses for `r`: its device bytes
/// per fsync (its payload per write when it reports no fsyncs or no device
/// bytes), rounded to 4 KiB, at least 4 KiB and at most 16 MiB.
fn probe_flush_bytes(r: &RunRecord) -> u64 {
    let raw = match (r.device_write_bytes, r.fsyncs) {
        (Some(bytes), Some(fsyncs)) if bytes > 0 && fsyncs > 0 => bytes / fsyncs,
        _ => r.payload_bytes / r.writes.max(1),
    };
    let rounded = (raw + PROBE_ALIGN / 2) / PROBE_ALIGN * PROBE_ALIGN;
    rounded.clamp(PROBE_ALIGN, PROBE_MAX_FLUSH)
}

/// Probes the disk under `dir` at each median's flush size (once per distinct
/// size) and fills the disk-limit fields of the medians.
fn add_disk_limits(
    medians: &mut [RunRecord],
    dir: &std::path::Path,
    seconds: f64,
    quiet: bool,
) -> Result<(), BenchError> {
    let mut measured: HashMap<u64, f64> = HashMap::new();
    for m in medians {
        let bpf = probe_flush_bytes(m);
        let limit = match measured.get(&bpf) {
            Some(&mb) => mb,
            None => {
                let r = probe::measure(
                    dir,
                    bpf,
                    PROBE_MIN_FILE.max(4 * bpf),
                    Duration::from_secs_f64(seconds),
                )?;
                if !quiet {
                    println!(
                        "disk probe for {}: {} per write + fdatasync for {seconds:.1} s: \
                         {} flushes/s, {} MB/s",
                        m.engine,
                        fmt_bytes(bpf),
                        fmt_rate(r.flushes_per_sec()),
                        fmt_rate(r.mb_per_sec())
                    );
                }
                measured.insert(bpf, r.mb_per_sec());
                r.mb_per_sec()
            }
        };
        m.set_disk_limit(bpf, limit);
    }
    Ok(())
}

/// The shape-defining settings once preset and flags are combined.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Resolved {
    groups: u64,
    groups_per_batch: usize,
    entry_bytes: EntrySizes,
    writers: usize,
    seconds: f64,
    sync: bool,
}

/// Writers from which presets A and B give each writer 64 groups of its own,
/// so that every writer still fills its batches with groups of its own (4,096
/// groups at 64 writers; 1,000 would leave each fewer than a batch of 16).
const MANY_WRITERS: usize = 64;
/// Groups each writer owns from [`MANY_WRITERS`] on.
const GROUPS_PER_MANY_WRITER: u64 = 64;

impl RaftlogArgs {
    /// Combines the preset with the flags given: a flag always wins.
    fn resolve(&self) -> Resolved {
        let p = self.preset;
        let writers = self
            .writers
            .unwrap_or(if p == Some(Preset::C) { 1 } else { 4 });
        let many = matches!(p, Some(Preset::A | Preset::B)) && writers >= MANY_WRITERS;
        Resolved {
            groups: self.groups.unwrap_or(if many {
                GROUPS_PER_MANY_WRITER * writers as u64
            } else {
                1000
            }),
            groups_per_batch: self.groups_per_batch.unwrap_or(if p == Some(Preset::C) {
                256
            } else {
                16
            }),
            entry_bytes: self
                .entry_bytes_dist
                .or(self.entry_bytes)
                .unwrap_or(EntrySizes::Fixed(if p == Some(Preset::B) {
                    16 << 10
                } else {
                    1024
                })),
            writers,
            seconds: self
                .seconds
                .unwrap_or(if p.is_some() { 30.0 } else { 10.0 }),
            sync: !self.no_sync && self.sync.unwrap_or(true),
        }
    }
}

/// Runs the workload against each engine `--runs` times.
pub fn run(args: &RaftlogArgs) -> Result<(), BenchError> {
    let engines = if args.engines.is_empty() {
        EngineKind::all()
    } else {
        args.engines.clone()
    };
    EngineKind::check_built(&engines)?;
    let r = args.resolve();
    let sizes = r.entry_bytes;
    let stop = match args.total_bytes {
        Some(bytes) => Stop::PayloadBytes(bytes),
        None if r.seconds > 0.0 && r.seconds.is_finite() => {
            Stop::After(Duration::from_secs_f64(r.seconds))
        }
        None => return Err(BenchError::Usage("--seconds must be above 0".into())),
    };
    let spec = WorkloadSpec {
        groups: r.groups,
        groups_per_batch: r.groups_per_batch,
        entries_per_group: args.entries_per_group,
        sizes,
        writers: r.writers,
        skew: args.group_skew,
        sync: r.sync,
        compact_lag: args.compact_lag,
        purge_interval: (args.purge_interval_ms > 0)
            .then(|| Duration::from_millis(args.purge_interval_ms)),
        force_compact: args.force_compact == OnOff::On,
        stop,
        progress: !args.json,
    };
    spec.validate()?;
    if args.runs == 0 {
        return Err(BenchError::Usage("--runs must be at least 1".into()));
    }
    if !(args.settle_seconds >= 0.0 && args.settle_seconds.is_finite()) {
        return Err(BenchError::Usage(
            "--settle-seconds must be 0 or above".into(),
        ));
    }
    if !(args.probe_seconds >= 0.0 && args.probe_seconds.is_finite()) {
        return Err(BenchError::Usage(
            "--probe-seconds must be 0 or above".into(),
        ));
    }
    let options = EngineOptions {
        compression: args.compression == OnOff::On,
        target_file_bytes: args.target_file_bytes,
        purge_threshold_bytes: args.purge_threshold_bytes,
        recycle_files_max: args.recycle_files_max,
        cached_tail_bytes: args.cached_tail_bytes,
    };
    let echo = WorkloadEcho {
        preset: args.preset.map(|p| format!("{p:?}")),
        groups: spec.groups,
        groups_per_batch: spec.effective_groups_per_batch(),
        entries_per_group: spec.entries_per_group,
        entry_bytes_min: sizes.bounds().0,
        entry_bytes_max: sizes.bounds().1,
        entry_bytes: sizes.to_string(),
        group_skew: spec.skew.to_string(),
        writers: spec.writers,
        sync: spec.sync,
        compact_lag: spec.compact_lag,
        purge_interval_ms: args.purge_interval_ms,
        force_compact: spec.force_compact,
        compression: options.compression,
        stop: match stop {
            Stop::After(d) => format!("{:.1} s", d.as_secs_f64()),
            Stop::PayloadBytes(n) => fmt_bytes(n),
            Stop::Batches(n) => format!("{n} batches"),
        },
    };
    if !args.json {
        if let Some(p) = args.preset {
            println!("preset {p:?}");
        }
        print_intro(&echo);
    }

    // Runs interleave the engines and rotate which goes first.
    let mut per_engine: Vec<Vec<RunRecord>> = vec![Vec::with_capacity(args.runs); engines.len()];
    for run in 1..=args.runs {
        for e in runner::interleaved(run, engines.len()) {
            let kind = engines[e];
            let record = run_once(kind, &spec, &options, &args.dir, &echo, run, args.runs)?;
            std::thread::sleep(Duration::from_secs_f64(args.settle_seconds));
            if args.json {
                print_json(&record);
            } else {
                println!(
                    "{} run {run}/{}: {} writes/s, {} MB/s, p99 {} us, p99.99 {} us",
                    kind.name(),
                    args.runs,
                    fmt_rate(record.writes_per_sec),
                    fmt_rate(record.payload_mb_per_sec),
                    fmt_count(record.latency_us_p99),
                    fmt_count(record.latency_us_p9999)
                );
            }
            per_engine[e].push(record);
        }
    }
    let mut medians: Vec<RunRecord> = per_engine.iter().map(|r| median_record(r)).collect();
    if args.probe_seconds > 0.0 {
        add_disk_limits(&mut medians, &args.dir, args.probe_seconds, args.json)?;
    }
    if args.json {
        // Always a median record (the run itself for one run), so scripts read
        // one kind; it alone carries the disk limit.
        for m in &medians {
            print_json(m);
        }
    } else {
        println!();
        print!("{}", table(&medians, args.runs).render());
    }
    Ok(())
}

fn print_intro(echo: &WorkloadEcho) {
    println!(
        "raftlog workload: {} groups ({}), {} writers, {} groups x {} entries of {} (+ 64 B state) \
         per batch, {}, compact to last {}, purge every {} ms{}, compression {}, {} per run",
        echo.groups,
        echo.group_skew,
        echo.writers,
        echo.groups_per_batch,
        echo.entries_per_group,
        echo.entry_bytes,
        if echo.sync { "sync" } else { "no sync" },
        echo.compact_lag,
        echo.purge_interval_ms,
        if echo.force_compact {
            " (named groups force-compacted)"
        } else {
            ""
        },
        if echo.compression { "on" } else { "off" },
        echo.stop
    );
}

fn run_once(
    kind: EngineKind,
    spec: &WorkloadSpec,
    options: &EngineOptions,
    parent: &std::path::Path,
    echo: &WorkloadEcho,
    run: usize,
    runs: usize,
) -> Result<RunRecord, BenchError> {
    let dir = parent.join(kind.name());
    // Peers create only their own directory, not its parents.
    std::fs::create_dir_all(parent).map_err(|source| BenchError::Io {
        op: "create dir",
        path: parent.to_path_buf(),
        source,
    })?;
    kind.wipe(&dir)?;
    reset_peak_rss();
    let before = ProcSample::now();
    let engine = kind.open(&dir, options)?;
    let outcome = runner::run(engine.as_ref(), spec)?;
    let stats = engine.stats();
    engine.close()?;
    let used = ProcSample::now().since(&before);
    kind.wipe(&dir)?;

    let secs = outcome.duration.as_secs_f64().max(1e-9);
    let payload = outcome.payload_bytes.max(1) as f64;
    let h = &outcome.latency_us;
    Ok(RunRecord {
        kind: "run",
        engine: kind.name(),
        run,
        runs,
        workload: echo.clone(),
        seconds: outcome.duration.as_secs_f64(),
        writes: outcome.batches,
        entries: outcome.entries,
        payload_bytes: outcome.payload_bytes,
        writes_per_sec: outcome.batches as f64 / secs,
        payload_mb_per_sec: outcome.payload_bytes as f64 / MB / secs,
        latency_us_p50: h.value_at_quantile(0.5),
        latency_us_p99: h.value_at_quantile(0.99),
        latency_us_p999: h.value_at_quantile(0.999),
        latency_us_p9999: h.value_at_quantile(0.9999),
        latency_us_max: h.max(),
        fsyncs: stats.fsyncs,
        fsyncs_per_write: stats
            .fsyncs
            .map(|f| f as f64 / outcome.batches.max(1) as f64),
        device_write_bytes: used.write_bytes,
        device_write_amplification: used.write_bytes.map(|b| b as f64 / payload),
        engine_write_amplification: stats.bytes_written.map(|b| b as f64 / payload),
        peak_rss_bytes: peak_rss_bytes(),
        cpu_seconds: used.cpu_seconds,
        purges: outcome.purge.calls,
        purge_ms_p50: outcome.purge.median_time().map(ms),
        purge_ms_max: (outcome.purge.calls > 0).then(|| ms(outcome.purge.max_time)),
        files_purged: outcome.purge.files_purged,
        entries_rewritten: outcome.purge.entries_rewritten,
        groups_force_compacted: outcome.purge.groups_force_compacted,
        device_mb_per_sec: used.write_bytes.map(|b| b as f64 / MB / secs),
        probe_bytes_per_flush: None,
        disk_limit_mb_per_sec: None,
        device_pct_of_disk_limit: None,
        payload_pct_of_disk_limit: None,
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: RaftlogArgs,
    }

    fn resolve(flags: &[&str]) -> Resolved {
        let cli = Cli::try_parse_from(std::iter::once("raftlog").chain(flags.iter().copied()))
            .expect("flags parse");
        cli.args.resolve()
    }

    #[test]
    fn presets_set_their_workloads_and_flags_override_them() {
        let plain = resolve(&[]);
        assert_eq!(
            (
                plain.groups,
                plain.groups_per_batch,
                plain.entry_bytes,
                plain.writers
            ),
            (1000, 16, EntrySizes::Fixed(1024), 4)
        );
        assert!(plain.sync);
        assert_eq!(plain.seconds, 10.0);
        let a = resolve(&["--preset", "A", "--writers", "4"]);
        assert_eq!(
            (a.groups, a.entry_bytes, a.seconds),
            (1000, EntrySizes::Fixed(1024), 30.0)
        );
        // At 64 writers each writer owns 64 groups.
        assert_eq!(resolve(&["--preset", "a", "--writers", "64"]).groups, 4096);
        assert_eq!(resolve(&["--preset", "B", "--writers", "64"]).groups, 4096);
        assert_eq!(resolve(&["--writers", "64"]).groups, 1000);
        assert_eq!(
            resolve(&["--preset", "B"]).entry_bytes,
            EntrySizes::Fixed(16 << 10)
        );
        let c = resolve(&["--preset", "C"]);
        assert_eq!((c.writers, c.groups_per_batch, c.groups), (1, 256, 1000));
        let explicit = resolve(&[
            "--preset",
            "A",
            "--writers",
            "64",
            "--groups",
            "500",
            "--seconds",
            "2",
        ]);
        assert_eq!((explicit.groups, explicit.seconds), (500, 2.0));
    }

    #[test]
    fn scale_flags_parse() {
        let unsynced = resolve(&[
            "--sync",
            "false",
            "--groups-per-batch",
            "16",
            "--entry-bytes",
            "1024",
        ]);
        assert_eq!(
            (
                unsynced.sync,
                unsynced.groups_per_batch,
                unsynced.entry_bytes
            ),
            (false, 16, EntrySizes::Fixed(1024))
        );
        assert!(!resolve(&["--no-sync"]).sync);
        assert!(resolve(&["--sync"]).sync);
        assert!(resolve(&["--sync", "true"]).sync);
        assert!(!resolve(&["--sync", "--no-sync"]).sync);
        assert_eq!(
            resolve(&["--preset", "B", "--entry-bytes", "mixed"]).entry_bytes,
            crate::workload::MIXED
        );
        assert_eq!(
            resolve(&["--entry-bytes-dist", "100:200"]).entry_bytes,
            EntrySizes::Uniform { min: 100, max: 200 }
        );
        let cli =
            Cli::try_parse_from(["raftlog", "--groups", "100000", "--group-skew", "zipf:0.99"])
                .expect("flags parse");
        assert_eq!(cli.args.group_skew, GroupSkew::Zipf(0.99));
        assert_eq!(cli.args.resolve().groups, 100_000);
        assert!(Cli::try_parse_from(["raftlog", "--group-skew", "zipf:-1"]).is_err());
    }

    fn record(
        payload_bytes: u64,
        writes: u64,
        device: Option<u64>,
        fsyncs: Option<u64>,
    ) -> RunRecord {
        let mut r = median_record(&[RunRecord {
            kind: "run",
            engine: "strata",
            run: 1,
            runs: 1,
            workload: WorkloadEcho {
                preset: None,
                groups: 1,
                groups_per_batch: 1,
                entries_per_group: 1,
                entry_bytes_min: 1,
                entry_bytes_max: 1,
                entry_bytes: "1 B".into(),
                group_skew: "round-robin".into(),
                writers: 1,
                sync: true,
                compact_lag: 0,
                purge_interval_ms: 0,
                force_compact: false,
                compression: false,
                stop: String::new(),
            },
            seconds: 2.0,
            writes,
            entries: writes,
            payload_bytes,
            writes_per_sec: writes as f64 / 2.0,
            payload_mb_per_sec: payload_bytes as f64 / MB / 2.0,
            latency_us_p50: 1,
            latency_us_p99: 1,
            latency_us_p999: 1,
            latency_us_p9999: 1,
            latency_us_max: 1,
            fsyncs,
            fsyncs_per_write: None,
            device_write_bytes: device,
            device_write_amplification: None,
            engine_write_amplification: None,
            peak_rss_bytes: None,
            cpu_seconds: None,
            purges: 0,
            purge_ms_p50: None,
            purge_ms_max: None,
            files_purged: 0,
            entries_rewritten: 0,
            groups_force_compacted: 0,
            device_mb_per_sec: device.map(|b| b as f64 / MB / 2.0),
            probe_bytes_per_flush: None,
            disk_limit_mb_per_sec: None,
            device_pct_of_disk_limit: None,
            payload_pct_of_disk_limit: None,
        }]);
        r.set_disk_limit(probe_flush_bytes(&r), 100.0);
        r
    }

    #[test]
    fn probe_flush_is_device_bytes_per_fsync_rounded_to_pages() {
        // 1,000 fsyncs over 18.5 MB: 18,500 B each, rounded to 16 KiB + 4 KiB.
        let r = record(1 << 20, 1000, Some(18_500_000), Some(1000));
        assert_eq!(r.probe_bytes_per_flush, Some(20 << 10));
        assert_eq!(r.kind, "median");
        // 9.25 MB/s of device writes over 2 s against a 100 MB/s disk.
        let pct = r.device_pct_of_disk_limit.unwrap();
        assert!((pct - 9.25).abs() < 1e-9, "{pct}");
        // No fsync count: the payload per write; tiny writes: one page.
        assert_eq!(
            record(64 << 20, 1000, Some(1 << 30), None).probe_bytes_per_flush,
            Some(64 << 10)
        );
        assert_eq!(
            record(100, 10, Some(0), Some(0)).probe_bytes_per_flush,
            Some(4 << 10)
        );
        // No syncs at all: capped.
        assert_eq!(
            record(1 << 30, 1, Some(1 << 30), Some(1)).probe_bytes_per_flush,
            Some(PROBE_MAX_FLUSH)
        );
        assert_eq!(
            record(1 << 30, 1, None, None).device_pct_of_disk_limit,
            None
        );
    }

    #[test]
    fn engines_take_a_comma_separated_list() {
        let cli = Cli::try_parse_from(["raftlog", "--engines", "strata,raft-engine,rocksdb"])
            .expect("flags parse");
        assert_eq!(
            cli.args.engines,
            [
                EngineKind::Strata,
                EngineKind::RaftEngine,
                EngineKind::Rocksdb
            ]
        );
    }
}
