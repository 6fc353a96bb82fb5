//! What `lsm-ingest` reports: one record per engine, phase and run (one
//! JSON line each with `--json`), their medians, and one table with, per
//! engine, a baseline column, an ingesting column and their ratio.
//!
//! The ratios `ingesting / baseline` of p99 and p99.99 are the acceptance
//! figures: at most [`ACCEPTANCE_RATIO`] for Strata. A run's ingesting
//! record carries its own run's ratios; a median record carries the ratios
//! of the medians, which are what the table shows.

use serde::Serialize;

use super::phase::PhaseOutcome;
use crate::lsm::engine::KvSettings;
use crate::report::{fmt_count, fmt_rate, median, or_na, RatioOf, Table};
use crate::units::{fmt_bytes, MB};

/// The largest `ingesting / baseline` ratio of write p99 and p99.99 that
/// shows ingestion does not stall the writers of other ranges.
pub const ACCEPTANCE_RATIO: f64 = 1.1;

/// The parameters of the invocation, echoed into every JSON record.
#[derive(Debug, Clone, Serialize)]
pub struct Params {
    /// Writer threads.
    pub writers: usize,
    /// Bytes of each key.
    pub key_bytes: usize,
    /// Bytes of each value.
    pub value_bytes: usize,
    /// Key and value bytes written into the writers' ranges before the
    /// phases.
    pub preload_bytes: u64,
    /// Keys of each writer's range.
    pub keys_per_writer: u64,
    /// Key and value bytes of each ingested file.
    pub ingest_file_bytes: u64,
    /// Seconds of each phase.
    pub seconds: f64,
    /// Puts synced.
    pub sync: bool,
    /// The settings every engine was opened with.
    pub settings: KvSettings,
}

/// One engine's results for one phase of one run (or their median).
#[derive(Debug, Clone, Serialize)]
pub struct IngestRecord {
    /// "run" or "median".
    pub kind: &'static str,
    /// The engine's short name.
    pub engine: &'static str,
    /// "baseline" or "ingesting".
    pub phase: &'static str,
    /// 1-based run; 0 for the median.
    pub run: usize,
    /// Runs in the invocation.
    pub runs: usize,
    /// The invocation's parameters.
    pub params: Params,
    /// Puts acknowledged.
    pub writes: u64,
    /// Seconds the writers ran.
    pub seconds: f64,
    /// Puts per second.
    pub writes_per_sec: f64,
    /// Key and value bytes put per second, in MB/s.
    pub write_mb_per_sec: f64,
    /// Latency of one put, in microseconds.
    pub latency_us_p50: u64,
    /// 99th percentile.
    pub latency_us_p99: u64,
    /// 99.9th percentile.
    pub latency_us_p999: u64,
    /// 99.99th percentile.
    pub latency_us_p9999: u64,
    /// The slowest put.
    pub latency_us_max: u64,
    /// Time writers were stalled or slowed down by the engine during the
    /// phase, in ms (Strata: its stop and slowdown counters; RocksDB: the
    /// `STALL_MICROS` ticker).
    pub stall_ms: Option<f64>,
    /// Files prepared for the phase (ingesting only).
    pub ingest_files_prepared: Option<u64>,
    /// Ingestion calls that returned (ingesting only).
    pub ingestions: Option<u64>,
    /// Key and value bytes ingested per second of the phase, in MB/s.
    pub ingest_mb_per_sec: Option<f64>,
    /// Latency of one ingestion call, in microseconds.
    pub ingest_latency_us_p50: Option<u64>,
    /// 99th percentile.
    pub ingest_latency_us_p99: Option<u64>,
    /// The slowest ingestion call.
    pub ingest_latency_us_max: Option<u64>,
    /// How long an ingestion alone held the visible seqno back, in
    /// microseconds, 99.99th percentile (Strata only).
    pub seqno_hold_us_p9999: Option<u64>,
    /// The longest hold.
    pub seqno_hold_us_max: Option<u64>,
    /// How long an ingestion's seqnos were allocated but unpublished
    /// (the hold and the wait for earlier writes in flight), p99.99.
    pub seqno_reserved_us_p9999: Option<u64>,
    /// The longest reservation.
    pub seqno_reserved_us_max: Option<u64>,
    /// Write p99 of this phase over the baseline's (ingesting only).
    pub p99_ratio: Option<f64>,
    /// Write p99.99 of this phase over the baseline's (ingesting only).
    pub p9999_ratio: Option<f64>,
}

impl IngestRecord {
    /// The record of `m`, phase `phase` of run `run` of `engine`, the
    /// engine's stall time during it, and the files prepared for it.
    #[expect(clippy::too_many_arguments, reason = "one record's sources, once")]
    pub fn of(
        engine: &'static str,
        phase: &'static str,
        run: usize,
        runs: usize,
        params: &Params,
        m: &PhaseOutcome,
        stall_ms: Option<f64>,
        files_prepared: Option<u64>,
    ) -> IngestRecord {
        let secs = m.duration.as_secs_f64().max(1e-9);
        let q = |h: &hdrhistogram::Histogram<u64>, q: f64| h.value_at_quantile(q);
        let ingesting = files_prepared.is_some();
        let some = |h: &hdrhistogram::Histogram<u64>, v: f64| {
            (ingesting && !h.is_empty()).then(|| if v >= 1.0 { h.max() } else { q(h, v) })
        };
        IngestRecord {
            kind: "run",
            engine,
            phase,
            run,
            runs,
            params: params.clone(),
            writes: m.writes,
            seconds: m.duration.as_secs_f64(),
            writes_per_sec: m.writes as f64 / secs,
            write_mb_per_sec: (m.writes * (params.key_bytes + params.value_bytes) as u64) as f64
                / MB
                / secs,
            latency_us_p50: q(&m.write_latency_us, 0.5),
            latency_us_p99: q(&m.write_latency_us, 0.99),
            latency_us_p999: q(&m.write_latency_us, 0.999),
            latency_us_p9999: q(&m.write_latency_us, 0.9999),
            latency_us_max: m.write_latency_us.max(),
            stall_ms,
            ingest_files_prepared: files_prepared,
            ingestions: ingesting.then_some(m.ingestions),
            ingest_mb_per_sec: ingesting.then(|| m.ingested_user_bytes as f64 / MB / secs),
            ingest_latency_us_p50: some(&m.ingest_latency_us, 0.5),
            ingest_latency_us_p99: some(&m.ingest_latency_us, 0.99),
            ingest_latency_us_max: some(&m.ingest_latency_us, 1.0),
            seqno_hold_us_p9999: some(&m.seqno_hold_us, 0.9999),
            seqno_hold_us_max: some(&m.seqno_hold_us, 1.0),
            seqno_reserved_us_p9999: some(&m.seqno_reserved_us, 0.9999),
            seqno_reserved_us_max: some(&m.seqno_reserved_us, 1.0),
            p99_ratio: None,
            p9999_ratio: None,
        }
    }

    /// Sets the ratios of this (ingesting) record over `baseline`.
    pub fn set_ratios(&mut self, baseline: &IngestRecord) {
        let r = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
        self.p99_ratio = r(self.latency_us_p99, baseline.latency_us_p99);
        self.p9999_ratio = r(self.latency_us_p9999, baseline.latency_us_p9999);
    }
}

/// Returns the record whose every figure is the median of that figure over
/// `records` (all of one engine and phase); ratios are left unset.
pub fn median_record(records: &[IngestRecord]) -> IngestRecord {
    let first = &records[0];
    let f = |get: &dyn Fn(&IngestRecord) -> f64| {
        median(records.iter().map(get).collect()).unwrap_or(0.0)
    };
    let u = |get: &dyn Fn(&IngestRecord) -> u64| f(&|r| get(r) as f64).round() as u64;
    let of = |get: &dyn Fn(&IngestRecord) -> Option<f64>| {
        median(records.iter().filter_map(get).collect())
    };
    let ou = |get: &dyn Fn(&IngestRecord) -> Option<u64>| {
        of(&|r| get(r).map(|v| v as f64)).map(|v| v.round() as u64)
    };
    IngestRecord {
        kind: "median",
        engine: first.engine,
        phase: first.phase,
        run: 0,
        runs: records.len(),
        params: first.params.clone(),
        writes: u(&|r| r.writes),
        seconds: f(&|r| r.seconds),
        writes_per_sec: f(&|r| r.writes_per_sec),
        write_mb_per_sec: f(&|r| r.write_mb_per_sec),
        latency_us_p50: u(&|r| r.latency_us_p50),
        latency_us_p99: u(&|r| r.latency_us_p99),
        latency_us_p999: u(&|r| r.latency_us_p999),
        latency_us_p9999: u(&|r| r.latency_us_p9999),
        latency_us_max: u(&|r| r.latency_us_max),
        stall_ms: of(&|r| r.stall_ms),
        ingest_files_prepared: ou(&|r| r.ingest_files_prepared),
        ingestions: ou(&|r| r.ingestions),
        ingest_mb_per_sec: of(&|r| r.ingest_mb_per_sec),
        ingest_latency_us_p50: ou(&|r| r.ingest_latency_us_p50),
        ingest_latency_us_p99: ou(&|r| r.ingest_latency_us_p99),
        ingest_latency_us_max: ou(&|r| r.ingest_latency_us_max),
        seqno_hold_us_p9999: ou(&|r| r.seqno_hold_us_p9999),
        seqno_hold_us_max: ou(&|r| r.seqno_hold_us_max),
        seqno_reserved_us_p9999: ou(&|r| r.seqno_reserved_us_p9999),
        seqno_reserved_us_max: ou(&|r| r.seqno_reserved_us_max),
        p99_ratio: None,
        p9999_ratio: None,
    }
}

/// One figure of a record, for a table row.
type Figure = fn(&IngestRecord) -> u64;

/// The comparison table: for each engine, given as `(baseline,
/// ingesting)`, its two columns and an `ingesting/baseline` column on the
/// rows where a ratio means something (above 1: higher while ingesting).
pub fn table(pairs: &[(&IngestRecord, &IngestRecord)], runs: usize) -> Table {
    let title = if runs > 1 {
        format!("lsm-ingest (median of {runs} runs)")
    } else {
        "lsm-ingest".to_string()
    };
    let mut header = vec![title];
    for (b, _) in pairs {
        header.push(format!("{} baseline", b.engine));
        header.push(format!("{} ingesting", b.engine));
        header.push("ingesting/baseline".to_string());
    }
    let mut t = Table::new(header);
    let mut row =
        |name: &str, cell: &dyn Fn(&IngestRecord) -> String, ratio: RatioOf<IngestRecord>| {
            let mut cells = vec![name.to_string()];
            for (b, i) in pairs {
                cells.push(cell(b));
                cells.push(cell(i));
                cells.push(match ratio.map(|f| (f(b), f(i))) {
                    Some((Some(x), Some(y))) if x > 0.0 => format!("{:.2}x", y / x),
                    Some(_) => "n/a".to_string(),
                    None => String::new(),
                });
            }
            t.row(cells);
        };
    let ous = |v: Option<u64>| or_na(v, fmt_count);
    row("writes", &|r| fmt_count(r.writes), None);
    row(
        "writes/s",
        &|r| fmt_rate(r.writes_per_sec),
        Some(&|r| Some(r.writes_per_sec)),
    );
    row(
        "write MB/s",
        &|r| fmt_rate(r.write_mb_per_sec),
        Some(&|r| Some(r.write_mb_per_sec)),
    );
    let lat: [(&str, Figure); 5] = [
        ("write p50 (us)", |r| r.latency_us_p50),
        ("write p99 (us)", |r| r.latency_us_p99),
        ("write p99.9 (us)", |r| r.latency_us_p999),
        ("write p99.99 (us)", |r| r.latency_us_p9999),
        ("write max (us)", |r| r.latency_us_max),
    ];
    for (name, get) in lat {
        row(name, &|r| fmt_count(get(r)), Some(&|r| Some(get(r) as f64)));
    }
    row(
        "write stall (ms)",
        &|r| or_na(r.stall_ms, |v| format!("{v:.1}")),
        None,
    );
    row("files prepared", &|r| ous(r.ingest_files_prepared), None);
    row("ingestions", &|r| ous(r.ingestions), None);
    row(
        "ingested MB/s",
        &|r| or_na(r.ingest_mb_per_sec, fmt_rate),
        None,
    );
    row("ingest p50 (us)", &|r| ous(r.ingest_latency_us_p50), None);
    row("ingest p99 (us)", &|r| ous(r.ingest_latency_us_p99), None);
    row("ingest max (us)", &|r| ous(r.ingest_latency_us_max), None);
    row(
        "seqno hold p99.99 (us)",
        &|r| ous(r.seqno_hold_us_p9999),
        None,
    );
    row("seqno hold max (us)", &|r| ous(r.seqno_hold_us_max), None);
    row(
        "seqno reserved p99.99 (us)",
        &|r| ous(r.seqno_reserved_us_p9999),
        None,
    );
    row(
        "seqno reserved max (us)",
        &|r| ous(r.seqno_reserved_us_max),
        None,
    );
    t
}

/// One line per engine: its p99 and p99.99 ratios against
/// [`ACCEPTANCE_RATIO`].
pub fn verdict(ingesting: &IngestRecord) -> String {
    let fmt = |v: Option<f64>| or_na(v, |v| format!("{v:.2}x"));
    let within = [ingesting.p99_ratio, ingesting.p9999_ratio]
        .iter()
        .all(|r| r.is_some_and(|v| v <= ACCEPTANCE_RATIO));
    format!(
        "{}: write latency ingesting/baseline p99 {}, p99.99 {} ({} {ACCEPTANCE_RATIO:.1}x){}",
        ingesting.engine,
        fmt(ingesting.p99_ratio),
        fmt(ingesting.p9999_ratio),
        if within { "within" } else { "NOT within" },
        match ingesting.ingest_files_prepared.zip(ingesting.ingestions) {
            Some((p, d)) if d < p => format!("; {d} of {p} files ingested before the phase ended"),
            _ => String::new(),
        }
    )
}

/// A one-line summary of a run's record, for the text output.
pub fn run_line(r: &IngestRecord) -> String {
    let ingest = match (r.ingestions, r.ingest_mb_per_sec) {
        (Some(n), Some(mb)) => format!(", {n} ingestions, {} MB/s ingested", fmt_rate(mb)),
        _ => String::new(),
    };
    format!(
        "{} run {}/{}: {:<9} {:>8} writes/s  p99 {} us  p99.99 {} us  max {} us{ingest}",
        r.engine,
        r.run,
        r.runs,
        r.phase,
        fmt_rate(r.writes_per_sec),
        fmt_count(r.latency_us_p99),
        fmt_count(r.latency_us_p9999),
        fmt_count(r.latency_us_max),
    )
}

/// The settings line printed before the runs.
pub fn header(p: &Params, engines: &str) -> String {
    format!(
        "lsm-ingest: {engines}; {} writers over {} keys each ({} preloaded), keys {} B, values \
         {} B, sync {}; files of {} ingested with move_files; {} s per phase; memtable {}, \
         cache {}, {} background threads",
        p.writers,
        fmt_count(p.keys_per_writer),
        fmt_bytes(p.preload_bytes),
        p.key_bytes,
        p.value_bytes,
        if p.sync { "on" } else { "off" },
        fmt_bytes(p.ingest_file_bytes),
        p.seconds,
        fmt_bytes(p.settings.write_buffer_bytes),
        fmt_bytes(p.settings.block_cache_bytes),
        p.settings.background_threads,
    )
}
