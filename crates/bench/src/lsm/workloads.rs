//! The LSM workloads, after db_bench's: each runs on the database the ones
//! before it left (as `db_bench --benchmarks=fillrandom,overwrite,...`), with
//! `threads` threads that each take an equal share of the operations, every
//! call timed by the bench so that every engine is measured the same way.
//!
//! Concurrency: threads share only atomics (operations done, a stop flag
//! set by the first failure or by the deadline) and [`LiveKeys`]; each
//! draws its keys from its own seeded generator, the same seed for every
//! engine, so each engine gets the same sequence of operations.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::engine::{KvEngine, KvOp, WriteFlags};
use super::keys::{KeySpace, LiveKeys};
use crate::engines::EngineError;
use crate::error::BenchError;
use crate::runner::{latency_histogram, progress_bar, record_us, PLAIN_PROGRESS_EVERY};
use crate::units::MB;
use crate::workload::SplitMix;

/// A workload, named as db_bench names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Writes every key once, in key order (each thread its own range).
    Fillseq,
    /// Writes every key once, in a scattered order.
    Fillrandom,
    /// Writes random keys of the space (with replacement).
    Overwrite,
    /// Reads random keys of the space: hits once it is filled.
    Readrandom,
    /// Reads keys that fall between stored keys: misses, answered by the
    /// filters.
    Readmissing,
    /// `readrandom` after a close, a dropped page cache and a reopen: reads
    /// from the device (skipped with a note where the cache cannot be
    /// dropped).
    ReadrandomCold,
    /// Seeks to a random key and reads `--scan-length` entries from there.
    Seekrandom,
    /// `readrandom` on `threads` threads while one more thread overwrites
    /// random keys as fast as it can.
    Readwhilewriting,
    /// Deletes `--delete-fraction` of the keys, each once, scattered.
    Deleterandom,
    /// Reads the whole tree in key order, once (one thread): after
    /// `deleterandom`, how fast iteration skips the tombstones.
    Scan,
    /// `scan` after a close, a dropped page cache and a reopen: a scan from
    /// the device (skipped with a note where the cache cannot be dropped).
    ScanCold,
    /// Seeks to a random key and reads the keys before the one
    /// `--scan-length` keys on, set as the iterator's upper bound (a
    /// region's range scan, as a Raft store runs them).
    Seekrange,
    /// `seekrange` after a close, a dropped page cache and a reopen.
    SeekrangeCold,
}

impl Workload {
    /// The workload's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Fillseq => "fillseq",
            Workload::Fillrandom => "fillrandom",
            Workload::Overwrite => "overwrite",
            Workload::Readrandom => "readrandom",
            Workload::Readmissing => "readmissing",
            Workload::ReadrandomCold => "readrandom-cold",
            Workload::Seekrandom => "seekrandom",
            Workload::Readwhilewriting => "readwhilewriting",
            Workload::Deleterandom => "deleterandom",
            Workload::Scan => "scan",
            Workload::ScanCold => "scan-cold",
            Workload::Seekrange => "seekrange",
            Workload::SeekrangeCold => "seekrange-cold",
        }
    }

    /// Whether the workload writes: it is followed by a settle, and write
    /// and space amplification are reported for it.
    pub fn writes(self) -> bool {
        matches!(
            self,
            Workload::Fillseq
                | Workload::Fillrandom
                | Workload::Overwrite
                | Workload::Readwhilewriting
                | Workload::Deleterandom
        )
    }

    /// Whether the workload starts from a closed engine and a dropped page
    /// cache.
    pub fn cold(self) -> bool {
        matches!(
            self,
            Workload::ReadrandomCold | Workload::ScanCold | Workload::SeekrangeCold
        )
    }

    /// Whether the workload fills the key space.
    pub fn fills(self) -> bool {
        matches!(self, Workload::Fillseq | Workload::Fillrandom)
    }

    /// A stable number for seeding the workload's generators.
    fn seed(self) -> u64 {
        self as u64 + 1
    }
}

/// What every workload of a run shares.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// The key space.
    pub space: KeySpace,
    /// Threads (readers for `readwhilewriting`, which adds one writer).
    pub threads: usize,
    /// Operations of the workloads that do not fill or delete; `None`:
    /// one per key.
    pub ops: Option<u64>,
    /// Seeks of the seek workloads; `None`: as `ops`.
    pub seeks: Option<u64>,
    /// Longest time a workload runs; `None`: until its operations are done.
    pub max_duration: Option<Duration>,
    /// Keys per write batch.
    pub batch_keys: usize,
    /// Sync and WAL of every write.
    pub flags: WriteFlags,
    /// Entries each seek reads.
    pub scan_length: u64,
    /// Share of the keys `deleterandom` deletes.
    pub delete_fraction: f64,
    /// Draw a progress bar (a line every 10 s when stderr is no terminal).
    pub progress: bool,
}

/// What a workload did, as the bench measured it.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Operations: keys written or deleted, reads, seeks, entries scanned.
    pub ops: u64,
    /// Key and value bytes written (puts; keys alone for deletes) or read.
    pub user_bytes: u64,
    /// Reads that found their key; entries read by seeks.
    pub found: u64,
    /// Keys the writer of `readwhilewriting` wrote.
    pub background_writes: u64,
    /// Key and value bytes the writer of `readwhilewriting` wrote.
    pub background_bytes: u64,
    /// From the first operation to the last thread's end.
    pub duration: Duration,
    /// Latency of each call (a write batch, a read, a seek and its nexts),
    /// in microseconds; empty for `scan`, one call.
    pub latency_us: Histogram<u64>,
}

/// One step of a thread: what it did.
#[derive(Debug, Default, Clone, Copy)]
struct Step {
    bytes: u64,
    found: u64,
}

/// Runs workload `w` against `engine`, updating `live`.
pub fn run(
    w: Workload,
    engine: &dyn KvEngine,
    plan: &Plan,
    live: &LiveKeys,
) -> Result<Measured, BenchError> {
    let s = plan.space;
    let keys = s.keys;
    let flags = plan.flags;
    let put = |i: u64, version: u64| -> KvOp {
        let v = s.value(i, version);
        live.put(i, v.len());
        KvOp::Put(s.key(i), v)
    };
    let write = |ops: &[KvOp]| -> Result<u64, EngineError> {
        engine.write(ops, flags)?;
        Ok(ops
            .iter()
            .map(|op| match op {
                KvOp::Put(k, v) => (k.len() + v.len()) as u64,
                KvOp::Delete(k) => k.len() as u64,
            })
            .sum())
    };
    let reads = plan.ops.unwrap_or(keys);
    let seeks = plan.seeks.unwrap_or(reads);
    let batch = plan.batch_keys as u64;
    match w {
        Workload::Fillseq | Workload::Fillrandom => drive(w, plan, keys, batch, &|pos, n, _rng| {
            let ops: Vec<KvOp> = (pos..pos + n)
                .map(|p| {
                    let i = if w == Workload::Fillseq {
                        p
                    } else {
                        s.fill_order(p)
                    };
                    put(i, 0)
                })
                .collect();
            Ok(Step {
                bytes: write(&ops)?,
                found: 0,
            })
        }),
        Workload::Overwrite => drive(w, plan, reads, batch, &|pos, n, rng| {
            let ops: Vec<KvOp> = (pos..pos + n)
                .map(|p| put(rng.next() % keys, p + 1))
                .collect();
            Ok(Step {
                bytes: write(&ops)?,
                found: 0,
            })
        }),
        Workload::Deleterandom => {
            let deletes = (keys as f64 * plan.delete_fraction).round() as u64;
            drive(w, plan, deletes, batch, &|pos, n, _rng| {
                let ops: Vec<KvOp> = (pos..pos + n)
                    .map(|p| {
                        let i = s.fill_order(p);
                        live.delete(i);
                        KvOp::Delete(s.key(i))
                    })
                    .collect();
                Ok(Step {
                    bytes: write(&ops)?,
                    found: 0,
                })
            })
        }
        Workload::Readrandom | Workload::ReadrandomCold | Workload::Readmissing => {
            drive(w, plan, reads, 1, &|_pos, _n, rng| {
                let i = rng.next() % keys;
                let key = if w == Workload::Readmissing {
                    s.missing_key(i)
                } else {
                    s.key(i)
                };
                Ok(match engine.get(&key)? {
                    Some(len) => Step {
                        bytes: (key.len() + len) as u64,
                        found: 1,
                    },
                    None => Step::default(),
                })
            })
        }
        Workload::Seekrandom => drive(w, plan, seeks, 1, &|_pos, _n, rng| {
            let out = engine.scan(&s.key(rng.next() % keys), None, plan.scan_length)?;
            Ok(Step {
                bytes: out.bytes,
                found: out.entries,
            })
        }),
        Workload::Seekrange | Workload::SeekrangeCold => {
            drive(w, plan, seeks, 1, &|_pos, _n, rng| {
                let first = rng.next() % keys;
                let end = s.key(first.saturating_add(plan.scan_length));
                let out = engine.scan(&s.key(first), Some(&end), u64::MAX)?;
                Ok(Step {
                    bytes: out.bytes,
                    found: out.entries,
                })
            })
        }
        Workload::Readwhilewriting => {
            let stop = AtomicBool::new(false);
            let written = AtomicU64::new(0);
            let written_bytes = AtomicU64::new(0);
            thread::scope(|scope| {
                let writer = scope.spawn(|| -> Result<(), EngineError> {
                    let mut rng = SplitMix::new(w.seed() << 32 | 0xFFFF);
                    let mut version = 1u64 << 40;
                    while !stop.load(Relaxed) {
                        let ops: Vec<KvOp> = (0..batch)
                            .map(|_| {
                                version += 1;
                                put(rng.next() % keys, version)
                            })
                            .collect();
                        written_bytes.fetch_add(write(&ops)?, Relaxed);
                        written.fetch_add(batch, Relaxed);
                    }
                    Ok(())
                });
                let readers = drive(w, plan, reads, 1, &|_pos, _n, rng| {
                    let key = s.key(rng.next() % keys);
                    Ok(match engine.get(&key)? {
                        Some(len) => Step {
                            bytes: (key.len() + len) as u64,
                            found: 1,
                        },
                        None => Step::default(),
                    })
                });
                stop.store(true, Relaxed);
                let writer = writer.join().map_err(BenchError::from_panic)?;
                let mut m = readers?;
                writer?;
                m.background_writes = written.load(Relaxed);
                m.background_bytes = written_bytes.load(Relaxed);
                Ok(m)
            })
        }
        Workload::Scan | Workload::ScanCold => {
            let start = Instant::now();
            let out = engine.scan(&[], None, u64::MAX)?;
            Ok(Measured {
                ops: out.entries,
                user_bytes: out.bytes,
                found: out.entries,
                background_writes: 0,
                background_bytes: 0,
                duration: start.elapsed(),
                latency_us: latency_histogram(),
            })
        }
    }
}

/// What one thread of [`drive`] returns.
struct ThreadOut {
    latency_us: Histogram<u64>,
    bytes: u64,
    found: u64,
    /// When the thread finished its last operation.
    finished: Instant,
}

/// Runs `total` operations over `plan.threads` threads, `per_step` at a
/// time (a write batch), each thread an equal, contiguous share of the
/// operation numbers; stops early at the plan's deadline or on the first
/// failure. `step(pos, n, rng)` does operations `pos..pos + n`.
fn drive(
    w: Workload,
    plan: &Plan,
    total: u64,
    per_step: u64,
    step: &(dyn Fn(u64, u64, &mut SplitMix) -> Result<Step, EngineError> + Sync),
) -> Result<Measured, BenchError> {
    let threads = plan.threads.max(1) as u64;
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let running = AtomicU64::new(threads);
    let bar = progress_bar(plan.progress);
    let start = Instant::now();
    let deadline = plan.max_duration.map(|d| start + d);
    let results = thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (done, stop, running) = (&done, &stop, &running);
                scope.spawn(move || {
                    let result = (|| -> Result<ThreadOut, EngineError> {
                        let mut out = ThreadOut {
                            latency_us: latency_histogram(),
                            bytes: 0,
                            found: 0,
                            finished: Instant::now(),
                        };
                        let mut rng = SplitMix::new(w.seed() << 32 | t);
                        let (mut pos, end) = (total * t / threads, total * (t + 1) / threads);
                        while pos < end && !stop.load(Relaxed) {
                            if deadline.is_some_and(|d| Instant::now() >= d) {
                                break;
                            }
                            let n = per_step.min(end - pos);
                            let began = Instant::now();
                            let s = step(pos, n, &mut rng)?;
                            record_us(&mut out.latency_us, began.elapsed());
                            out.bytes += s.bytes;
                            out.found += s.found;
                            pos += n;
                            done.fetch_add(n, Relaxed);
                        }
                        out.finished = Instant::now();
                        Ok(out)
                    })();
                    if result.is_err() {
                        stop.store(true, Relaxed);
                    }
                    running.fetch_sub(1, Relaxed);
                    result
                })
            })
            .collect();
        let plain = plan.progress && bar.is_hidden();
        let mut next_line = start + PLAIN_PROGRESS_EVERY;
        while running.load(Relaxed) > 0 {
            thread::sleep(Duration::from_millis(100));
            let ops = done.load(Relaxed);
            let secs = start.elapsed().as_secs_f64().max(1e-9);
            bar.set_position((1000 * ops / total.max(1)).min(1000));
            bar.set_message(format!(
                "{} {ops} ops  {:.0} ops/s",
                w.name(),
                ops as f64 / secs
            ));
            if plain && Instant::now() >= next_line {
                next_line += PLAIN_PROGRESS_EVERY;
                eprintln!("[{secs:>4.0} s] {}", bar.message());
            }
        }
        handles.into_iter().map(|h| h.join()).collect::<Vec<_>>()
    });
    bar.finish_and_clear();
    // The progress loop polls every 100 ms: the workload's time is the
    // last thread's, not the loop's.
    let mut m = Measured {
        ops: done.load(Relaxed),
        user_bytes: 0,
        found: 0,
        background_writes: 0,
        background_bytes: 0,
        duration: Duration::ZERO,
        latency_us: latency_histogram(),
    };
    for r in results {
        let out = r.map_err(BenchError::from_panic)??;
        m.duration = m.duration.max(out.finished.duration_since(start));
        m.user_bytes += out.bytes;
        m.found += out.found;
        m.latency_us
            .add(&out.latency_us)
            .map_err(|e| BenchError::Usage(format!("latency histograms: {e}")))?;
    }
    Ok(m)
}

/// Returns ops/s and MB/s of `m`.
pub fn rates(m: &Measured) -> (f64, f64) {
    let secs = m.duration.as_secs_f64().max(1e-9);
    (m.ops as f64 / secs, m.user_bytes as f64 / MB / secs)
}
