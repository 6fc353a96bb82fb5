//! One measured phase of `lsm-ingest`: `writers` threads putting random
//! keys of their own ranges for a fixed time, every put timed, and in the
//! ingesting phase one more thread ingesting the prepared files, each
//! call timed. Also the untimed preload of the writers' ranges.
//!
//! Concurrency: the threads share only atomics (writes done, ingestions
//! done, a stop flag set by the first failure); each writer owns its keys
//! and its latency histogram, merged at the end. The main thread draws the
//! progress bar.
//!
//! Pacing of the ingestions: file `k` (0-based) of `n` starts no earlier
//! than `k x duration / n` into the phase, and right after the previous
//! call otherwise: back to back when calls are slower than the pace,
//! evenly spread over the phase when they are faster, so that ingestion
//! runs for the whole phase either way.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::engine::IngestEngine;
use super::files::ExternalFile;
use super::keys::{value, writer_key, PAIR_BYTES};
use crate::engines::EngineError;
use crate::error::BenchError;
use crate::lsm::engine::{KvOp, WriteFlags};
use crate::runner::{latency_histogram, progress_bar, record_us, PLAIN_PROGRESS_EVERY};
use crate::units::MB;
use crate::workload::SplitMix;

/// Keys per batch of the preload (untimed, so batched for speed).
const PRELOAD_BATCH: u64 = 64;

/// What a phase's writers do.
#[derive(Debug, Clone, Copy)]
pub struct Writers {
    /// Threads, each over its own range.
    pub threads: usize,
    /// Keys in each writer's range.
    pub keys_per_writer: u64,
    /// Sync and WAL of every put.
    pub flags: WriteFlags,
}

/// What a phase measured.
#[derive(Debug, Clone)]
pub struct PhaseOutcome {
    /// Puts acknowledged.
    pub writes: u64,
    /// From the start to the last writer's last put.
    pub duration: Duration,
    /// Latency of each put, in microseconds.
    pub write_latency_us: Histogram<u64>,
    /// Ingestion calls that returned.
    pub ingestions: u64,
    /// Key and value bytes of the files ingested.
    pub ingested_user_bytes: u64,
    /// Latency of each ingestion call, in microseconds.
    pub ingest_latency_us: Histogram<u64>,
    /// Each ingestion's seqno hold, in microseconds, where the engine
    /// reports it (empty otherwise).
    pub seqno_hold_us: Histogram<u64>,
    /// Each ingestion's seqno reservation, in microseconds, likewise.
    pub seqno_reserved_us: Histogram<u64>,
    /// Files prepared for the phase and not ingested when it ended.
    pub files_left: u64,
}

/// Writes every key of every writer's range once (the writers in
/// parallel, in batches), untimed.
pub fn preload(engine: &dyn IngestEngine, w: &Writers) -> Result<(), BenchError> {
    let results: Vec<Result<(), EngineError>> = thread::scope(|scope| {
        let handles: Vec<_> = (0..w.threads)
            .map(|t| {
                scope.spawn(move || {
                    let mut i = 0;
                    while i < w.keys_per_writer {
                        let end = (i + PRELOAD_BATCH).min(w.keys_per_writer);
                        let ops: Vec<KvOp> = (i..end)
                            .map(|k| KvOp::Put(writer_key(t, k), value(t as u64, k)))
                            .collect();
                        engine.kv().write(&ops, w.flags)?;
                        i = end;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(BenchError::from_panic))
            .collect::<Result<_, _>>()
    })?;
    for r in results {
        r?;
    }
    Ok(())
}

/// What one writer returns.
struct WriterOut {
    latency_us: Histogram<u64>,
    finished: Instant,
}

/// What the ingesting thread returns.
struct IngesterOut {
    latency_us: Histogram<u64>,
    seqno_hold_us: Histogram<u64>,
    seqno_reserved_us: Histogram<u64>,
    user_bytes: u64,
}

/// Runs one phase named `label` (`seed` picks the writers' keys, the same
/// for every engine): the writers for `duration`, and while they run, the
/// ingestion of `files` in order, paced as the module says (none: the
/// baseline).
pub fn run(
    label: &str,
    seed: u64,
    engine: &dyn IngestEngine,
    w: &Writers,
    duration: Duration,
    files: &[ExternalFile],
    progress: bool,
) -> Result<PhaseOutcome, BenchError> {
    let writes = AtomicU64::new(0);
    let ingestions = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let running = AtomicU64::new(w.threads as u64 + u64::from(!files.is_empty()));
    let bar = progress_bar(progress);
    let start = Instant::now();
    let deadline = start + duration;
    let (writer_results, ingester_result) = thread::scope(|scope| {
        let (writes, ingestions, stop, running) = (&writes, &ingestions, &stop, &running);
        let writers: Vec<_> = (0..w.threads)
            .map(|t| {
                scope.spawn(move || {
                    let r = write_until(engine, w, t, seed, deadline, stop, writes);
                    if r.is_err() {
                        stop.store(true, Relaxed);
                    }
                    running.fetch_sub(1, Relaxed);
                    r
                })
            })
            .collect();
        let ingester = (!files.is_empty()).then(|| {
            scope.spawn(move || {
                let r = ingest_paced(engine, files, start, duration, stop, ingestions);
                if r.is_err() {
                    stop.store(true, Relaxed);
                }
                running.fetch_sub(1, Relaxed);
                r
            })
        });
        let plain = progress && bar.is_hidden();
        let mut next_line = start + PLAIN_PROGRESS_EVERY;
        while running.load(Relaxed) > 0 {
            thread::sleep(Duration::from_millis(100));
            let secs = start.elapsed().as_secs_f64().max(1e-9);
            let done = writes.load(Relaxed);
            bar.set_position(((secs / duration.as_secs_f64()).min(1.0) * 1000.0) as u64);
            bar.set_message(format!(
                "{label}: {done} writes  {:.0} writes/s  {:.1} MB/s  {} ingestions",
                done as f64 / secs,
                (done * PAIR_BYTES) as f64 / MB / secs,
                ingestions.load(Relaxed)
            ));
            if plain && Instant::now() >= next_line {
                next_line += PLAIN_PROGRESS_EVERY;
                eprintln!("[{secs:>4.0} s] {}", bar.message());
            }
        }
        let writer_results: Vec<_> = writers.into_iter().map(|h| h.join()).collect();
        (writer_results, ingester.map(|h| h.join()))
    });
    bar.finish_and_clear();
    let mut out = PhaseOutcome {
        writes: writes.load(Relaxed),
        duration: Duration::ZERO,
        write_latency_us: latency_histogram(),
        ingestions: ingestions.load(Relaxed),
        ingested_user_bytes: 0,
        ingest_latency_us: latency_histogram(),
        seqno_hold_us: latency_histogram(),
        seqno_reserved_us: latency_histogram(),
        files_left: files.len() as u64 - ingestions.load(Relaxed),
    };
    let merge = |into: &mut Histogram<u64>, from: &Histogram<u64>| {
        into.add(from)
            .map_err(|e| BenchError::Usage(format!("latency histograms: {e}")))
    };
    for r in writer_results {
        let o = r.map_err(BenchError::from_panic)??;
        out.duration = out.duration.max(o.finished.duration_since(start));
        merge(&mut out.write_latency_us, &o.latency_us)?;
    }
    if let Some(r) = ingester_result {
        let o = r.map_err(BenchError::from_panic)??;
        merge(&mut out.ingest_latency_us, &o.latency_us)?;
        merge(&mut out.seqno_hold_us, &o.seqno_hold_us)?;
        merge(&mut out.seqno_reserved_us, &o.seqno_reserved_us)?;
        out.ingested_user_bytes = o.user_bytes;
    }
    Ok(out)
}

/// One writer: puts random keys of its range until `deadline` or `stop`.
fn write_until(
    engine: &dyn IngestEngine,
    w: &Writers,
    t: usize,
    seed: u64,
    deadline: Instant,
    stop: &AtomicBool,
    writes: &AtomicU64,
) -> Result<WriterOut, EngineError> {
    let mut rng = SplitMix::new(seed << 32 | t as u64);
    let mut latency_us = latency_histogram();
    // Versions past the preload's (index = version there), distinct per
    // phase, so that every put writes new bytes.
    let mut version = seed << 40;
    let mut ops = Vec::with_capacity(1);
    loop {
        let now = Instant::now();
        if now >= deadline || stop.load(Relaxed) {
            break;
        }
        version += 1;
        let k = rng.next() % w.keys_per_writer;
        // The key and value are made before the clock starts: the put alone
        // is timed.
        ops.clear();
        ops.push(KvOp::Put(writer_key(t, k), value(t as u64, version)));
        let began = Instant::now();
        engine.kv().write(&ops, w.flags)?;
        record_us(&mut latency_us, began.elapsed());
        writes.fetch_add(1, Relaxed);
    }
    Ok(WriterOut {
        latency_us,
        finished: Instant::now(),
    })
}

/// The ingesting thread: ingests `files` in order, paced as the module
/// says, until they are all in, the phase is over, or `stop`.
fn ingest_paced(
    engine: &dyn IngestEngine,
    files: &[ExternalFile],
    start: Instant,
    duration: Duration,
    stop: &AtomicBool,
    ingestions: &AtomicU64,
) -> Result<IngesterOut, EngineError> {
    let mut out = IngesterOut {
        latency_us: latency_histogram(),
        seqno_hold_us: latency_histogram(),
        seqno_reserved_us: latency_histogram(),
        user_bytes: 0,
    };
    let deadline = start + duration;
    let n = files.len() as u32;
    for (k, f) in (0u32..).zip(files) {
        let not_before = start + duration * k / n;
        while Instant::now() < not_before && !stop.load(Relaxed) {
            thread::sleep(
                not_before
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(10)),
            );
        }
        if Instant::now() >= deadline || stop.load(Relaxed) {
            break;
        }
        let began = Instant::now();
        let done = engine.ingest(&f.path)?;
        record_us(&mut out.latency_us, began.elapsed());
        if let Some(hold) = done.seqno_hold {
            record_us(&mut out.seqno_hold_us, hold);
        }
        if let Some(reserved) = done.seqno_reserved {
            record_us(&mut out.seqno_reserved_us, reserved);
        }
        out.user_bytes += f.user_bytes;
        ingestions.fetch_add(1, Relaxed);
    }
    Ok(out)
}
