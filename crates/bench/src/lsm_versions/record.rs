//! `lsm-versions`' results: one record per engine and size (a JSON line,
//! and a table per size with a column per engine).

use serde::Serialize;
use strata_lsm::{InstallTiming, TimeHistogram};

use super::engine::Tuning;
use super::grow::{GrowBy, Growth};
use super::phase::{PhaseOutcome, Timed};
use crate::lsm::engine::KvSettings;
use crate::report::{fmt_count, or_na, Table};

/// A latency at or above this counts as a stall of the read path, in
/// nanoseconds: the spec allows none for snapshots and iterators.
pub const STALL_NANOS: u64 = 1_000_000;

/// The invocation's parameters, echoed into every record.
#[derive(Debug, Clone, Serialize)]
pub struct Params {
    /// Bytes of a key.
    pub key_bytes: usize,
    /// Bytes of a value.
    pub value_bytes: u64,
    /// Reader threads.
    pub readers: usize,
    /// Each reader's pace limit in loops/s (0: none).
    pub reader_loops_per_sec_limit: u64,
    /// The writer's pace limit in keys/s (0: none).
    pub writer_keys_per_sec_limit: u64,
    /// The settings every engine was opened with.
    pub settings: KvSettings,
    /// Engine options beyond them.
    pub tuning: Tuning,
    /// How the database grew to each size.
    pub grow_by: GrowBy,
}

/// One operation's latency in microseconds, as measured by the bench.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct OpLatency {
    /// Operations timed.
    pub count: u64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Longest.
    pub max_us: f64,
    /// Operations that took [`STALL_NANOS`] or longer.
    pub over_1ms: u64,
    /// Of those, the ones during which the thread was not preempted: the
    /// engine's own time, not a wait for a core.
    pub over_1ms_unpreempted: u64,
    /// Of those, the ones during which the thread slept on its own (a lock,
    /// the disk, a page fault): the others ran, or the host paused them.
    pub over_1ms_unpreempted_blocked: u64,
    /// Operations during which the thread was not preempted.
    pub own_count: u64,
    /// Their 99th percentile.
    pub own_p99_us: f64,
    /// Their 99.9th percentile.
    pub own_p999_us: f64,
    /// The longest of them.
    pub own_max_us: f64,
}

impl OpLatency {
    fn of(t: &Timed) -> OpLatency {
        let h = &t.h;
        let us = |ns: u64| ns as f64 / 1e3;
        OpLatency {
            count: h.len(),
            p50_us: us(h.value_at_quantile(0.5)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
            over_1ms: h.count_between(STALL_NANOS, u64::MAX),
            over_1ms_unpreempted: t.own.count_between(STALL_NANOS, u64::MAX),
            over_1ms_unpreempted_blocked: t.blocked_over_1ms,
            own_count: t.own.len(),
            own_p99_us: us(t.own.value_at_quantile(0.99)),
            own_p999_us: us(t.own.value_at_quantile(0.999)),
            own_max_us: us(t.own.max()),
        }
    }
}

/// One of the engine's own install timings over the phase, in
/// microseconds; quantiles are the ends of power-of-two buckets (upper
/// bounds within 2x), the maximum exact or such a bound.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TimeFigures {
    /// Installs timed.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median (bucket bound).
    pub p50_us: f64,
    /// 99th percentile (bucket bound).
    pub p99_us: f64,
    /// 99.9th percentile (bucket bound).
    pub p999_us: f64,
    /// Longest.
    pub max_us: f64,
}

impl TimeFigures {
    fn of(h: &TimeHistogram) -> TimeFigures {
        let us = |ns: u64| ns as f64 / 1e3;
        TimeFigures {
            count: h.count,
            mean_us: us(h.mean_nanos()),
            p50_us: us(h.quantile_nanos(0.5)),
            p99_us: us(h.quantile_nanos(0.99)),
            p999_us: us(h.quantile_nanos(0.999)),
            max_us: us(h.max_nanos),
        }
    }
}

/// Strata's install timing over the phase.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct InstallFigures {
    /// Waiting for the installer lock.
    pub lock_wait: TimeFigures,
    /// The critical section: lock taken to the new state published.
    pub lock_held: TimeFigures,
    /// The same, for the installs whose thread was not preempted around
    /// it: the section's own cost.
    pub lock_held_unpreempted: TimeFigures,
    /// Building the version (under the lock).
    pub version_build: TimeFigures,
    /// The manifest append (under the lock).
    pub persist: TimeFigures,
    /// The manifest sync, after the lock is released.
    pub durable: TimeFigures,
}

impl InstallFigures {
    /// The figures of `t`, the engine's timing over the phase.
    pub fn of(t: &InstallTiming) -> InstallFigures {
        InstallFigures {
            lock_wait: TimeFigures::of(&t.lock_wait),
            lock_held: TimeFigures::of(&t.lock_held),
            lock_held_unpreempted: TimeFigures::of(&t.lock_held_unpreempted),
            version_build: TimeFigures::of(&t.build),
            persist: TimeFigures::of(&t.persist),
            durable: TimeFigures::of(&t.durable),
        }
    }
}

/// One engine at one size.
#[derive(Debug, Clone, Serialize)]
pub struct VersionsRecord {
    /// Always "size".
    pub kind: &'static str,
    /// The engine's short name.
    pub engine: &'static str,
    /// The file count the database was grown to.
    pub target_files: u64,
    /// What installed the versions: "churn" (a writer, for a set time) or
    /// "full compaction" (one manual compaction of the whole key space,
    /// after the churn at the same size).
    pub phase: &'static str,
    /// Live files at the phase's start, lowest, highest, at its end.
    pub files_at_start: u64,
    /// Lowest count seen during the phase.
    pub files_min: u64,
    /// Highest count seen during the phase.
    pub files_max: u64,
    /// Count at the phase's end.
    pub files_at_end: u64,
    /// Seconds the growth from the previous size took.
    pub growth_seconds: f64,
    /// Keys it wrote.
    pub growth_keys: u64,
    /// Growth seconds per 1,000 files added (for planning a larger run).
    pub growth_seconds_per_1k_files: f64,
    /// Seconds of the measured phase.
    pub seconds: f64,
    /// Reader loops completed.
    pub reader_loops: u64,
    /// Keys the writer put during the phase.
    pub writer_keys: u64,
    /// Versions installed during the phase (Strata: installs; RocksDB: its
    /// super-version number, memtable switches included).
    pub versions_installed: u64,
    /// The same per second.
    pub versions_per_sec: f64,
    /// Taking a snapshot (and only that; the drop is outside the timing).
    pub snapshot: OpLatency,
    /// Creating an unbounded iterator.
    pub iter_create: OpLatency,
    /// Seeking it, reading one entry, dropping it.
    pub iter_seek_read_drop: OpLatency,
    /// Creating an iterator bounded to one key's range.
    pub bounded_iter_create: OpLatency,
    /// A point get.
    pub get: OpLatency,
    /// The engine's own install timing (Strata only).
    pub install: Option<InstallFigures>,
    /// The error that ended the phase early, if one did.
    pub error: Option<String>,
    /// The invocation's parameters.
    pub params: Params,
}

/// What one size of one engine produced, before it is a record.
#[derive(Debug)]
pub struct SizeResult<'a> {
    /// The engine's short name.
    pub engine: &'static str,
    /// The size grown to.
    pub target_files: u64,
    /// The phase's driver.
    pub phase_name: &'static str,
    /// Files before the growth.
    pub files_before: u64,
    /// The growth.
    pub growth: Growth,
    /// The phase.
    pub phase: &'a PhaseOutcome,
    /// Versions installed during the phase.
    pub versions: u64,
    /// The engine's install timing over the phase.
    pub install: Option<InstallTiming>,
}

impl VersionsRecord {
    /// Builds the record of `r`.
    pub fn new(r: &SizeResult, params: &Params) -> VersionsRecord {
        let p = r.phase;
        let secs = p.duration.as_secs_f64().max(1e-9);
        let added = r.growth.files.saturating_sub(r.files_before).max(1);
        VersionsRecord {
            kind: "size",
            engine: r.engine,
            target_files: r.target_files,
            phase: r.phase_name,
            files_at_start: p.files[0],
            files_min: p.files[1],
            files_max: p.files[2],
            files_at_end: p.files[3],
            growth_seconds: r.growth.duration.as_secs_f64(),
            growth_keys: r.growth.keys,
            growth_seconds_per_1k_files: r.growth.duration.as_secs_f64() * 1000.0 / added as f64,
            seconds: p.duration.as_secs_f64(),
            reader_loops: p.reader_loops,
            writer_keys: p.writer_keys,
            versions_installed: r.versions,
            versions_per_sec: r.versions as f64 / secs,
            snapshot: OpLatency::of(&p.ops.snapshot),
            iter_create: OpLatency::of(&p.ops.iter_create),
            iter_seek_read_drop: OpLatency::of(&p.ops.iter_seek_read),
            bounded_iter_create: OpLatency::of(&p.ops.bounded_iter_create),
            get: OpLatency::of(&p.ops.get),
            install: r.install.as_ref().map(InstallFigures::of),
            error: p.error.clone(),
            params: params.clone(),
        }
    }
}

/// A row of the table that reads one latency of a record.
type OpRow = (&'static str, fn(&VersionsRecord) -> &OpLatency);
/// A row of the table that reads one of Strata's install timings.
type InstallRow = (&'static str, fn(&InstallFigures) -> &TimeFigures);

/// The table of one size: a column per engine, a row per figure.
pub fn table(records: &[&VersionsRecord]) -> Table {
    let title = match records[0].phase {
        super::phase::CHURN => format!("{} files", fmt_count(records[0].target_files)),
        phase => format!("{} files, {phase}", fmt_count(records[0].target_files)),
    };
    let mut t =
        Table::new(std::iter::once(title).chain(records.iter().map(|r| r.engine.to_string())));
    let mut row = |name: &str, cell: &dyn Fn(&VersionsRecord) -> String| {
        t.row(std::iter::once(name.to_string()).chain(records.iter().map(|r| cell(r))));
    };
    let f1 = |v: f64| format!("{v:.1}");
    let us = |v: f64| {
        if v < 10.0 {
            format!("{v:.2}")
        } else {
            fmt_count(v.round() as u64)
        }
    };
    row("live files (start/min/max/end)", &|r| {
        [r.files_at_start, r.files_min, r.files_max, r.files_at_end]
            .map(fmt_count)
            .join("/")
    });
    row("growth s (per 1k files)", &|r| {
        format!(
            "{} ({})",
            f1(r.growth_seconds),
            f1(r.growth_seconds_per_1k_files)
        )
    });
    row("versions installed (/s)", &|r| {
        format!(
            "{} ({})",
            fmt_count(r.versions_installed),
            f1(r.versions_per_sec)
        )
    });
    row("writer keys", &|r| fmt_count(r.writer_keys));
    row("reader loops", &|r| fmt_count(r.reader_loops));
    let ops: [OpRow; 5] = [
        ("snapshot", |r| &r.snapshot),
        ("iterator create", |r| &r.iter_create),
        ("iterator seek+read+drop", |r| &r.iter_seek_read_drop),
        ("bounded iterator create", |r| &r.bounded_iter_create),
        ("get", |r| &r.get),
    ];
    for (name, op) in ops {
        row(&format!("{name} us p50/p99/p99.9/max"), &|r| {
            let o = op(r);
            format!(
                "{}/{}/{}/{}",
                us(o.p50_us),
                us(o.p99_us),
                us(o.p999_us),
                us(o.max_us)
            )
        });
        row(
            &format!("{name} not preempted: share p99/p99.9/max"),
            &|r| {
                let o = op(r);
                format!(
                    "{:.1}%/{}/{}/{}",
                    100.0 * o.own_count as f64 / o.count.max(1) as f64,
                    us(o.own_p99_us),
                    us(o.own_p999_us),
                    us(o.own_max_us)
                )
            },
        );
        row(
            &format!("{name} >= 1 ms (not preempted; of them blocked)"),
            &|r| {
                format!(
                    "{} ({}; {})",
                    fmt_count(op(r).over_1ms),
                    fmt_count(op(r).over_1ms_unpreempted),
                    fmt_count(op(r).over_1ms_unpreempted_blocked)
                )
            },
        );
    }
    let parts: [InstallRow; 6] = [
        ("install lock held", |i| &i.lock_held),
        ("install lock held, not preempted", |i| {
            &i.lock_held_unpreempted
        }),
        ("version build (under lock)", |i| &i.version_build),
        ("manifest append (under lock)", |i| &i.persist),
        ("manifest sync (after the lock)", |i| &i.durable),
        ("install lock wait", |i| &i.lock_wait),
    ];
    if records.iter().any(|r| r.install.is_some()) {
        for (name, part) in parts {
            row(&format!("{name} us mean/p50/p99.9/max"), &|r| {
                or_na(r.install.as_ref(), |i| {
                    let f = part(i);
                    format!(
                        "{}/{}/{}/{}",
                        us(f.mean_us),
                        us(f.p50_us),
                        us(f.p999_us),
                        us(f.max_us)
                    )
                })
            });
        }
    }
    if records.iter().any(|r| r.error.is_some()) {
        row("error", &|r| r.error.clone().unwrap_or_default());
    }
    t
}
