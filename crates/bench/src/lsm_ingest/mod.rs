//! `strata-bench lsm-ingest`: shows that ingesting external SST files does
//! not stall writers of other key ranges, on Strata's lsm and, behind
//! `peer-rocksdb`, on RocksDB, in one invocation (`docs/bench/lsm-ingest.md`
//! says why each setting is what it is).
//!
//! Per engine and run, on a fresh database in `--dir/<engine>`:
//! 1. Preload the writers' ranges (`--preload`), untimed.
//! 2. Write two external files beside the database and ingest them alone,
//!    timed: a warm-up, and the pace that sizes the ingesting phase.
//! 3. Prepare that phase's files (`files.rs`), untimed, each in a key range
//!    of its own, disjoint from the writers' (`keys.rs`).
//! 4. Flush and wait for compactions to settle; phase "baseline":
//!    `--writers` threads put random keys of their own ranges for
//!    `--seconds`, every put timed.
//! 5. Settle again; phase "ingesting": the same writers, the same time,
//!    while one more thread ingests the files one per call, moving them.
//!
//! Runs interleave the engines and rotate which goes first, as the other
//! subcommands do. Reported per engine and phase (`record.rs`): writes/s,
//! put latency p50 to max, the engine's stall time, ingestions and MB/s
//! ingested, ingestion call latency, Strata's seqno hold per ingestion
//! (`IngestReport::seqno_hold`), and the ratios ingesting / baseline of
//! put p99 and p99.99.

mod args;
mod engine;
mod files;
mod keys;
mod phase;
mod record;
#[cfg(feature = "peer-rocksdb")]
mod rocksdb;
mod strata;

use std::path::Path;
use std::time::{Duration, Instant};

pub use self::args::LsmIngestArgs;
use self::engine::IngestEngine;
use self::files::{files_needed, ExternalDir};
use self::phase::Writers;
use self::record::{header, median_record, run_line, table, verdict, IngestRecord, Params};
use crate::error::BenchError;
use crate::lsm::engine::{settle, KvEngineKind, KvSettings, WriteFlags};
use crate::raftlog::OnOff;
use crate::report::{fmt_rate, print_json};
use crate::runner::interleaved;
use crate::units::{fmt_bytes, MB};

/// Warm-up ingestions before the baseline.
const WARMUP_FILES: u64 = 2;
/// Seeds of the phases' key choices: the same for every engine.
const BASELINE_SEED: u64 = 1;
const INGESTING_SEED: u64 = 2;

/// Runs both phases against each engine `--runs` times.
pub fn run(args: &LsmIngestArgs) -> Result<(), BenchError> {
    args.validate()?;
    let engines = args.engines();
    engine::check_kinds(&engines)?;
    if engines.is_empty() {
        return Err(BenchError::Usage("no engine to run".into()));
    }
    let params = args.params();
    let settings = args.settings();
    if !args.json {
        let names: Vec<&str> = engines.iter().map(|k| k.name()).collect();
        println!("{}", header(&params, &names.join(",")));
    }
    // per_engine[e]: (baseline, ingesting) of each run.
    let mut per_engine: Vec<Vec<(IngestRecord, IngestRecord)>> = vec![Vec::new(); engines.len()];
    for run in 1..=args.runs {
        for e in interleaved(run, engines.len()) {
            let ctx = RunContext {
                kind: engines[e],
                args,
                settings: &settings,
                params: &params,
                run,
            };
            let (b, i) = run_engine(&ctx)?;
            for r in [&b, &i] {
                if args.json {
                    print_json(r);
                } else {
                    println!("{}", run_line(r));
                }
            }
            per_engine[e].push((b, i));
        }
    }
    let medians: Vec<(IngestRecord, IngestRecord)> = per_engine
        .iter()
        .map(|runs| {
            let b = median_record(&runs.iter().map(|r| r.0.clone()).collect::<Vec<_>>());
            let mut i = median_record(&runs.iter().map(|r| r.1.clone()).collect::<Vec<_>>());
            i.set_ratios(&b);
            (b, i)
        })
        .collect();
    if args.json {
        for (b, i) in &medians {
            print_json(b);
            print_json(i);
        }
    } else {
        println!();
        let pairs: Vec<(&IngestRecord, &IngestRecord)> =
            medians.iter().map(|(b, i)| (b, i)).collect();
        print!("{}", table(&pairs, args.runs).render());
        for (_, i) in &medians {
            println!("{}", verdict(i));
        }
    }
    Ok(())
}

/// What one engine's run needs to know.
struct RunContext<'a> {
    kind: KvEngineKind,
    args: &'a LsmIngestArgs,
    settings: &'a KvSettings,
    params: &'a Params,
    run: usize,
}

/// One run of one engine on a fresh database: the preload, the warm-up,
/// the files, the two phases; returns the baseline's and the ingesting
/// phase's records.
fn run_engine(ctx: &RunContext) -> Result<(IngestRecord, IngestRecord), BenchError> {
    let args = ctx.args;
    let name = ctx.kind.name();
    let parent = &args.dir;
    std::fs::create_dir_all(parent).map_err(BenchError::io("create dir", parent))?;
    let dir = parent.join(name);
    ctx.kind.wipe(&dir)?;
    let mut external = ExternalDir::new(&external_dir(parent, name), args.ingest_file_bytes)?;
    let engine = engine::open(ctx.kind, &dir, ctx.settings)?;
    let writers = Writers {
        threads: args.writers,
        keys_per_writer: ctx.params.keys_per_writer,
        flags: WriteFlags {
            sync: args.sync == OnOff::On,
            wal: true,
        },
    };
    let note = |m: String| {
        if !args.json {
            eprintln!("{name} run {}: {m}", ctx.run);
        }
    };
    let began = Instant::now();
    phase::preload(engine.as_ref(), &writers)?;
    note(format!(
        "preloaded {} in {:.1} s",
        fmt_bytes(ctx.params.preload_bytes),
        began.elapsed().as_secs_f64()
    ));
    let warmup = warm_up(engine.as_ref(), &mut external)?;
    let duration = Duration::from_secs_f64(args.seconds);
    let count = files_needed(
        args.ingest_files,
        duration,
        warmup,
        args.ingest_bytes_max,
        args.ingest_file_bytes,
    );
    let began = Instant::now();
    let files = external.prepare(engine.as_ref(), count)?;
    note(format!(
        "warm-up ingestion {:.1} ms; prepared {count} files ({} of SST) in {:.1} s",
        warmup.as_secs_f64() * 1e3,
        fmt_bytes(files.iter().map(|f| f.file_bytes).sum()),
        began.elapsed().as_secs_f64()
    ));
    let progress = !args.json;
    let stall = || engine.kv().stall_micros();
    let stall_ms = |before: Option<u64>, after: Option<u64>| {
        after
            .zip(before)
            .map(|(a, b)| a.saturating_sub(b) as f64 / 1e3)
    };

    settle(engine.kv(), name)?;
    let s0 = stall();
    let base = phase::run(
        "baseline",
        BASELINE_SEED,
        engine.as_ref(),
        &writers,
        duration,
        &[],
        progress,
    )?;
    let s1 = stall();
    settle(engine.kv(), name)?;
    let s2 = stall();
    let ing = phase::run(
        "ingesting",
        INGESTING_SEED,
        engine.as_ref(),
        &writers,
        duration,
        &files,
        progress,
    )?;
    let s3 = stall();
    if ing.files_left > 0 {
        note(format!(
            "{} of {count} files were not ingested before the phase ended ({} MB/s ingested)",
            ing.files_left,
            fmt_rate(ing.ingested_user_bytes as f64 / MB / ing.duration.as_secs_f64().max(1e-9))
        ));
    }
    engine.close()?;
    external.remove()?;
    ctx.kind.wipe(&dir)?;

    let runs = args.runs;
    let b = IngestRecord::of(
        name,
        "baseline",
        ctx.run,
        runs,
        ctx.params,
        &base,
        stall_ms(s0, s1),
        None,
    );
    let mut i = IngestRecord::of(
        name,
        "ingesting",
        ctx.run,
        runs,
        ctx.params,
        &ing,
        stall_ms(s2, s3),
        Some(count),
    );
    i.set_ratios(&b);
    Ok((b, i))
}

/// Prepares and ingests [`WARMUP_FILES`] files, alone; returns the
/// fastest call.
fn warm_up(engine: &dyn IngestEngine, external: &mut ExternalDir) -> Result<Duration, BenchError> {
    let files = external.prepare(engine, WARMUP_FILES)?;
    let mut fastest = Duration::MAX;
    for f in &files {
        let began = Instant::now();
        engine.ingest(&f.path)?;
        fastest = fastest.min(began.elapsed());
    }
    Ok(fastest)
}

/// The directory of an engine's external files, beside its database (the
/// same file system, so `move_files` links).
fn external_dir(parent: &Path, name: &str) -> std::path::PathBuf {
    parent.join(format!("{name}-external"))
}
