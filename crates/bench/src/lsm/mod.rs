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

mod args;
pub(crate) mod engine;
#[cfg(feature = "peer-fjall")]
mod fjall;
pub(crate) mod keys;
mod record;
#[cfg(feature = "peer-rocksdb")]
pub(crate) mod rocksdb;
pub(crate) mod strata;
mod workloads;

use std::path::Path;

use self::args::with_fill;
pub use self::args::LsmArgs;
use self::engine::{dir_bytes_by_kind, settle, KvEngineKind, KvSettings, WriteFlags};
use self::keys::LiveKeys;
use self::record::{median_record, table, LsmRecord, Params};
use self::workloads::{rates, Plan, Workload};
use crate::error::BenchError;
use crate::proc_stats::{
    drop_page_cache, peak_rss_bytes, release_free_heap, reset_peak_rss, ProcSample,
};
use crate::raftlog::OnOff;
use crate::report::{fmt_count, fmt_rate, print_json};
use crate::runner::interleaved;
use crate::units::fmt_bytes;

/// Runs the workloads against each engine `--runs` times.
pub fn run(args: &LsmArgs) -> Result<(), BenchError> {
    args.validate()?;
    strata::print_events(args.print_levels);
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
        seeks: args.seeks,
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
                keep: args.keep,
                print_levels: args.print_levels,
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
    /// Leave the directory after the last run (`--keep`).
    keep: bool,
    /// `--print-levels`.
    print_levels: bool,
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
        if w.cold() {
            // Close first, so that the engine's own cache goes too and its
            // dirty pages reach the device before the cache is dropped.
            engine.close()?;
            release_free_heap();
            let dropped = drop_page_cache();
            engine = ctx.kind.open(&dir, ctx.settings)?;
            if let Err(e) = dropped {
                eprintln!(
                    "note: {name}: {} skipped: the page cache could not be \
                     dropped ({e}; needs root)",
                    w.name()
                );
                continue;
            }
        }
        reset_peak_rss();
        let stall_before = engine.stall_micros();
        let levels_before = engine.compaction_bytes_by_level();
        let before = ProcSample::now();
        let m = workloads::run(w, engine.as_ref(), ctx.plan, &live)?;
        let settle_time = if w.writes() {
            Some(settle(engine.as_ref(), name)?)
        } else {
            None
        };
        let used = ProcSample::now().since(&before);
        if ctx.print_levels {
            if let Some(r) = engine.level_report() {
                eprintln!("levels: {name} after {}:\n{r}", w.name());
            }
        }
        let stall = engine
            .stall_micros()
            .zip(stall_before)
            .map(|(a, b)| a.saturating_sub(b) as f64 / 1e3);
        let by_level = engine
            .compaction_bytes_by_level()
            .zip(levels_before)
            .filter(|_| w.writes())
            .map(|(after, before)| {
                let at = |v: &[u64], l: usize| v.get(l).copied().unwrap_or(0);
                (0..after.len())
                    .map(|l| at(&after, l).saturating_sub(at(&before, l)))
                    .collect::<Vec<u64>>()
            });
        let (ops_per_sec, mb_per_sec) = rates(&m);
        let written = match w {
            Workload::Readwhilewriting => Some(m.background_bytes),
            _ if w.writes() => Some(m.user_bytes),
            _ => None,
        };
        let by_kind = if w.writes() {
            Some(dir_bytes_by_kind(&dir).map_err(BenchError::io("measure", &dir))?)
        } else {
            None
        };
        let disk = by_kind.as_ref().map(|k| k.values().sum::<u64>());
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
                latency_us_max: latency(1.0),
                hit_ratio: reads.then(|| m.found as f64 / m.ops.max(1) as f64),
                entries_per_seek: matches!(
                    w,
                    Workload::Seekrandom | Workload::Seekrange | Workload::SeekrangeCold
                )
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
                disk_bytes_by_kind: by_kind,
                live_user_bytes: w.writes().then_some(live_bytes),
                space_amplification: disk
                    .filter(|_| live_bytes > 0)
                    .map(|d| d as f64 / live_bytes as f64),
                stall_ms: stall,
                peak_rss_bytes: peak_rss_bytes(),
                cpu_seconds: used.cpu_seconds,
                compaction_bytes_by_level: by_level,
                note: None,
            },
        ));
    }
    engine.close()?;
    release_free_heap();
    if !(ctx.keep && ctx.run == ctx.runs) {
        ctx.kind.wipe(&dir)?;
    }
    Ok(out)
}
