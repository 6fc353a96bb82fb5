//! What `strata-bench lsm` reports: one record per engine, workload and run
//! (one JSON line each with `--json`), the median of the runs, and a table
//! per workload with a column per engine and `strata/<peer>` ratios.

use std::collections::BTreeMap;

use serde::Serialize;

use super::engine::KvSettings;
use crate::report::{fmt_count, fmt_rate, median, or_na, ratio_cells, RatioOf, Table};
use crate::units::fmt_bytes;

/// The parameters of the invocation, echoed into every JSON record so a
/// record read alone says what it measured.
#[derive(Debug, Clone, Serialize)]
pub struct Params {
    /// Keys in the key space.
    pub keys: u64,
    /// Bytes of a key.
    pub key_bytes: usize,
    /// Value lengths: "1024 B", "100..=200 B uniform".
    pub value_bytes: String,
    /// Threads (readers of readwhilewriting).
    pub threads: usize,
    /// Keys per write batch.
    pub batch_keys: usize,
    /// Writes synced.
    pub sync: bool,
    /// Writes logged.
    pub wal: bool,
    /// Entries read per seek.
    pub scan_length: u64,
    /// The settings every engine was opened with.
    pub settings: KvSettings,
}

/// One engine's results for one workload of one run (or their median).
#[derive(Debug, Clone, Serialize)]
pub struct LsmRecord {
    /// "run" or "median".
    pub kind: &'static str,
    /// The engine's short name.
    pub engine: &'static str,
    /// The workload's name.
    pub workload: &'static str,
    /// 1-based run; 0 for the median.
    pub run: usize,
    /// Runs in the invocation.
    pub runs: usize,
    /// The invocation's parameters.
    pub params: Params,
    /// Operations: keys written or deleted, reads, seeks, entries scanned.
    pub ops: u64,
    /// Seconds of the workload itself (settling not included).
    pub seconds: f64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// User (key + value) bytes written or read per second, in MB/s.
    pub mb_per_sec: f64,
    /// Latency of one call, in microseconds (none for `scan`).
    pub latency_us_p50: Option<u64>,
    /// 99th percentile.
    pub latency_us_p99: Option<u64>,
    /// 99.9th percentile.
    pub latency_us_p999: Option<u64>,
    /// The slowest call: for writes, the worst pause a writer saw.
    pub latency_us_max: Option<u64>,
    /// Reads that found their key over reads (read workloads).
    pub hit_ratio: Option<f64>,
    /// Entries a seek read on average (seekrandom).
    pub entries_per_seek: Option<f64>,
    /// Keys per second the writer of readwhilewriting wrote.
    pub background_writes_per_sec: Option<f64>,
    /// Bytes the process sent to the device during the workload and its
    /// settling (`/proc/self/io`).
    pub device_write_bytes: Option<u64>,
    /// User bytes the workload wrote (puts only).
    pub user_bytes_written: Option<u64>,
    /// Device bytes written over user bytes written (write workloads).
    pub write_amplification: Option<f64>,
    /// Seconds the flush and the compactions took to settle afterwards.
    pub settle_seconds: Option<f64>,
    /// Bytes of the engine's directory once settled.
    pub disk_bytes: Option<u64>,
    /// The same by kind of file (extension or name: `sst`, `blob`,
    /// `MANIFEST`), to trace a space gap to the files that hold it.
    pub disk_bytes_by_kind: Option<BTreeMap<String, u64>>,
    /// Key + value bytes of the live keys.
    pub live_user_bytes: Option<u64>,
    /// Disk bytes over live user bytes (write workloads).
    pub space_amplification: Option<f64>,
    /// Time writers were stalled or slowed by the engine, in ms (where the
    /// engine reports it).
    pub stall_ms: Option<f64>,
    /// Peak resident memory of the process during the workload.
    pub peak_rss_bytes: Option<u64>,
    /// CPU seconds of the process during the workload and its settling.
    pub cpu_seconds: Option<f64>,
    /// Bytes compactions wrote during the workload and its settling, by
    /// the level written to (write workloads, where the engine reports it).
    pub compaction_bytes_by_level: Option<Vec<u64>>,
    /// Why a figure is missing (a skipped cold read).
    pub note: Option<String>,
}

/// Returns the record whose every figure is the median of that figure over
/// `records` (all of one engine and workload).
pub fn median_record(records: &[LsmRecord]) -> LsmRecord {
    let first = &records[0];
    let f =
        |get: &dyn Fn(&LsmRecord) -> f64| median(records.iter().map(get).collect()).unwrap_or(0.0);
    let of =
        |get: &dyn Fn(&LsmRecord) -> Option<f64>| median(records.iter().filter_map(get).collect());
    let ou = |get: &dyn Fn(&LsmRecord) -> Option<u64>| {
        of(&|r| get(r).map(|v| v as f64)).map(|v| v.round() as u64)
    };
    LsmRecord {
        kind: "median",
        engine: first.engine,
        workload: first.workload,
        run: 0,
        runs: records.len(),
        params: first.params.clone(),
        ops: f(&|r| r.ops as f64).round() as u64,
        seconds: f(&|r| r.seconds),
        ops_per_sec: f(&|r| r.ops_per_sec),
        mb_per_sec: f(&|r| r.mb_per_sec),
        latency_us_p50: ou(&|r| r.latency_us_p50),
        latency_us_p99: ou(&|r| r.latency_us_p99),
        latency_us_p999: ou(&|r| r.latency_us_p999),
        latency_us_max: ou(&|r| r.latency_us_max),
        hit_ratio: of(&|r| r.hit_ratio),
        entries_per_seek: of(&|r| r.entries_per_seek),
        background_writes_per_sec: of(&|r| r.background_writes_per_sec),
        device_write_bytes: ou(&|r| r.device_write_bytes),
        user_bytes_written: ou(&|r| r.user_bytes_written),
        write_amplification: of(&|r| r.write_amplification),
        settle_seconds: of(&|r| r.settle_seconds),
        disk_bytes: ou(&|r| r.disk_bytes),
        disk_bytes_by_kind: median_by_kind(records),
        live_user_bytes: ou(&|r| r.live_user_bytes),
        space_amplification: of(&|r| r.space_amplification),
        stall_ms: of(&|r| r.stall_ms),
        peak_rss_bytes: ou(&|r| r.peak_rss_bytes),
        cpu_seconds: of(&|r| r.cpu_seconds),
        compaction_bytes_by_level: median_by_level(records),
        note: records.iter().find_map(|r| r.note.clone()),
    }
}

/// Each kind's median over the runs that report a breakdown (0 in a run
/// without that kind of file).
fn median_by_kind(records: &[LsmRecord]) -> Option<BTreeMap<String, u64>> {
    let reported: Vec<&BTreeMap<String, u64>> = records
        .iter()
        .filter_map(|r| r.disk_bytes_by_kind.as_ref())
        .collect();
    if reported.is_empty() {
        return None;
    }
    let kinds: std::collections::BTreeSet<&String> =
        reported.iter().flat_map(|m| m.keys()).collect();
    let median_of = |kind: &String| {
        let values = reported
            .iter()
            .map(|m| m.get(kind).copied().unwrap_or(0) as f64);
        median(values.collect()).map_or(0, |m| m.round() as u64)
    };
    Some(
        kinds
            .into_iter()
            .map(|k| (k.clone(), median_of(k)))
            .collect(),
    )
}

/// The median of each level's bytes over the records that report them.
fn median_by_level(records: &[LsmRecord]) -> Option<Vec<u64>> {
    let reported: Vec<&Vec<u64>> = records
        .iter()
        .filter_map(|r| r.compaction_bytes_by_level.as_ref())
        .collect();
    let levels = reported.iter().map(|v| v.len()).max()?;
    let level = |l: usize| {
        let values = reported
            .iter()
            .map(|v| v.get(l).copied().unwrap_or(0) as f64);
        median(values.collect()).map_or(0, |m| m.round() as u64)
    };
    Some((0..levels).map(level).collect())
}

/// One workload's table: a column per engine, one row per figure, then a
/// `strata/<peer>` column per peer on the rows where a ratio means something
/// (above 1 is Strata higher: better for rates, worse for latency,
/// amplification, stalls, memory and CPU).
pub fn table(records: &[&LsmRecord], runs: usize) -> Table {
    let title = if runs > 1 {
        format!("{} (median of {runs} runs)", records[0].workload)
    } else {
        records[0].workload.to_string()
    };
    let strata = records.iter().copied().find(|r| r.engine == "strata");
    let peers: Vec<&LsmRecord> = match strata {
        Some(_) => records
            .iter()
            .copied()
            .filter(|r| r.engine != "strata")
            .collect(),
        None => Vec::new(),
    };
    let mut t = Table::new(
        std::iter::once(title)
            .chain(records.iter().map(|r| r.engine.to_string()))
            .chain(peers.iter().map(|p| format!("strata/{}", p.engine))),
    );
    let mut row = |name: &str, cell: &dyn Fn(&LsmRecord) -> String, ratio: RatioOf<LsmRecord>| {
        let ratios = ratio_cells(strata, &peers, ratio);
        t.row(
            std::iter::once(name.to_string())
                .chain(records.iter().map(|r| cell(r)))
                .chain(ratios),
        );
    };
    let f2 = |v: f64| format!("{v:.2}");
    row("ops", &|r| fmt_count(r.ops), None);
    row(
        "ops/s",
        &|r| fmt_rate(r.ops_per_sec),
        Some(&|r| Some(r.ops_per_sec)),
    );
    row(
        "MB/s (user bytes)",
        &|r| fmt_rate(r.mb_per_sec),
        Some(&|r| Some(r.mb_per_sec)),
    );
    let us = |v: Option<u64>| or_na(v, fmt_count);
    row(
        "latency p50 (us)",
        &|r| us(r.latency_us_p50),
        Some(&|r| r.latency_us_p50.map(|v| v as f64)),
    );
    row(
        "latency p99 (us)",
        &|r| us(r.latency_us_p99),
        Some(&|r| r.latency_us_p99.map(|v| v as f64)),
    );
    row(
        "latency p99.9 (us)",
        &|r| us(r.latency_us_p999),
        Some(&|r| r.latency_us_p999.map(|v| v as f64)),
    );
    row(
        "latency max (us)",
        &|r| us(r.latency_us_max),
        Some(&|r| r.latency_us_max.map(|v| v as f64)),
    );
    if records.iter().any(|r| r.hit_ratio.is_some()) {
        row(
            "hit ratio",
            &|r| or_na(r.hit_ratio, |v| format!("{:.1}%", 100.0 * v)),
            None,
        );
    }
    if records.iter().any(|r| r.entries_per_seek.is_some()) {
        row(
            "entries per seek",
            &|r| or_na(r.entries_per_seek, |v| format!("{v:.1}")),
            None,
        );
    }
    if records
        .iter()
        .any(|r| r.background_writes_per_sec.is_some())
    {
        row(
            "writer keys/s",
            &|r| or_na(r.background_writes_per_sec, fmt_rate),
            Some(&|r| r.background_writes_per_sec),
        );
    }
    row(
        "device bytes written",
        &|r| or_na(r.device_write_bytes, fmt_bytes),
        None,
    );
    row(
        "write amplification",
        &|r| or_na(r.write_amplification, f2),
        Some(&|r| r.write_amplification),
    );
    row("settle time (s)", &|r| or_na(r.settle_seconds, f2), None);
    row("bytes on disk", &|r| or_na(r.disk_bytes, fmt_bytes), None);
    row(
        "live user bytes",
        &|r| or_na(r.live_user_bytes, fmt_bytes),
        None,
    );
    row(
        "space amplification",
        &|r| or_na(r.space_amplification, f2),
        Some(&|r| r.space_amplification),
    );
    row(
        "write stall (ms)",
        &|r| or_na(r.stall_ms, |v| format!("{v:.1}")),
        Some(&|r| r.stall_ms),
    );
    row(
        "peak RSS",
        &|r| or_na(r.peak_rss_bytes, fmt_bytes),
        Some(&|r| r.peak_rss_bytes.map(|v| v as f64)),
    );
    row(
        "CPU seconds",
        &|r| or_na(r.cpu_seconds, f2),
        Some(&|r| r.cpu_seconds),
    );
    t
}
