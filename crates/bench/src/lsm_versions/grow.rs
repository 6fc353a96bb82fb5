//! Growing a database to a number of live SST files, until the engine's own
//! count of live files reaches the target, in one of two ways:
//!
//! - [`GrowBy::Writes`]: batches of keys in the scattered fill order of the
//!   key space, unlogged and unsynced. Keys are written in the fill order of
//!   `lsm/keys.rs` (a bijection of the key space), so the first `n` keys
//!   written are spread over the whole space and every file of every level
//!   covers a slice of it. Flushes and compactions make the files, so the
//!   growth slows as levels are added (about 40 s per 1k files past 1k on
//!   the 2-core VM: hours to 100k).
//! - [`GrowBy::Ingest`]: a bulk load. Keys `n..` in ascending order, cut
//!   into files of `keys_per_file` keys, each written as an external SST
//!   file by the engine's own writer and ingested [`INGEST_FILES`] at a
//!   time; every file lies beyond the keys already written, so each engine
//!   puts it in its bottom level and no compaction runs. Minutes to 100k.
//!
//! Either way the measured phase then picks among the `n` keys written only
//! (in the same order, [`KeyOrder`]), so its gets hit and its writer
//! overwrites rather than adds (the file count stays near the target).

use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use super::engine::VersionsEngine;
use crate::error::BenchError;
use crate::lsm::keys::KeySpace;
use crate::report::fmt_count;
use crate::runner::PLAIN_PROGRESS_EVERY;

/// Keys per write batch of the growth.
const BATCH_KEYS: u64 = 64;
/// Keys written between two looks at the file count.
const LOOK_EVERY_KEYS: u64 = 1024;
/// External files per ingestion call.
pub const INGEST_FILES: u64 = 64;

/// How the database grows to each size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GrowBy {
    /// Random writes: flushes and compactions make the files.
    Writes,
    /// A bulk load of external files into the bottom level.
    Ingest,
}

impl GrowBy {
    /// The order in which this growth writes the keys of the space.
    pub fn key_order(self) -> KeyOrder {
        match self {
            GrowBy::Writes => KeyOrder::Scattered,
            GrowBy::Ingest => KeyOrder::Ascending,
        }
    }
}

/// Which keys the first `n` written are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOrder {
    /// Keys `fill_order(0..n)`: spread over the whole space.
    Scattered,
    /// Keys `0..n`.
    Ascending,
}

impl KeyOrder {
    /// The index in the key space of the `n`-th key written.
    pub fn nth(self, space: &KeySpace, n: u64) -> u64 {
        match self {
            KeyOrder::Scattered => space.fill_order(n % space.keys),
            KeyOrder::Ascending => n % space.keys,
        }
    }
}

/// What one growth step did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Growth {
    /// Live files when the target was reached.
    pub files: u64,
    /// Keys written by this step.
    pub keys: u64,
    /// Time this step took.
    pub duration: Duration,
}

/// Writes keys `written..` of the fill order until `engine` holds `target`
/// live files; advances `written`. Errors if the key space wrapped around
/// four times without getting there.
pub fn grow_to(
    engine: &dyn VersionsEngine,
    space: &KeySpace,
    target: u64,
    written: &mut u64,
    bar: &ProgressBar,
) -> Result<Growth, BenchError> {
    let start = Instant::now();
    let first = *written;
    let mut files = engine.live_files()?;
    let mut progress = Progress::new(first);
    let mut batch = Vec::with_capacity(BATCH_KEYS as usize);
    while files < target {
        if *written >= 4 * space.keys {
            return Err(BenchError::Usage(format!(
                "{} keys written and only {files} of {target} files: the key space is too small",
                fmt_count(*written)
            )));
        }
        for _ in 0..LOOK_EVERY_KEYS / BATCH_KEYS {
            batch.clear();
            for n in *written..*written + BATCH_KEYS {
                let i = KeyOrder::Scattered.nth(space, n);
                batch.push((space.key(i), space.value(i, n / space.keys)));
            }
            engine.write(&batch)?;
            *written += BATCH_KEYS;
        }
        files = engine.live_files()?;
        progress.show(bar, files, target, *written);
    }
    Ok(Growth {
        files,
        keys: *written - first,
        duration: start.elapsed(),
    })
}

/// Ingests files of `keys_per_file` keys `written..` (ascending), written
/// in `external_dir`, until `engine` holds `target` live files; advances
/// `written`. Errors if the key space runs out first.
pub fn ingest_to(
    engine: &dyn VersionsEngine,
    space: &KeySpace,
    target: u64,
    written: &mut u64,
    external_dir: &Path,
    keys_per_file: u64,
    bar: &ProgressBar,
) -> Result<Growth, BenchError> {
    let start = Instant::now();
    let first = *written;
    let keys_per_file = keys_per_file.max(1);
    let mut progress = Progress::new(first);
    let mut files = engine.live_files()?;
    // A run that stopped midway may have left external files behind.
    match std::fs::remove_dir_all(external_dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(BenchError::io("remove dir", external_dir)(e));
        }
        _ => {}
    }
    std::fs::create_dir_all(external_dir).map_err(BenchError::io("create dir", external_dir))?;
    while files < target {
        let count = (target - files).min(INGEST_FILES);
        let end = *written + count * keys_per_file;
        if end > space.keys {
            return Err(BenchError::Usage(format!(
                "{} keys written and only {files} of {target} files: the key space is too small",
                fmt_count(*written)
            )));
        }
        let batch: Vec<Vec<(Vec<u8>, Vec<u8>)>> = (0..count)
            .map(|f| {
                let lo = *written + f * keys_per_file;
                (lo..lo + keys_per_file)
                    .map(|i| (space.key(i), space.value(i, 0)))
                    .collect()
            })
            .collect();
        engine.ingest(external_dir, &batch)?;
        *written = end;
        files = engine.live_files()?;
        progress.show(bar, files, target, *written);
    }
    std::fs::remove_dir_all(external_dir).map_err(BenchError::io("remove dir", external_dir))?;
    Ok(Growth {
        files,
        keys: *written - first,
        duration: start.elapsed(),
    })
}

/// The growth's progress: a bar, or a plain line now and then when the bar
/// is hidden.
struct Progress {
    start: Instant,
    first: u64,
    last_plain: Instant,
}

impl Progress {
    fn new(first: u64) -> Progress {
        Progress {
            start: Instant::now(),
            first,
            last_plain: Instant::now(),
        }
    }

    fn show(&mut self, bar: &ProgressBar, files: u64, target: u64, written: u64) {
        bar.set_position(files.min(target) * 1000 / target.max(1));
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        let msg = format!(
            "{} / {} files, {} keys, {} keys/s",
            fmt_count(files),
            fmt_count(target),
            fmt_count(written),
            fmt_count(((written - self.first) as f64 / secs) as u64)
        );
        if bar.is_hidden() {
            if self.last_plain.elapsed() >= PLAIN_PROGRESS_EVERY {
                eprintln!("growing: {msg}");
                self.last_plain = Instant::now();
            }
        } else {
            bar.set_message(msg);
        }
    }
}
