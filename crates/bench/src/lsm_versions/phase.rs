//! A measured phase at one size: while readers loop over the read-path
//! entries that pin a version, each timed into its own histogram, one
//! thread makes the engine install versions ([`Driver`]):
//! - churn, for a set time: a writer keeps flushes and compactions
//!   installing new versions;
//! - a full compaction, until it ends: one call compacts the whole key
//!   space, so each of its installs replaces thousands of files at once
//!   (the moment TiKV saw a reader stall for seconds).
//!
//! - The writer overwrites random keys among those the growth wrote (so
//!   every level is rewritten over its whole range and the file count stays
//!   near the target), in batches of [`WRITER_BATCH`], unlogged, paced to
//!   `writer_keys_per_sec` when that is above 0.
//! - Each reader loops: take a snapshot and drop it; create an unbounded
//!   iterator, seek to a random key, read one entry, drop it; the same with
//!   an iterator bounded to that one key's range; a point get. Paced to
//!   `reader_loops_per_sec` when that is above 0, sleeping between loops.
//! - The main thread looks at the live file count every [`SAMPLE_EVERY`].
//!
//! Concurrency: the threads share a stop flag and the first error; each
//! reader owns its histograms and hands them back when it ends. The first
//! error of any thread stops the phase; it is reported, not raised, so the
//! figures gathered until then still print.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::ProgressBar;

use super::engine::VersionsEngine;
use super::grow::KeyOrder;
use super::record::STALL_NANOS;
use crate::engines::EngineError;
use crate::error::BenchError;
use crate::lsm::keys::KeySpace;
use crate::workload::SplitMix;

/// Keys per batch of the writer.
const WRITER_BATCH: u64 = 16;
/// How often the main thread looks at the file count.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// Longest latency a histogram holds, in nanoseconds (longer ones are
/// recorded as this).
const LATENCY_MAX_NANOS: u64 = 60_000_000_000;

/// The churn phase's name in records and tables.
pub const CHURN: &str = "churn";
/// The full-compaction phase's name in records and tables.
pub const FULL_COMPACTION: &str = "full compaction";

/// What makes the engine install versions during a phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Driver {
    /// A writer for `duration`, paced to `keys_per_sec` (0: unpaced).
    Churn {
        /// How long.
        duration: Duration,
        /// The writer's pace.
        keys_per_sec: u64,
    },
    /// One manual compaction of the whole key space; the phase lasts as
    /// long as it does.
    FullCompaction,
}

impl Driver {
    /// The phase's name in records and tables.
    pub fn name(self) -> &'static str {
        match self {
            Driver::Churn { .. } => CHURN,
            Driver::FullCompaction => FULL_COMPACTION,
        }
    }
}

/// What the phase runs.
#[derive(Debug, Clone, Copy)]
pub struct PhaseSpec {
    /// What installs the versions.
    pub driver: Driver,
    /// Reader threads.
    pub readers: usize,
    /// Each reader's pace in loops/s (0: as fast as it can).
    pub reader_loops_per_sec: u64,
    /// The first `keys` keys written, in `order`, are present.
    pub keys: u64,
    /// The order the growth wrote the keys in.
    pub order: KeyOrder,
}

/// One timed operation's figures.
#[derive(Debug, Clone)]
pub struct Timed {
    /// Latencies in nanoseconds.
    pub h: Histogram<u64>,
    /// The latencies of the calls during which the thread was not
    /// preempted (no involuntary context switch over the timed call): the
    /// engine's own time, waiting on a lock or the disk or working, not the
    /// reader waiting for one of the cores. On 2 busy cores a call of a few
    /// microseconds is preempted about once in a thousand, which alone
    /// makes a p99.9.
    pub own: Histogram<u64>,
    /// Of the calls of 1 ms or more not preempted, those during which the
    /// thread slept on its own (a voluntary context switch: a lock, the
    /// disk, a page fault waiting for memory-map changes); the others ran,
    /// or their virtual CPU was paused by the host, which no count inside
    /// the guest sees.
    pub blocked_over_1ms: u64,
}

/// A thread's context switches so far (`getrusage`'s, this thread's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switches {
    /// Preemptions.
    involuntary: u64,
    /// Sleeps the thread went into itself.
    voluntary: u64,
}

impl Switches {
    /// The calling thread's counts; `None` if `getrusage` failed.
    pub fn now() -> Option<Switches> {
        // SAFETY: `getrusage` writes the struct it is given and nothing
        // else; a zeroed `rusage` is a valid value of that plain C struct.
        unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            if libc::getrusage(libc::RUSAGE_THREAD, &mut ru) != 0 {
                return None;
            }
            Some(Switches {
                involuntary: ru.ru_nivcsw as u64,
                voluntary: ru.ru_nvcsw as u64,
            })
        }
    }
}

impl Timed {
    fn new() -> Timed {
        let h = || {
            Histogram::new_with_bounds(1, LATENCY_MAX_NANOS, 3).expect("static bounds are valid")
        };
        Timed {
            h: h(),
            own: h(),
            blocked_over_1ms: 0,
        }
    }

    /// Records `d`, timed within a call that began at the switch counts
    /// `before` and has just returned.
    fn record(&mut self, d: Duration, before: Option<Switches>) {
        self.record_span(d, before, Switches::now());
    }

    /// Records `d`, timed between the switch counts `before` and `after`
    /// (a call counts as not preempted only when both were read and show
    /// no preemption).
    fn record_span(&mut self, d: Duration, before: Option<Switches>, after: Option<Switches>) {
        let nanos = (d.as_nanos() as u64).clamp(1, LATENCY_MAX_NANOS);
        self.h.saturating_record(nanos);
        let (Some(b), Some(a)) = (before, after) else {
            return;
        };
        if a.involuntary == b.involuntary {
            self.own.saturating_record(nanos);
            if nanos >= STALL_NANOS && a.voluntary > b.voluntary {
                self.blocked_over_1ms += 1;
            }
        }
    }

    fn add(&mut self, other: &Timed) {
        self.h.add(&other.h).expect("histograms of the same bounds");
        self.own
            .add(&other.own)
            .expect("histograms of the same bounds");
        self.blocked_over_1ms += other.blocked_over_1ms;
    }
}

/// Each timed operation's figures.
#[derive(Debug, Clone)]
pub struct OpHistograms {
    /// Taking a snapshot.
    pub snapshot: Timed,
    /// Creating an unbounded iterator.
    pub iter_create: Timed,
    /// Seeking it, reading one entry, dropping it.
    pub iter_seek_read: Timed,
    /// Creating an iterator bounded to one key's range.
    pub bounded_iter_create: Timed,
    /// A point get.
    pub get: Timed,
}

impl OpHistograms {
    fn new() -> OpHistograms {
        OpHistograms {
            snapshot: Timed::new(),
            iter_create: Timed::new(),
            iter_seek_read: Timed::new(),
            bounded_iter_create: Timed::new(),
            get: Timed::new(),
        }
    }

    fn add(&mut self, other: &OpHistograms) {
        for (a, b) in [
            (&mut self.snapshot, &other.snapshot),
            (&mut self.iter_create, &other.iter_create),
            (&mut self.iter_seek_read, &other.iter_seek_read),
            (&mut self.bounded_iter_create, &other.bounded_iter_create),
            (&mut self.get, &other.get),
        ] {
            a.add(b);
        }
    }
}

/// What the phase measured.
#[derive(Debug, Clone)]
pub struct PhaseOutcome {
    /// Every reader's histograms, merged.
    pub ops: OpHistograms,
    /// Reader loops completed.
    pub reader_loops: u64,
    /// Keys the writer put.
    pub writer_keys: u64,
    /// Live files at the start, lowest, highest and at the end.
    pub files: [u64; 4],
    /// How long the phase ran.
    pub duration: Duration,
    /// The first error of any thread, which ended the phase early.
    pub error: Option<String>,
}

struct Shared {
    stop: AtomicBool,
    error: Mutex<Option<String>>,
    writer_keys: AtomicU64,
}

impl Shared {
    fn fail(&self, e: EngineError) {
        self.error
            .lock()
            .expect("not poisoned")
            .get_or_insert(e.to_string());
        self.stop.store(true, Relaxed);
    }
}

/// Runs the phase on `engine`.
pub fn run(
    engine: &dyn VersionsEngine,
    space: &KeySpace,
    spec: &PhaseSpec,
    bar: &ProgressBar,
) -> Result<PhaseOutcome, BenchError> {
    let shared = Shared {
        stop: AtomicBool::new(false),
        error: Mutex::new(None),
        writer_keys: AtomicU64::new(0),
    };
    let keys = spec.keys.clamp(1, space.keys);
    let first_files = engine.live_files()?;
    let mut files = [first_files; 4];
    let start = Instant::now();
    let (ops, loops) = thread::scope(|s| -> Result<(OpHistograms, u64), BenchError> {
        let shared = &shared;
        let readers: Vec<_> = (0..spec.readers)
            .map(|r| s.spawn(move || reader(engine, space, keys, spec, r as u64, shared)))
            .collect();
        let duration = match spec.driver {
            Driver::Churn {
                duration,
                keys_per_sec,
            } => {
                s.spawn(move || writer(engine, space, keys_per_sec, spec, keys, shared));
                duration
            }
            Driver::FullCompaction => {
                s.spawn(move || compactor(engine, shared));
                Duration::MAX
            }
        };
        while start.elapsed() < duration && !shared.stop.load(Relaxed) {
            thread::sleep(SAMPLE_EVERY.min(duration.saturating_sub(start.elapsed())));
            match engine.live_files() {
                Ok(n) => {
                    files[1] = files[1].min(n);
                    files[2] = files[2].max(n);
                    files[3] = n;
                }
                Err(e) => shared.fail(e),
            }
            match spec.driver {
                Driver::Churn { .. } => {
                    let done = start.elapsed().as_secs_f64() / duration.as_secs_f64();
                    bar.set_position((done.min(1.0) * 1000.0) as u64);
                }
                Driver::FullCompaction => bar.set_position(start.elapsed().as_secs()),
            }
        }
        shared.stop.store(true, Relaxed);
        let mut ops = OpHistograms::new();
        let mut loops = 0;
        for r in readers {
            let (h, n) = r.join().map_err(BenchError::from_panic)?;
            ops.add(&h);
            loops += n;
        }
        Ok((ops, loops))
    })?;
    let duration = start.elapsed();
    let error = shared.error.lock().expect("not poisoned").take();
    Ok(PhaseOutcome {
        ops,
        reader_loops: loops,
        writer_keys: shared.writer_keys.load(Relaxed),
        files,
        duration,
        error,
    })
}

/// Compacts the whole key space, then ends the phase.
fn compactor(engine: &dyn VersionsEngine, shared: &Shared) {
    if let Err(e) = engine.compact_all() {
        shared.fail(e);
    }
    shared.stop.store(true, Relaxed);
}

/// How long a thread paced to `per_sec` actions a second (0: unpaced),
/// which began at `start` and has done `done`, sleeps before the next one
/// (at most [`SAMPLE_EVERY`], so that it sees the stop flag); `None` once
/// the next is due.
fn pace_wait(start: Instant, done: u64, per_sec: u64) -> Option<Duration> {
    if per_sec == 0 {
        return None;
    }
    let due = Duration::from_secs_f64(done as f64 / per_sec as f64);
    due.checked_sub(start.elapsed())
        .map(|ahead| ahead.min(SAMPLE_EVERY))
}

fn writer(
    engine: &dyn VersionsEngine,
    space: &KeySpace,
    keys_per_sec: u64,
    spec: &PhaseSpec,
    keys: u64,
    shared: &Shared,
) {
    let mut rng = SplitMix::new(0x5752_4954);
    let start = Instant::now();
    let mut written = 0u64;
    let mut batch = Vec::with_capacity(WRITER_BATCH as usize);
    while !shared.stop.load(Relaxed) {
        if let Some(wait) = pace_wait(start, written, keys_per_sec) {
            thread::sleep(wait);
            continue;
        }
        batch.clear();
        for _ in 0..WRITER_BATCH {
            let i = spec.order.nth(space, rng.next() % keys);
            batch.push((space.key(i), space.value(i, rng.next())));
        }
        if let Err(e) = engine.write(&batch) {
            shared.fail(e);
            return;
        }
        written += WRITER_BATCH;
        shared.writer_keys.fetch_add(WRITER_BATCH, Relaxed);
    }
}

fn reader(
    engine: &dyn VersionsEngine,
    space: &KeySpace,
    keys: u64,
    spec: &PhaseSpec,
    id: u64,
    shared: &Shared,
) -> (OpHistograms, u64) {
    let order = spec.order;
    let mut h = OpHistograms::new();
    let mut rng = SplitMix::new(0x5245_4144 ^ (id << 32));
    let mut loops = 0;
    let mut one = || -> Result<(), EngineError> {
        let i = order.nth(space, rng.next() % keys);
        let key = space.key(i);
        let before = Switches::now();
        h.snapshot.record(engine.snapshot()?, before);
        let before = Switches::now();
        let t = engine.iterate(&key, None)?;
        h.iter_create
            .record_span(t.create, before, t.switches_at_create);
        h.iter_seek_read
            .record(t.seek_read_drop, t.switches_at_create);
        let upper = space.key(i + 1);
        let before = Switches::now();
        let t = engine.iterate(&key, Some(&upper))?;
        h.bounded_iter_create
            .record_span(t.create, before, t.switches_at_create);
        let before = Switches::now();
        let start = Instant::now();
        engine.get(&key)?;
        h.get.record(start.elapsed(), before);
        Ok(())
    };
    let start = Instant::now();
    while !shared.stop.load(Relaxed) {
        if let Some(wait) = pace_wait(start, loops, spec.reader_loops_per_sec) {
            thread::sleep(wait);
            continue;
        }
        if let Err(e) = one() {
            shared.fail(e);
            break;
        }
        loops += 1;
    }
    (h, loops)
}
