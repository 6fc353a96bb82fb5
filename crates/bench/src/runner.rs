//! Runs a workload against a [`LogEngine`]: writer threads that each own their
//! groups, a purge thread, and a progress bar on the main thread.
//!
//! Each writer appends to `groups_per_batch` of its groups per batch, chosen
//! as `skew` says (by default round robin, so every group advances at the same
//! pace, as TiKV's busy regions do); it writes one batch at a time and waits
//! for it (a synchronous client, as braft's benchmark method asks), and
//! compacts each group it touched once the group holds twice `compact_lag`
//! entries, keeping the last `compact_lag`.
//!
//! The purge thread calls the engine's purge every `purge_interval` and times
//! each call. With `force_compact`, the groups a purge names as holding back
//! the oldest files are compacted by their writers before their next batch,
//! down to their newest entry, as TiKV force-compacts the regions raft-engine
//! names; a group with a cold tail (see `GroupSkew::Zipf`) otherwise never
//! reaches its compaction threshold and pins old files.
//!
//! Concurrency: a writer's groups are touched only by that writer, so its
//! [`GroupLog`]s need no lock; the threads share the atomic counters of
//! `Shared` and, per writer, a mutex-guarded list of groups to force-compact
//! (filled by the purge thread, drained by the writer, each lock held only to
//! push or take the list). Any failure sets `stop`, which every thread checks
//! before its next operation.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};

use crate::engines::{EngineError, LogEngine, WriteBatch};
use crate::error::BenchError;
use crate::units::MB;
use crate::workload::{next_append, owned_groups, EntrySizes, GroupLog, GroupPicker, GroupSkew};

/// Time between progress lines when stderr is not a terminal, so that a long
/// write phase run from a script still shows it is moving.
pub const PLAIN_PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// When the writers stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// After this much time.
    After(Duration),
    /// After this many batches over all writers.
    Batches(u64),
    /// Once this many payload bytes are written over all writers.
    PayloadBytes(u64),
}

/// A workload's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadSpec {
    /// Groups, numbered from 1.
    pub groups: u64,
    /// Groups each batch appends to.
    pub groups_per_batch: usize,
    /// Entries appended to each group of a batch.
    pub entries_per_group: usize,
    /// Entry lengths.
    pub sizes: EntrySizes,
    /// Writer threads; each owns `groups / writers` groups.
    pub writers: usize,
    /// How each writer picks the groups of a batch among its own.
    pub skew: GroupSkew,
    /// Write with sync.
    pub sync: bool,
    /// Entries each group keeps after a compaction; 0 never compacts.
    pub compact_lag: u64,
    /// Time between purges; `None` never purges.
    pub purge_interval: Option<Duration>,
    /// Compact the groups a purge names down to their newest entry (needs a
    /// `compact_lag` above 0).
    pub force_compact: bool,
    /// When to stop.
    pub stop: Stop,
    /// Draw a progress bar on a terminal; elsewhere print a line to stderr
    /// every [`PLAIN_PROGRESS_EVERY`].
    pub progress: bool,
}

impl WorkloadSpec {
    /// Checks that the workload can run.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: &str| Err(BenchError::Usage(m.to_string()));
        if self.groups == 0 || self.writers == 0 {
            return bad("--groups and --writers must be at least 1");
        }
        if self.writers as u64 > self.groups {
            return bad("each writer needs a group of its own: --writers must not exceed --groups");
        }
        if self.groups_per_batch == 0 || self.entries_per_group == 0 {
            return bad("--groups-per-batch and --entries-per-group must be at least 1");
        }
        if self.purge_interval == Some(Duration::ZERO) {
            return bad("--purge-interval-ms must be at least 1");
        }
        match self.stop {
            Stop::After(d) if d.is_zero() => bad("--seconds must be above 0"),
            Stop::Batches(0) | Stop::PayloadBytes(0) => bad("the amount to write must be above 0"),
            _ => Ok(()),
        }
    }

    /// Returns how many groups each batch really touches: a writer never puts
    /// a group twice in one batch.
    pub fn effective_groups_per_batch(&self) -> usize {
        let fewest_owned = (self.groups / self.writers.max(1) as u64).max(1) as usize;
        self.groups_per_batch.min(fewest_owned)
    }
}

/// What purges did over a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeTally {
    /// Purges run.
    pub calls: u64,
    /// Purges that freed at least one file.
    pub productive: u64,
    /// Files freed.
    pub files_purged: u64,
    /// Entries copied to free them.
    pub entries_rewritten: u64,
    /// Bytes copied to free them.
    pub bytes_rewritten: u64,
    /// Groups the engine asked to have compacted, summed over purges.
    pub groups_to_compact: u64,
    /// Time spent in purge.
    pub total_time: Duration,
    /// The longest purge.
    pub max_time: Duration,
    /// Each purge's time, in call order.
    pub times: Vec<Duration>,
    /// Groups force-compacted because a purge named them.
    pub groups_force_compacted: u64,
}

impl PurgeTally {
    /// Returns the median purge time, `None` without purges.
    pub fn median_time(&self) -> Option<Duration> {
        let mut t = self.times.clone();
        t.sort_unstable();
        let n = t.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(t[n / 2]),
            _ => Some((t[n / 2 - 1] + t[n / 2]) / 2),
        }
    }
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct WorkloadOutcome {
    /// Batches written.
    pub batches: u64,
    /// Entries written.
    pub entries: u64,
    /// Payload bytes written: entries and state values.
    pub payload_bytes: u64,
    /// `compact_to` calls.
    pub compactions: u64,
    /// From the first write to the last writer's end.
    pub duration: Duration,
    /// Latency of each write call, in microseconds, as the bench saw it.
    pub latency_us: Histogram<u64>,
    /// What purges did.
    pub purge: PurgeTally,
    /// Every group's live range at the end, sorted by group.
    pub groups: Vec<GroupLog>,
}

/// Counters shared by the threads of a run.
#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    purge_stop: AtomicBool,
    claimed: AtomicU64,
    batches: AtomicU64,
    payload: AtomicU64,
    running: AtomicUsize,
    /// Per writer: groups a purge named, for the writer to force-compact.
    force: Vec<Mutex<Vec<u64>>>,
    /// Per writer: whether `force` holds anything, checked without the lock.
    force_pending: Vec<AtomicBool>,
    /// Groups force-compacted so far.
    force_compacted: AtomicU64,
}

/// One writer's share of the outcome.
#[derive(Debug)]
struct WriterOutcome {
    logs: Vec<GroupLog>,
    latency_us: Histogram<u64>,
    entries: u64,
    compactions: u64,
}

/// Returns the order in which run `run` (1-based) visits `engines` engines:
/// each run rotates which goes first, so that drift of the machine over an
/// invocation (page cache, other load) and the cost of going first fall on
/// every engine alike.
pub fn interleaved(run: usize, engines: usize) -> impl Iterator<Item = usize> {
    (0..engines).map(move |k| (k + run.saturating_sub(1)) % engines)
}

/// Returns an empty latency histogram: 1 us to an hour, 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("static bounds are valid")
}

/// Records `d` in a microsecond histogram.
pub fn record_us(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record((d.as_micros() as u64).max(1));
}

/// Runs `spec` against `engine`. Groups continue from whatever the engine
/// already holds, so a kept directory grows rather than being overwritten.
pub fn run(engine: &dyn LogEngine, spec: &WorkloadSpec) -> Result<WorkloadOutcome, BenchError> {
    spec.validate()?;
    let mut shares = Vec::with_capacity(spec.writers);
    for w in 0..spec.writers {
        let mut logs = Vec::new();
        for group in owned_groups(spec.groups, spec.writers, w) {
            let log = match (engine.first_index(group)?, engine.last_index(group)?) {
                (Some(first), Some(last)) => GroupLog { group, first, last },
                _ => GroupLog::empty(group),
            };
            logs.push(log);
        }
        shares.push(logs);
    }

    let shared = Shared {
        running: AtomicUsize::new(spec.writers),
        force: (0..spec.writers).map(|_| Mutex::default()).collect(),
        force_pending: (0..spec.writers).map(|_| AtomicBool::new(false)).collect(),
        ..Shared::default()
    };
    let bar = progress_bar(spec.progress);
    let start = Instant::now();
    let deadline = match spec.stop {
        Stop::After(d) => Some(start + d),
        _ => None,
    };

    let (writer_results, purge_result, duration) = thread::scope(|s| {
        let writers: Vec<_> = shares
            .into_iter()
            .enumerate()
            .map(|(w, logs)| {
                let shared = &shared;
                s.spawn(move || {
                    let _running = RunningGuard(&shared.running);
                    let result = write_loop(engine, spec, shared, w, logs, deadline);
                    if result.is_err() {
                        shared.stop.store(true, Relaxed);
                    }
                    result
                })
            })
            .collect();
        let purger = spec.purge_interval.map(|interval| {
            let shared = &shared;
            s.spawn(move || {
                let result = purge_loop(engine, spec, interval, shared);
                if result.is_err() {
                    shared.stop.store(true, Relaxed);
                }
                result
            })
        });
        let plain = spec.progress && bar.is_hidden();
        let mut next_line = start + PLAIN_PROGRESS_EVERY;
        while shared.running.load(Relaxed) > 0 {
            thread::sleep(Duration::from_millis(100));
            update_bar(&bar, spec, &shared, start);
            if plain && Instant::now() >= next_line {
                next_line += PLAIN_PROGRESS_EVERY;
                eprintln!(
                    "[{:>4.0} s] {:>3.0}%  {}",
                    start.elapsed().as_secs_f64(),
                    bar.position() as f64 / 10.0,
                    bar.message()
                );
            }
        }
        let writer_results: Vec<_> = writers.into_iter().map(|h| h.join()).collect();
        let duration = start.elapsed();
        shared.purge_stop.store(true, Relaxed);
        let purge_result = purger.map(|h| h.join());
        (writer_results, purge_result, duration)
    });
    update_bar(&bar, spec, &shared, start);
    bar.finish();

    let mut outcome = WorkloadOutcome {
        batches: shared.batches.load(Relaxed),
        entries: 0,
        payload_bytes: shared.payload.load(Relaxed),
        compactions: 0,
        duration,
        latency_us: latency_histogram(),
        purge: PurgeTally::default(),
        groups: Vec::with_capacity(spec.groups as usize),
    };
    for result in writer_results {
        let w = result.map_err(BenchError::from_panic)??;
        outcome.entries += w.entries;
        outcome.compactions += w.compactions;
        outcome
            .latency_us
            .add(&w.latency_us)
            .expect("histograms share bounds");
        outcome.groups.extend(w.logs);
    }
    if let Some(result) = purge_result {
        outcome.purge = result.map_err(BenchError::from_panic)??;
    }
    outcome.purge.groups_force_compacted = shared.force_compacted.load(Relaxed);
    outcome.groups.sort_unstable_by_key(|g| g.group);
    Ok(outcome)
}

/// One writer: builds, writes and compacts until told to stop.
fn write_loop(
    engine: &dyn LogEngine,
    spec: &WorkloadSpec,
    shared: &Shared,
    writer: usize,
    mut logs: Vec<GroupLog>,
    deadline: Option<Instant>,
) -> Result<WriterOutcome, EngineError> {
    let per_batch = spec.groups_per_batch.min(logs.len());
    let count = spec.entries_per_group as u64;
    let mut out = WriterOutcome {
        logs: Vec::new(),
        latency_us: latency_histogram(),
        entries: 0,
        compactions: 0,
    };
    let mut picker = GroupPicker::new(spec.skew, logs.len(), writer);
    let mut picked = Vec::with_capacity(per_batch);
    loop {
        if shared.stop.load(Relaxed) {
            break;
        }
        if shared.force_pending[writer].swap(false, Relaxed) {
            let groups = std::mem::take(&mut *lock(&shared.force[writer]));
            for group in groups {
                // owned_groups gives writer w every writers-th group from w + 1.
                let log = &mut logs[((group - 1) / spec.writers as u64) as usize];
                debug_assert_eq!(log.group, group);
                if log.first < log.last {
                    engine.compact_to(log.group, log.last)?;
                    log.first = log.last;
                    out.compactions += 1;
                    shared.force_compacted.fetch_add(1, Relaxed);
                }
            }
        }
        let go_on = match spec.stop {
            Stop::After(_) => deadline.is_some_and(|d| Instant::now() < d),
            Stop::Batches(n) => shared.claimed.fetch_add(1, Relaxed) < n,
            Stop::PayloadBytes(n) => shared.payload.load(Relaxed) < n,
        };
        if !go_on {
            break;
        }
        let mut batch = WriteBatch {
            appends: Vec::with_capacity(per_batch),
        };
        picker.pick(per_batch, &mut picked);
        for &i in &picked {
            batch
                .appends
                .push(next_append(&logs[i], spec.entries_per_group, spec.sizes));
        }
        let payload = batch.payload_bytes();
        let t = Instant::now();
        engine.write(&batch, spec.sync)?;
        record_us(&mut out.latency_us, t.elapsed());
        shared.batches.fetch_add(1, Relaxed);
        shared.payload.fetch_add(payload, Relaxed);
        out.entries += batch.entry_count();
        for &i in &picked {
            let log = &mut logs[i];
            log.last += count;
            if spec.compact_lag > 0 && log.live() >= 2 * spec.compact_lag {
                let to = log.last + 1 - spec.compact_lag;
                engine.compact_to(log.group, to)?;
                log.first = to;
                out.compactions += 1;
            }
        }
    }
    out.logs = logs;
    Ok(out)
}

/// The purge thread: purges every `interval` until the writers are done, and
/// hands the groups each purge names to their writers with `force_compact`.
fn purge_loop(
    engine: &dyn LogEngine,
    spec: &WorkloadSpec,
    interval: Duration,
    shared: &Shared,
) -> Result<PurgeTally, EngineError> {
    let mut tally = PurgeTally::default();
    let mut next = Instant::now() + interval;
    loop {
        // Sleep in short steps so that the end of the run is not held up; and
        // look before every purge, since after one longer than the interval
        // there is no sleep.
        loop {
            if shared.purge_stop.load(Relaxed) || shared.stop.load(Relaxed) {
                return Ok(tally);
            }
            if Instant::now() >= next {
                break;
            }
            thread::sleep(Duration::from_millis(20).min(interval));
        }
        let t = Instant::now();
        let report = engine.purge()?;
        let took = t.elapsed();
        // After a purge longer than the interval, the next one waits a whole
        // interval rather than starting at once.
        next += interval;
        let now = Instant::now();
        if next <= now {
            next = now + interval;
        }
        tally.calls += 1;
        tally.productive += u64::from(report.files_purged > 0);
        tally.files_purged += report.files_purged;
        tally.entries_rewritten += report.entries_rewritten;
        tally.bytes_rewritten += report.bytes_rewritten;
        tally.groups_to_compact += report.groups_to_compact.len() as u64;
        tally.total_time += took;
        tally.max_time = tally.max_time.max(took);
        tally.times.push(took);
        if spec.force_compact && spec.compact_lag > 0 {
            for group in report.groups_to_compact {
                if group == 0 || group > spec.groups {
                    continue; // Not one of ours.
                }
                let w = ((group - 1) % spec.writers as u64) as usize;
                lock(&shared.force[w]).push(group);
                shared.force_pending[w].store(true, Relaxed);
            }
        }
    }
}

/// Locks `m`; a writer that panicked holding it changes nothing in a list of
/// group numbers.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts a writer out when it ends, however it ends.
struct RunningGuard<'a>(&'a AtomicUsize);

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

pub fn progress_bar(visible: bool) -> ProgressBar {
    if !visible {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(1000);
    if let Ok(style) = ProgressStyle::with_template(
        "[{elapsed_precise}] [{bar:40.cyan/blue}] {percent:>3}%  {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

fn update_bar(bar: &ProgressBar, spec: &WorkloadSpec, shared: &Shared, start: Instant) {
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let batches = shared.batches.load(Relaxed);
    let payload = shared.payload.load(Relaxed);
    let done = match spec.stop {
        Stop::After(d) => secs / d.as_secs_f64(),
        Stop::Batches(n) => batches as f64 / n as f64,
        Stop::PayloadBytes(n) => payload as f64 / n as f64,
    };
    bar.set_position((done.min(1.0) * 1000.0) as u64);
    bar.set_message(format!(
        "{batches} batches  {:.0} batches/s  {:.1} MB/s",
        batches as f64 / secs,
        payload as f64 / MB / secs
    ));
}
