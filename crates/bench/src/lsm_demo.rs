//! The lsm half of the demo: load a key space, overwrite part of it, read
//! and scan it back against the expected values, delete a range, close,
//! reopen (timing recovery) and verify every key; then print a summary.
//!
//! The expected state is a version number per key: key `i` at version `v`
//! has a value derived from `(i, v)`, so verification needs no copy of the
//! data.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use strata_lsm::{ColumnFamily, Db, Options, ReadOptions, WriteBatch, WriteOptions};

use crate::error::BenchError;
use crate::report::{fmt_count, fmt_duration, fmt_rate, Table};
use crate::units::fmt_bytes;

/// Arguments of the lsm demo.
#[derive(Debug, Clone, clap::Args)]
pub struct LsmDemoArgs {
    /// Directory of the lsm engine; an old demo there is wiped first.
    #[arg(long, default_value = "./strata-data/demo-lsm")]
    pub lsm_dir: PathBuf,
    /// Keys loaded.
    #[arg(long, default_value_t = 200_000)]
    pub lsm_keys: u64,
    /// Writer threads.
    #[arg(long, default_value_t = 2)]
    pub lsm_writers: u64,
}

/// Keys per write batch.
const BATCH_KEYS: u64 = 64;

fn key(i: u64) -> Vec<u8> {
    format!(
        "user{:012}",
        i.wrapping_mul(0x9E37_79B9) % 1_000_000_000_000
    )
    .into_bytes()
}

fn value(i: u64, version: u8) -> Vec<u8> {
    let len = 100 + (i.wrapping_mul(31) % 300) as usize;
    let mut x = i.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ u64::from(version) ^ 0x5851_F42D;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b'a' + (x % 26) as u8
        })
        .collect()
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let b = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(
        "[{elapsed_precise}] [{bar:40.cyan/blue}] {percent:>3}%  {msg}",
    ) {
        b.set_style(style.progress_chars("=> "));
    }
    b.set_message(what.to_string());
    b
}

fn engine_error(e: strata_lsm::Error) -> BenchError {
    BenchError::Verify(format!("lsm: {e}"))
}

/// Writes `(i, version)` for every `i` in `indexes`, from `writers` threads.
fn write_phase(
    db: &Db,
    cf: &ColumnFamily,
    indexes: &[u64],
    versions: &[u8],
    writers: u64,
    what: &str,
) -> Result<Duration, BenchError> {
    let progress = bar(indexes.len() as u64, what);
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let chunks: Vec<&[u64]> = indexes
        .chunks(indexes.len().div_ceil(writers.max(1) as usize).max(1))
        .collect();
    let result: Result<Result<(), strata_lsm::Error>, BenchError> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let done = done.clone();
                let progress = progress.clone();
                s.spawn(move || -> Result<(), strata_lsm::Error> {
                    for batch in chunk.chunks(BATCH_KEYS as usize) {
                        let mut b = WriteBatch::new();
                        for &i in batch {
                            b.put(cf.id(), &key(i), &value(i, versions[i as usize]));
                        }
                        db.write(&WriteOptions::default(), &b)?;
                        let n = done.fetch_add(batch.len() as u64, Ordering::Relaxed);
                        progress.set_position(n + batch.len() as u64);
                    }
                    Ok(())
                })
            })
            .collect();
        let mut outcome = Ok(Ok(()));
        for h in handles {
            let joined = h
                .join()
                .map_err(|_| BenchError::Panic("an lsm demo writer thread panicked".into()));
            if outcome.as_ref().is_ok_and(|r| r.is_ok()) {
                outcome = joined;
            }
        }
        outcome
    });
    progress.finish_and_clear();
    result?.map_err(engine_error)?;
    Ok(start.elapsed())
}

/// Reads every key back and compares it with `versions` (0: absent).
fn verify_all(db: &Db, cf: &ColumnFamily, versions: &[u8]) -> Result<Duration, BenchError> {
    let progress = bar(versions.len() as u64, "verifying every key");
    let start = Instant::now();
    let read = ReadOptions::default();
    for (i, &v) in versions.iter().enumerate() {
        let i = i as u64;
        let got = db.get(&read, cf, &key(i)).map_err(engine_error)?;
        let want = (v > 0).then(|| value(i, v));
        if got != want {
            return Err(BenchError::Verify(format!(
                "lsm key {i}: expected version {v}, found {}",
                if got.is_some() {
                    "another value"
                } else {
                    "nothing"
                }
            )));
        }
        if i.is_multiple_of(4096) {
            progress.set_position(i);
        }
    }
    progress.finish_and_clear();
    Ok(start.elapsed())
}

/// Scans the whole family in key order and checks count and order.
fn scan_all(db: &Db, cf: &ColumnFamily, live: u64) -> Result<Duration, BenchError> {
    let start = Instant::now();
    let mut it = db.iter(&ReadOptions::default(), cf).map_err(engine_error)?;
    it.seek_to_first().map_err(engine_error)?;
    let mut n = 0u64;
    let mut last: Vec<u8> = Vec::new();
    while it.valid() {
        if n > 0 && it.key() <= last.as_slice() {
            return Err(BenchError::Verify("lsm scan: keys out of order".into()));
        }
        last.clear();
        last.extend_from_slice(it.key());
        n += 1;
        it.next().map_err(engine_error)?;
    }
    if n != live {
        return Err(BenchError::Verify(format!(
            "lsm scan: {n} keys, expected {live}"
        )));
    }
    Ok(start.elapsed())
}

/// Runs the lsm demo.
pub fn run(args: &LsmDemoArgs) -> Result<(), BenchError> {
    let n = args.lsm_keys.max(1);
    if args.lsm_dir.exists() {
        // Only a directory of the engine's own files is wiped.
        let entries = std::fs::read_dir(&args.lsm_dir)
            .map_err(|e| BenchError::Usage(format!("reading {}: {e}", args.lsm_dir.display())))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            let ours = name == "CURRENT"
                || name == "LOCK"
                || name.starts_with("MANIFEST-")
                || name.ends_with(".sst")
                || name.ends_with(".wal")
                || name.ends_with(".tmp");
            if !ours {
                return Err(BenchError::Usage(format!(
                    "{} holds {name}, which the lsm engine did not write: not wiping it",
                    args.lsm_dir.display()
                )));
            }
        }
        std::fs::remove_dir_all(&args.lsm_dir)
            .map_err(|e| BenchError::Usage(format!("wiping {}: {e}", args.lsm_dir.display())))?;
    }
    let mut options = Options::default();
    // Small memtables and files, so a short demo flushes and compacts.
    options.default_column_family.write_buffer_bytes = 4 << 20;
    options.default_column_family.compaction.target_file_bytes = 4 << 20;
    println!("Strata demo: an LSM workload on the lsm engine");
    println!("  dir        {} (fresh)", args.lsm_dir.display());
    println!(
        "  keys       {} of 12 B, values of 100-400 B, {} writers, batches of {BATCH_KEYS}",
        fmt_count(n),
        args.lsm_writers
    );
    println!();
    let db = Db::open(&args.lsm_dir, options.clone()).map_err(engine_error)?;
    let cf = db.default_column_family();
    let mut versions = vec![1u8; n as usize];
    let all: Vec<u64> = (0..n).collect();
    let load = write_phase(&db, &cf, &all, &versions, args.lsm_writers, "load")?;
    // Overwrite every third key.
    let over: Vec<u64> = (0..n).filter(|i| i % 3 == 0).collect();
    for &i in &over {
        versions[i as usize] = 2;
    }
    let overwrite = write_phase(&db, &cf, &over, &versions, args.lsm_writers, "overwrite")?;
    // Delete one key in sixteen, one by one.
    let start = Instant::now();
    let mut deleted = 0u64;
    for i in (0..n).filter(|i| i % 16 == 7) {
        db.delete(&WriteOptions::default(), &cf, &key(i))
            .map_err(engine_error)?;
        versions[i as usize] = 0;
        deleted += 1;
    }
    let delete = start.elapsed();
    let live = versions.iter().filter(|&&v| v > 0).count() as u64;
    let read = verify_all(&db, &cf, &versions)?;
    let scan = scan_all(&db, &cf, live)?;
    let stats = db.statistics();
    let levels = db
        .property(&cf, "strata.levels")
        .map_err(engine_error)?
        .unwrap_or_default();
    let t = Instant::now();
    db.close().map_err(engine_error)?;
    let close = t.elapsed();
    let t = Instant::now();
    let db = Db::open(&args.lsm_dir, options).map_err(engine_error)?;
    let reopen = t.elapsed();
    let cf = db.default_column_family();
    let verify = verify_all(&db, &cf, &versions)?;
    scan_all(&db, &cf, live)?;
    db.close().map_err(engine_error)?;

    let rate = |ops: u64, d: Duration| fmt_rate(ops as f64 / d.as_secs_f64().max(1e-9));
    let mut table = Table::new(["lsm summary", "value"]);
    table.row([
        "load".to_string(),
        format!("{} keys/s ({})", rate(n, load), fmt_duration(load)),
    ]);
    table.row([
        "overwrite".to_string(),
        format!(
            "{} keys/s ({} keys)",
            rate(over.len() as u64, overwrite),
            fmt_count(over.len() as u64)
        ),
    ]);
    table.row([
        "delete".to_string(),
        format!(
            "{} keys/s ({} keys)",
            rate(deleted, delete),
            fmt_count(deleted)
        ),
    ]);
    table.row([
        "point reads".to_string(),
        format!("{} reads/s", rate(n, read)),
    ]);
    table.row([
        "full scan".to_string(),
        format!("{} keys/s ({} keys)", rate(live, scan), fmt_count(live)),
    ]);
    table.row([
        "flushes / compactions".to_string(),
        format!("{} / {}", stats.flushes, stats.compactions),
    ]);
    table.row([
        "compaction read / written".to_string(),
        format!(
            "{} / {}",
            fmt_bytes(stats.compaction_bytes_read),
            fmt_bytes(stats.compaction_bytes_written)
        ),
    ]);
    table.row([
        "write stalls / slowdowns".to_string(),
        format!(
            "{} ({}) / {} ({})",
            stats.stalls,
            fmt_duration(Duration::from_micros(stats.stall_micros)),
            stats.slowdowns,
            fmt_duration(Duration::from_micros(stats.slowdown_micros))
        ),
    ]);
    table.row(["close".to_string(), fmt_duration(close)]);
    table.row(["reopen (recovery)".to_string(), fmt_duration(reopen)]);
    table.row([
        "verified after reopen".to_string(),
        format!("{} keys OK in {}", fmt_count(n), fmt_duration(verify)),
    ]);
    print!("{}", table.render());
    println!("\nfiles per level before close:\n{levels}");
    Ok(())
}
