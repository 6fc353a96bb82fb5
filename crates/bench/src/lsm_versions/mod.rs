//! `strata-bench lsm-versions`: what installing a new version costs the
//! read path as the number of SST files grows, on Strata's lsm and, behind
//! feature `peer-rocksdb`, RocksDB (`docs/bench/lsm-vs-peers.md`, "Version
//! installs at many files").
//!
//! Per engine, in one invocation, on one database grown step by step:
//! 1. grow to each `--files` size in turn (`grow.rs`): unlogged random
//!    keys, tiny files and memtables so that the file count climbs fast;
//! 2. at each size, for `--seconds` (`phase.rs`): a writer keeps flushes and
//!    compactions installing versions while `--readers` threads take
//!    snapshots, create iterators (unbounded and bounded to one key) and
//!    read points, each call timed into its own histogram;
//! 3. report each size (`record.rs`): the read-path latencies, the
//!    versions installed, and Strata's own timing of its installs (the
//!    installer lock's critical section, the version build and the manifest
//!    append under it, the manifest sync after it); then the spec's targets
//!    (`verdict.rs`).
//!
//! Engines run one after the other, each on its own fresh directory, which
//! is wiped before and after.

mod args;
mod engine;
mod grow;
mod phase;
mod record;
#[cfg(feature = "peer-rocksdb")]
mod rocksdb;
mod strata;
mod verdict;

use std::time::Duration;

pub use self::args::VersionsArgs;
use self::engine::VersionsEngineKind;
use self::grow::GrowBy;
use self::phase::{Driver, PhaseSpec};
use self::record::{Params, SizeResult, VersionsRecord};
use crate::error::BenchError;
use crate::proc_stats::release_free_heap;
use crate::report::{fmt_count, print_json};
use crate::runner::progress_bar;
use crate::units::fmt_bytes;

/// Runs every engine through every size.
pub fn run(args: &VersionsArgs) -> Result<(), BenchError> {
    args.validate()?;
    VersionsEngineKind::check_built(&args.engines)?;
    let space = args.key_space();
    let settings = args.settings();
    let tuning = args.tuning();
    let params = Params {
        key_bytes: args.key_bytes,
        value_bytes: args.value_bytes,
        readers: args.readers,
        reader_loops_per_sec_limit: args.reader_loops_per_sec,
        writer_keys_per_sec_limit: args.writer_keys_per_sec,
        settings,
        tuning,
        grow_by: args.grow_by,
    };
    if !args.json {
        println!(
            "lsm-versions: sizes {} files; keys {} B, values {} B; memtable {}, file {}, \
             base level {}, cache {}, {} background threads; {} readers {}, \
             writer {} keys/s, \
             {} s per size",
            args.files
                .iter()
                .map(|f| fmt_count(*f))
                .collect::<Vec<_>>()
                .join(", "),
            args.key_bytes,
            args.value_bytes,
            fmt_bytes(settings.write_buffer_bytes),
            fmt_bytes(settings.target_file_bytes),
            fmt_bytes(settings.base_level_bytes),
            fmt_bytes(settings.block_cache_bytes),
            settings.background_threads,
            args.readers,
            if args.reader_loops_per_sec == 0 {
                "unpaced".to_string()
            } else {
                format!("at {} loops/s each", fmt_count(args.reader_loops_per_sec))
            },
            if args.writer_keys_per_sec == 0 {
                "unpaced".to_string()
            } else {
                fmt_count(args.writer_keys_per_sec)
            },
            args.seconds,
        );
    }
    let spec = |driver: Driver, keys: u64| PhaseSpec {
        driver,
        readers: args.readers,
        reader_loops_per_sec: args.reader_loops_per_sec,
        keys,
        order: args.grow_by.key_order(),
    };
    std::fs::create_dir_all(&args.dir).map_err(BenchError::io("create dir", &args.dir))?;
    let mut all: Vec<VersionsRecord> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for &kind in &args.engines {
        let name = kind.name();
        let dir = args.dir.join(name);
        kind.wipe(&dir)?;
        let engine = kind.open(&dir, &settings, &tuning)?;
        let mut written = 0u64;
        for &target in &args.files {
            let files_before = engine.live_files()?;
            let bar = progress_bar(!args.json);
            bar.set_message(format!("{name}: growing to {} files", fmt_count(target)));
            let growth = match args.grow_by {
                GrowBy::Writes => {
                    grow::grow_to(engine.as_ref(), &space, target, &mut written, &bar)?
                }
                GrowBy::Ingest => grow::ingest_to(
                    engine.as_ref(),
                    &space,
                    target,
                    &mut written,
                    &args.dir.join(format!("{name}-external")),
                    args.keys_per_ingested_file(&space),
                    &bar,
                )?,
            };
            bar.finish_and_clear();
            let churn = Driver::Churn {
                duration: Duration::from_secs_f64(args.seconds),
                keys_per_sec: args.writer_keys_per_sec,
            };
            let mut records = vec![measure(
                engine.as_ref(),
                &space,
                &spec(churn, written),
                (name, target, files_before, growth),
                &params,
                args.json,
            )?];
            if args.full_compaction_at.contains(&target) && records[0].error.is_none() {
                let now = engine.live_files()?;
                let unchanged = grow::Growth {
                    files: now,
                    keys: 0,
                    duration: Duration::ZERO,
                };
                records.push(measure(
                    engine.as_ref(),
                    &space,
                    &spec(Driver::FullCompaction, written),
                    (name, target, now, unchanged),
                    &params,
                    args.json,
                )?);
            }
            let error = records.iter().find_map(|r| r.error.clone());
            all.extend(records);
            if let Some(e) = error {
                eprintln!("note: {name}: the larger sizes are skipped after an error");
                failures.push(format!("{name} at {target} files: {e}"));
                break;
            }
        }
        // An engine an error stopped may refuse a clean close; its figures
        // are reported all the same.
        if let Err(e) = engine.close() {
            failures.push(format!("{name}: close: {e}"));
        }
        release_free_heap();
        kind.wipe(&dir)?;
    }
    report(args, &all)?;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(BenchError::Incomplete(failures.join("; ")))
    }
}

/// Runs one phase on `engine` at its current size and makes its record
/// (printing its summary line unless `json`). `at` is the engine's name,
/// the size, the files before the growth and the growth.
fn measure(
    engine: &dyn engine::VersionsEngine,
    space: &crate::lsm::keys::KeySpace,
    spec: &PhaseSpec,
    at: (&'static str, u64, u64, grow::Growth),
    params: &Params,
    json: bool,
) -> Result<VersionsRecord, BenchError> {
    let (name, target, files_before, growth) = at;
    let bar = progress_bar(!json);
    bar.set_message(format!(
        "{name}: {} at {} files",
        spec.driver.name(),
        fmt_count(target)
    ));
    let versions_before = engine.versions_installed()?;
    let timing_before = engine.install_timing();
    let phase = phase::run(engine, space, spec, &bar)?;
    bar.finish_and_clear();
    let install = engine
        .install_timing()
        .zip(timing_before)
        .map(|(now, before)| now.since(&before));
    // Strata's install count is its timing's: one reading for both.
    let versions = match &install {
        Some(t) => t.installs,
        None => engine.versions_installed()?.saturating_sub(versions_before),
    };
    let record = VersionsRecord::new(
        &SizeResult {
            engine: name,
            target_files: target,
            phase_name: spec.driver.name(),
            files_before,
            growth,
            phase: &phase,
            versions,
            install,
        },
        params,
    );
    if json {
        print_json(&record);
    } else {
        println!(
            "{name} at {} files, {}: {:.1} s; snapshot p99.9 {:.1} us, iterator create \
             p99.9 {:.1} us (max {:.0}), get p99.9 {:.1} us; {} versions installed{}",
            fmt_count(record.files_at_start),
            record.phase,
            record.seconds,
            record.snapshot.p999_us,
            record.iter_create.p999_us,
            record
                .iter_create
                .max_us
                .max(record.bounded_iter_create.max_us),
            record.get.p999_us,
            fmt_count(record.versions_installed),
            record
                .error
                .as_ref()
                .map(|e| format!("; stopped early: {e}"))
                .unwrap_or_default(),
        );
    }
    Ok(record)
}

/// Prints the tables (one per size) and the acceptance checks, and writes
/// the JSON file if asked.
fn report(args: &VersionsArgs, all: &[VersionsRecord]) -> Result<(), BenchError> {
    let mut json = Vec::new();
    for r in all {
        json.push(serde_json::to_string(r).map_err(|e| BenchError::Incomplete(e.to_string()))?);
    }
    if !args.json {
        for &target in &args.files {
            for phase in [phase::CHURN, phase::FULL_COMPACTION] {
                let at: Vec<&VersionsRecord> = all
                    .iter()
                    .filter(|r| r.target_files == target && r.phase == phase)
                    .collect();
                if !at.is_empty() {
                    println!();
                    print!("{}", record::table(&at).render());
                }
            }
        }
        println!();
    }
    for &kind in &args.engines {
        let mine: Vec<&VersionsRecord> = all.iter().filter(|r| r.engine == kind.name()).collect();
        for c in verdict::checks(&mine) {
            if args.json {
                print_json(&c);
            } else {
                println!("{}", verdict::line(&c));
            }
            json.push(
                serde_json::to_string(&c).map_err(|e| BenchError::Incomplete(e.to_string()))?,
            );
        }
    }
    if let Some(path) = &args.json_file {
        let mut text = json.join("\n");
        text.push('\n');
        std::fs::write(path, text).map_err(BenchError::io("write", path))?;
    }
    Ok(())
}
