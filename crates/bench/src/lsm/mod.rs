//! `strata-bench lsm`: db_bench-like workloads against Strata's lsm and,
//! behind cargo features, fjall (`peer-fjall`) and RocksDB (`peer-rocksdb`),
//! side by side in one run, every engine opened with the same memtable,
//! file, block, filter, compression, cache and thread settings
//! (`docs/bench/lsm-vs-peers.md`).
//!
//! A run opens each engine on an empty directory and runs the workloads in
//! the order given on that one database, as db_bench runs its
//! `--benchmarks` list. Runs interleave the engines and rotate which goes
//! first, as the raftlog bench does, so that drift of the machine falls on
//! every engine alike.
//!
//! Measured per engine and workload: ops/s and user MB/s, call latency
//! p50/p99/p99.9 (timed by the bench around each engine call), and for the
//! workloads that write, after a flush and a wait for compactions to settle:
//! write amplification (device bytes from `/proc/self/io` over user bytes),
//! space amplification (the directory's bytes over the live keys and
//! values), and write-stall time where the engine reports it; peak RSS and
//! CPU seconds for every workload.

mod engine;
#[cfg(feature = "peer-fjall")]
mod fjall;
mod keys;
mod record;
#[cfg(feature = "peer-rocksdb")]
mod rocksdb;
mod strata;
mod workloads;

use std::path::{Path, PathBuf};

use clap::builder::RangedU64ValueParser;

use self::engine::{dir_bytes, settle, KvEngineKind, KvSettings, WriteFlags};
use self::keys::{KeySpace, LiveKeys, KEY_BYTES_MAX, KEY_BYTES_MIN};
use self::record::{median_record, table, LsmRecord, Params};
use self::workloads::{rates, Plan, Workload};
use crate::error::BenchError;
use crate::proc_stats::{
    drop_page_cache, peak_rss_bytes, release_free_heap, reset_peak_rss, ProcSample,
};
use crate::raftlog::OnOff;
use crate::report::{fmt_count, fmt_rate, print_json};
use crate::runner::interleaved;
use crate::units::{fmt_bytes, parse_bytes};
use crate::workload::EntrySizes;

/// Longest value the bench writes: every engine takes it in one piece.
const VALUE_BYTES_MAX: usize = 64 << 20;
/// Most keys: the live-key table costs 4 bytes a key.
const KEYS_MAX: u64 = 1 << 31;

/// Arguments of `lsm`.
#[derive(Debug, clap::Args)]
pub struct LsmArgs {
    /// Engines to run, in this order, comma-separated (default: every engine
    /// compiled in). fjall and RocksDB need `--features peer-fjall`,
    /// `peer-rocksdb` or `peers`.
    #[arg(long = "engines", alias = "engine", value_enum, value_delimiter = ',')]
    engines: Vec<KvEngineKind>,
    /// Workloads, in this order, on one database per engine and run. A
    /// workload that needs data with no fill before it gets a fillrandom
    /// first.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fillrandom,overwrite,readrandom,readmissing,readrandom-cold,seekrandom,readwhilewriting,deleterandom,scan"
    )]
    workloads: Vec<Workload>,
    /// Keys in the key space [default: 100000].
    #[arg(long, value_parser = RangedU64ValueParser::<u64>::new().range(1..=KEYS_MAX))]
    keys: Option<u64>,
    /// Size the key space to hold this many user bytes instead (keys =
    /// bytes / (key + mean value)), e.g. 2G.
    #[arg(long, value_parser = parse_bytes, conflicts_with = "keys")]
    total_bytes: Option<u64>,
    /// Bytes of each key (8 to 1024).
    #[arg(long, default_value_t = 16,
          value_parser = RangedU64ValueParser::<usize>::new().range(KEY_BYTES_MIN as u64..=KEY_BYTES_MAX as u64))]
    key_bytes: usize,
    /// Bytes of each value: a size (1K), MIN:MAX spread evenly, or
    /// log:MIN:MAX (their logarithm spread evenly).
    #[arg(long, default_value = "1024", value_parser = parse_value_bytes)]
    value_bytes: EntrySizes,
    /// Threads (readwhilewriting: reader threads, plus one writer).
    #[arg(long, default_value_t = 1, value_parser = RangedU64ValueParser::<usize>::new().range(1..=1024))]
    threads: usize,
    /// Operations of overwrite, the reads and the seeks (fills write every
    /// key once) [default: one per key].
    #[arg(long, value_parser = RangedU64ValueParser::<u64>::new().range(1..))]
    ops: Option<u64>,
    /// Longest time one workload runs, in seconds (it stops early).
    #[arg(long)]
    seconds: Option<f64>,
    /// Keys per write batch.
    #[arg(long, default_value_t = 1, value_parser = RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    batch_keys: usize,
    /// Sync the log before each write returns.
    #[arg(long, value_enum, default_value_t = OnOff::Off)]
    sync: OnOff,
    /// Write the log (off: fjall, which always journals, is left out).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    wal: OnOff,
    /// Entries each seek of seekrandom reads.
    #[arg(long, default_value_t = 100, value_parser = RangedU64ValueParser::<u64>::new().range(1..=1_000_000))]
    scan_length: u64,
    /// Share of the keys deleterandom deletes (0 to 1).
    #[arg(long, default_value_t = 0.5)]
    delete_fraction: f64,
    /// Block cache of every engine.
    #[arg(long, default_value = "512M", value_parser = parse_bytes)]
    block_cache: u64,
    /// Memtable size of every engine.
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    write_buffer: u64,
    /// Memtables (active and waiting for flush) before writers wait.
    #[arg(long, default_value_t = 4, value_parser = RangedU64ValueParser::<usize>::new().range(2..=64))]
    max_write_buffers: usize,
    /// Size at which flush and compaction outputs are cut.
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    target_file: u64,
    /// Target size of the level L0 compacts into (fjall: target file x L0
    /// trigger, whatever this says).
    #[arg(long, default_value = "256M", value_parser = parse_bytes)]
    base_level: u64,
    /// L0 files that make L0 due for compaction.
    #[arg(long, default_value_t = 4, value_parser = RangedU64ValueParser::<usize>::new().range(1..=255))]
    level0_trigger: usize,
    /// Uncompressed bytes of a data block (1 KiB to 1 MiB, fjall's range).
    #[arg(long, default_value = "4K", value_parser = parse_bytes)]
    block_size: u64,
    /// Bloom filter bits per key (0: none).
    #[arg(long, default_value_t = 10, value_parser = RangedU64ValueParser::<u32>::new().range(0..=64))]
    bloom_bits: u32,
    /// LZ4 on every level.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    compression: OnOff,
    /// Flush and compaction threads of every engine.
    #[arg(long, default_value_t = 2, value_parser = RangedU64ValueParser::<usize>::new().range(1..=64))]
    background_threads: usize,
    /// Parent directory; each engine gets a subdirectory, wiped before and
    /// after each run.
    #[arg(long, default_value = "./strata-data/lsm")]
    dir: PathBuf,
    /// Runs per engine; the tables give the median.
    #[arg(long, default_value_t = 1, value_parser = RangedU64ValueParser::<usize>::new().range(1..=100))]
    runs: usize,
    /// Print one JSON object per engine, workload and run, then one
    /// `"kind":"median"` each, instead of tables.
    #[arg(long)]
    json: bool,
}

impl LsmArgs {
    fn settings(&self) -> KvSettings {
        KvSettings {
            write_buffer_bytes: self.write_buffer,
            max_write_buffers: self.max_write_buffers,
            target_file_bytes: self.target_file,
            base_level_bytes: self.base_level,
            level0_compaction_trigger: self.level0_trigger,
            block_bytes: self.block_size,
            bloom_bits_per_key: self.bloom_bits,
            lz4: self.compression == OnOff::On,
            block_cache_bytes: self.block_cache,
            background_threads: self.background_threads,
        }
    }

    /// Checks what clap cannot, before anything reaches disk.
    fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Usage(m));
        if !(0.0..=1.0).contains(&self.delete_fraction) {
            return bad("--delete-fraction must be 0 to 1".into());
        }
        if self.seconds.is_some_and(|s| !(s > 0.0 && s.is_finite())) {
            return bad("--seconds must be above 0".into());
        }
        if self.value_bytes.bounds().1 > VALUE_BYTES_MAX {
            return bad(format!(
                "--value-bytes: at most {}",
                fmt_bytes(VALUE_BYTES_MAX as u64)
            ));
        }
        if !(1 << 10..=1 << 20).contains(&self.block_size) {
            return bad("--block-size must be 1K to 1M".into());
        }
        Ok(())
    }

    fn key_space(&self) -> Result<KeySpace, BenchError> {
        let mut space = KeySpace {
            keys: self.keys.unwrap_or(100_000),
            key_bytes: self.key_bytes,
            values: self.value_bytes,
        };
        if let Some(total) = self.total_bytes {
            space.keys = (total as f64 / space.mean_pair_bytes()).round() as u64;
        }
        if space.keys == 0 || space.keys > KEYS_MAX {
            return Err(BenchError::Usage(format!(
                "the key space must hold 1 to {KEYS_MAX} keys, not {}",
                space.keys
            )));
        }
        Ok(space)
    }
}

/// Parses `--value-bytes`: one size, or a range as `--entry-bytes-dist` of
/// the raftlog bench takes it.
fn parse_value_bytes(s: &str) -> Result<EntrySizes, String> {
    if s.contains(':') {
        s.parse()
    } else {
        parse_bytes(s).map(|n| EntrySizes::Fixed(n as usize))
    }
}

/// Puts a fillrandom in front when the first workload is not a fill (every
/// other workload reads, rewrites or deletes what a fill wrote); returns
/// whether it did.
fn with_fill(workloads: &[Workload]) -> (Vec<Workload>, bool) {
    match workloads.first() {
        Some(w) if w.fills() => (workloads.to_vec(), false),
        _ => {
            let mut all = vec![Workload::Fillrandom];
            all.extend_from_slice(workloads);
            (all, true)
        }
    }
}

/// Runs the workloads against each engine `--runs` times.
pub fn run(args: &LsmArgs) -> Result<(), BenchError> {
    args.validate()?;
    let space = args.key_space()?;
    let mut engines = if args.engines.is_empty() {
        KvEngineKind::all()
    } else {
        args.engines.clone()
    };
    KvEngineKind::check_built(&engines)?;
    let wal = args.wal == OnOff::On;
    if !wal {
        for k in engines.iter().filter(|k| !k.can_skip_wal()) {
            eprintln!(
                "note: {} always writes its log; left out of this --wal off run",
                k.name()
            );
        }
        engines.retain(|k| k.can_skip_wal());
        if engines.is_empty() {
            return Err(BenchError::Usage(
                "no engine left to run with --wal off".into(),
            ));
        }
    }
    let (workloads, added_fill) = with_fill(&args.workloads);
    if added_fill {
        eprintln!("note: the workloads need data; a fillrandom runs first");
    }
    let settings = args.settings();
    let plan = Plan {
        space,
        threads: args.threads,
        ops: args.ops,
        max_duration: args.seconds.map(std::time::Duration::from_secs_f64),
        batch_keys: args.batch_keys,
        flags: WriteFlags {
            sync: args.sync == OnOff::On,
            wal,
        },
        scan_length: args.scan_length,
        delete_fraction: args.delete_fraction,
        progress: !args.json,
    };
    let params = Params {
        keys: space.keys,
        key_bytes: space.key_bytes,
        value_bytes: space.values.to_string(),
        threads: args.threads,
        batch_keys: args.batch_keys,
        sync: plan.flags.sync,
        wal,
        scan_length: args.scan_length,
        settings,
    };
    if !args.json {
        println!(
            "lsm workloads: {} keys of {} B, values {}, {} thread(s), batches of {}, sync {}, \
             WAL {}; memtable {}, file {}, block {}, bloom {} bits/key, {}, cache {}, {} \
             background threads",
            fmt_count(space.keys),
            space.key_bytes,
            params.value_bytes,
            args.threads,
            args.batch_keys,
            if plan.flags.sync { "on" } else { "off" },
            if wal { "on" } else { "off" },
            fmt_bytes(settings.write_buffer_bytes),
            fmt_bytes(settings.target_file_bytes),
            fmt_bytes(settings.block_bytes),
            settings.bloom_bits_per_key,
            if settings.lz4 {
                "lz4"
            } else {
                "no compression"
            },
            fmt_bytes(settings.block_cache_bytes),
            settings.background_threads,
        );
    }

    // per_engine[e][w]: the runs of engine e on workload w.
    let mut per_engine: Vec<Vec<Vec<LsmRecord>>> =
        vec![vec![Vec::new(); workloads.len()]; engines.len()];
    for run in 1..=args.runs {
        for e in interleaved(run, engines.len()) {
            let ctx = RunContext {
                kind: engines[e],
                plan: &plan,
                settings: &settings,
                params: &params,
                parent: &args.dir,
                run,
                runs: args.runs,
            };
            for (w, record) in run_engine(&ctx, &workloads)? {
                if args.json {
                    print_json(&record);
                } else {
                    println!(
                        "{} run {run}/{}: {:<16} {:>10} ops/s {:>8} MB/s{}{}",
                        record.engine,
                        args.runs,
                        record.workload,
                        fmt_rate(record.ops_per_sec),
                        fmt_rate(record.mb_per_sec),
                        record
                            .latency_us_p99
                            .map(|v| format!("  p99 {} us", fmt_count(v)))
                            .unwrap_or_default(),
                        record
                            .write_amplification
                            .map(|v| format!(", write amp {v:.2}"))
                            .unwrap_or_default(),
                    );
                }
                per_engine[e][w].push(record);
            }
        }
    }
    for (w, workload) in workloads.iter().enumerate() {
        let medians: Vec<LsmRecord> = per_engine
            .iter()
            .filter(|runs| !runs[w].is_empty())
            .map(|runs| median_record(&runs[w]))
            .collect();
        if medians.is_empty() {
            continue;
        }
        if args.json {
            medians.iter().for_each(print_json);
        } else {
            println!();
            let refs: Vec<&LsmRecord> = medians.iter().collect();
            print!("{}", table(&refs, args.runs).render());
            if let Some(note) = medians.iter().find_map(|m| m.note.as_ref()) {
                println!("note ({}): {note}", workload.name());
            }
        }
    }
    Ok(())
}

/// What one engine's run needs to know.
struct RunContext<'a> {
    kind: KvEngineKind,
    plan: &'a Plan,
    settings: &'a KvSettings,
    params: &'a Params,
    parent: &'a Path,
    run: usize,
    runs: usize,
}

/// Runs every workload on one fresh database of `ctx.kind`; returns each
/// workload's index and record (a cold read that cannot drop the page
/// cache is skipped, with a note on stderr).
fn run_engine(
    ctx: &RunContext,
    workloads: &[Workload],
) -> Result<Vec<(usize, LsmRecord)>, BenchError> {
    let name = ctx.kind.name();
    let dir = ctx.parent.join(name);
    std::fs::create_dir_all(ctx.parent).map_err(BenchError::io("create dir", ctx.parent))?;
    ctx.kind.wipe(&dir)?;
    let space = ctx.plan.space;
    let live = LiveKeys::new(space.keys, space.key_bytes);
    let mut engine = ctx.kind.open(&dir, ctx.settings)?;
    let mut out = Vec::with_capacity(workloads.len());
    for (w_index, &w) in workloads.iter().enumerate() {
        if w == Workload::ReadrandomCold {
            // Close first, so that the engine's own cache goes too and its
            // dirty pages reach the device before the cache is dropped.
            engine.close()?;
            release_free_heap();
            let dropped = drop_page_cache();
            engine = ctx.kind.open(&dir, ctx.settings)?;
            if let Err(e) = dropped {
                eprintln!(
                    "note: {name}: readrandom-cold skipped: the page cache could not be \
                     dropped ({e}; needs root)"
                );
                continue;
            }
        }
        reset_peak_rss();
        let stall_before = engine.stall_micros();
        let before = ProcSample::now();
        let m = workloads::run(w, engine.as_ref(), ctx.plan, &live)?;
        let settle_time = if w.writes() {
            Some(settle(engine.as_ref(), name)?)
        } else {
            None
        };
        let used = ProcSample::now().since(&before);
        let stall = engine
            .stall_micros()
            .zip(stall_before)
            .map(|(a, b)| a.saturating_sub(b) as f64 / 1e3);
        let (ops_per_sec, mb_per_sec) = rates(&m);
        let written = match w {
            Workload::Readwhilewriting => Some(m.background_bytes),
            _ if w.writes() => Some(m.user_bytes),
            _ => None,
        };
        let disk = if w.writes() {
            Some(dir_bytes(&dir).map_err(BenchError::io("measure", &dir))?)
        } else {
            None
        };
        let live_bytes = live.bytes();
        let latency =
            |q: f64| (!m.latency_us.is_empty()).then(|| m.latency_us.value_at_quantile(q));
        let reads = matches!(
            w,
            Workload::Readrandom
                | Workload::ReadrandomCold
                | Workload::Readmissing
                | Workload::Readwhilewriting
        );
        let secs = m.duration.as_secs_f64().max(1e-9);
        out.push((
            w_index,
            LsmRecord {
                kind: "run",
                engine: name,
                workload: w.name(),
                run: ctx.run,
                runs: ctx.runs,
                params: ctx.params.clone(),
                ops: m.ops,
                seconds: m.duration.as_secs_f64(),
                ops_per_sec,
                mb_per_sec,
                latency_us_p50: latency(0.5),
                latency_us_p99: latency(0.99),
                latency_us_p999: latency(0.999),
                hit_ratio: reads.then(|| m.found as f64 / m.ops.max(1) as f64),
                entries_per_seek: (w == Workload::Seekrandom)
                    .then(|| m.found as f64 / m.ops.max(1) as f64),
                background_writes_per_sec: (w == Workload::Readwhilewriting)
                    .then(|| m.background_writes as f64 / secs),
                device_write_bytes: used.write_bytes,
                user_bytes_written: written,
                write_amplification: written
                    .filter(|&u| u > 0)
                    .zip(used.write_bytes)
                    .map(|(u, d)| d as f64 / u as f64),
                settle_seconds: settle_time.map(|d| d.as_secs_f64()),
                disk_bytes: disk,
                live_user_bytes: w.writes().then_some(live_bytes),
                space_amplification: disk
                    .filter(|_| live_bytes > 0)
                    .map(|d| d as f64 / live_bytes as f64),
                stall_ms: stall,
                peak_rss_bytes: peak_rss_bytes(),
                cpu_seconds: used.cpu_seconds,
                note: None,
            },
        ));
    }
    engine.close()?;
    release_free_heap();
    ctx.kind.wipe(&dir)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: LsmArgs,
    }

    fn parse(flags: &[&str]) -> Result<LsmArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("lsm").chain(flags.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn bad_flags_are_refused_by_the_parser() {
        assert!(parse(&["--key-bytes", "4"]).is_err());
        assert!(parse(&["--threads", "0"]).is_err());
        assert!(parse(&["--runs", "0"]).is_err());
        assert!(parse(&["--workloads", "readsomething"]).is_err());
        assert!(parse(&["--keys", "10", "--total-bytes", "1G"]).is_err());
        assert!(parse(&["--value-bytes", "x"]).is_err());
        let args = parse(&["--delete-fraction", "2"]).expect("parses");
        assert!(matches!(args.validate(), Err(BenchError::Usage(_))));
    }

    #[test]
    fn total_bytes_sizes_the_key_space() {
        let args = parse(&[
            "--total-bytes",
            "2G",
            "--key-bytes",
            "16",
            "--value-bytes",
            "1K",
        ])
        .expect("parses");
        let space = args.key_space().expect("valid");
        assert_eq!(space.keys, (2u64 << 30) / (16 + 1024));
    }

    #[test]
    fn a_fill_goes_first_when_the_workloads_need_data() {
        let (w, added) = with_fill(&[Workload::Readrandom, Workload::Fillseq]);
        assert!(added);
        assert_eq!(w[0], Workload::Fillrandom);
        let (w, added) = with_fill(&[Workload::Fillseq, Workload::Readrandom]);
        assert!(!added);
        assert_eq!(w.len(), 2);
    }
}
