//! Growing a database to a number of live SST files: batches of keys in
//! the scattered fill order of the key space, unlogged and unsynced, until
//! the engine's own count of live files reaches the target.
//!
//! Keys are written in the fill order of `lsm/keys.rs` (a bijection of the
//! key space), so the first `n` keys written are spread over the whole
//! space and every file of every level covers a slice of it; the measured
//! phase then picks among those `n` keys only, so its gets hit and its
//! writer overwrites rather than adds (the file count stays near the target).

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
    let mut last_plain = Instant::now();
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
                let i = space.fill_order(n % space.keys);
                batch.push((space.key(i), space.value(i, n / space.keys)));
            }
            engine.write(&batch)?;
            *written += BATCH_KEYS;
        }
        files = engine.live_files()?;
        bar.set_position(files.min(target) * 1000 / target.max(1));
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        let msg = format!(
            "{} / {} files, {} keys, {} keys/s",
            fmt_count(files),
            fmt_count(target),
            fmt_count(*written),
            fmt_count(((*written - first) as f64 / secs) as u64)
        );
        if bar.is_hidden() {
            if last_plain.elapsed() >= PLAIN_PROGRESS_EVERY {
                eprintln!("growing: {msg}");
                last_plain = Instant::now();
            }
        } else {
            bar.set_message(msg);
        }
    }
    Ok(Growth {
        files,
        keys: *written - first,
        duration: start.elapsed(),
    })
}
