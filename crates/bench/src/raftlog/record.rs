//! The records of `strata-bench raftlog`: one run's results (JSON and the
//! table row), the medians of several runs, and the comparison table.

use std::time::Duration;

use serde::Serialize;

use crate::engines::EngineKind;
use crate::report::{fmt_count, fmt_rate, median, or_na, ratio_cells, RatioOf, Table};
use crate::units::fmt_bytes;

/// The workload's parameters, echoed into every JSON record.
#[derive(Debug, Clone, Serialize)]
pub(super) struct WorkloadEcho {
    pub(super) preset: Option<String>,
    pub(super) groups: u64,
    pub(super) groups_per_batch: usize,
    pub(super) entries_per_group: usize,
    pub(super) entry_bytes_min: usize,
    pub(super) entry_bytes_max: usize,
    /// How entry lengths spread: "64 B", "64..=65536 B log-uniform".
    pub(super) entry_bytes: String,
    pub(super) group_skew: String,
    pub(super) writers: usize,
    pub(super) sync: bool,
    pub(super) compact_lag: u64,
    pub(super) purge_interval_ms: u64,
    pub(super) force_compact: bool,
    pub(super) compression: bool,
    pub(super) stop: String,
}

/// One run's results (or the median of several).
#[derive(Debug, Clone, Serialize)]
pub(super) struct RunRecord {
    /// "run" or "median".
    pub(super) kind: &'static str,
    pub(super) engine: &'static str,
    /// 1-based run number; 0 for the median.
    pub(super) run: usize,
    pub(super) runs: usize,
    pub(super) workload: WorkloadEcho,
    pub(super) seconds: f64,
    pub(super) writes: u64,
    pub(super) entries: u64,
    pub(super) payload_bytes: u64,
    pub(super) writes_per_sec: f64,
    pub(super) payload_mb_per_sec: f64,
    pub(super) latency_us_p50: u64,
    pub(super) latency_us_p99: u64,
    pub(super) latency_us_p999: u64,
    pub(super) latency_us_p9999: u64,
    pub(super) latency_us_max: u64,
    pub(super) fsyncs: Option<u64>,
    pub(super) fsyncs_per_write: Option<f64>,
    pub(super) device_write_bytes: Option<u64>,
    pub(super) device_write_amplification: Option<f64>,
    pub(super) engine_write_amplification: Option<f64>,
    pub(super) peak_rss_bytes: Option<u64>,
    pub(super) cpu_seconds: Option<f64>,
    pub(super) purges: u64,
    /// Median time of one purge call, in milliseconds (none without purges).
    pub(super) purge_ms_p50: Option<f64>,
    /// Longest purge call, in milliseconds.
    pub(super) purge_ms_max: Option<f64>,
    pub(super) files_purged: u64,
    pub(super) entries_rewritten: u64,
    /// Groups compacted because a purge named them.
    pub(super) groups_force_compacted: u64,
    /// Device bytes written per second, in MB/s.
    pub(super) device_mb_per_sec: Option<f64>,
    /// The disk probe's flush size for this engine (medians only).
    pub(super) probe_bytes_per_flush: Option<u64>,
    /// What the probe sustained at that flush size, in MB/s (medians only).
    pub(super) disk_limit_mb_per_sec: Option<f64>,
    /// `device_mb_per_sec` as a percentage of `disk_limit_mb_per_sec`.
    pub(super) device_pct_of_disk_limit: Option<f64>,
    /// `payload_mb_per_sec` as a percentage of `disk_limit_mb_per_sec`.
    pub(super) payload_pct_of_disk_limit: Option<f64>,
}

impl RunRecord {
    pub(super) fn set_disk_limit(&mut self, bytes_per_flush: u64, limit_mb_per_sec: f64) {
        self.probe_bytes_per_flush = Some(bytes_per_flush);
        self.disk_limit_mb_per_sec = Some(limit_mb_per_sec);
        let pct = |v: f64| (limit_mb_per_sec > 0.0).then(|| 100.0 * v / limit_mb_per_sec);
        self.device_pct_of_disk_limit = self.device_mb_per_sec.and_then(pct);
        self.payload_pct_of_disk_limit = pct(self.payload_mb_per_sec);
    }
}

pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Returns the record whose every field is the median of that field over
/// `records`.
pub(super) fn median_record(records: &[RunRecord]) -> RunRecord {
    if records.len() == 1 {
        return RunRecord {
            kind: "median",
            run: 0,
            ..records[0].clone()
        };
    }
    let f =
        |get: &dyn Fn(&RunRecord) -> f64| median(records.iter().map(get).collect()).unwrap_or(0.0);
    let u = |get: &dyn Fn(&RunRecord) -> u64| f(&|r| get(r) as f64).round() as u64;
    let of =
        |get: &dyn Fn(&RunRecord) -> Option<f64>| median(records.iter().filter_map(get).collect());
    let ou = |get: &dyn Fn(&RunRecord) -> Option<u64>| {
        of(&|r| get(r).map(|v| v as f64)).map(|v| v.round() as u64)
    };
    RunRecord {
        kind: "median",
        engine: records[0].engine,
        run: 0,
        runs: records.len(),
        workload: records[0].workload.clone(),
        seconds: f(&|r| r.seconds),
        writes: u(&|r| r.writes),
        entries: u(&|r| r.entries),
        payload_bytes: u(&|r| r.payload_bytes),
        writes_per_sec: f(&|r| r.writes_per_sec),
        payload_mb_per_sec: f(&|r| r.payload_mb_per_sec),
        latency_us_p50: u(&|r| r.latency_us_p50),
        latency_us_p99: u(&|r| r.latency_us_p99),
        latency_us_p999: u(&|r| r.latency_us_p999),
        latency_us_p9999: u(&|r| r.latency_us_p9999),
        latency_us_max: u(&|r| r.latency_us_max),
        fsyncs: ou(&|r| r.fsyncs),
        fsyncs_per_write: of(&|r| r.fsyncs_per_write),
        device_write_bytes: ou(&|r| r.device_write_bytes),
        device_write_amplification: of(&|r| r.device_write_amplification),
        engine_write_amplification: of(&|r| r.engine_write_amplification),
        peak_rss_bytes: ou(&|r| r.peak_rss_bytes),
        cpu_seconds: of(&|r| r.cpu_seconds),
        purges: u(&|r| r.purges),
        purge_ms_p50: of(&|r| r.purge_ms_p50),
        purge_ms_max: of(&|r| r.purge_ms_max),
        files_purged: u(&|r| r.files_purged),
        entries_rewritten: u(&|r| r.entries_rewritten),
        groups_force_compacted: u(&|r| r.groups_force_compacted),
        device_mb_per_sec: of(&|r| r.device_mb_per_sec),
        probe_bytes_per_flush: None,
        disk_limit_mb_per_sec: None,
        device_pct_of_disk_limit: None,
        payload_pct_of_disk_limit: None,
    }
}

/// One column per engine, one row per metric; then, when Strata ran beside
/// peers, one `strata/<peer>` column per peer on the rows where a ratio means
/// something (above 1 is Strata higher: better for rates, worse for latency
/// and write amplification).
pub(super) fn table(records: &[RunRecord], runs: usize) -> Table {
    let title = if runs > 1 {
        format!("metric (median of {runs} runs)")
    } else {
        "metric".to_string()
    };
    let strata = records
        .iter()
        .find(|r| r.engine == EngineKind::Strata.name());
    let peers: Vec<&RunRecord> = match strata {
        Some(_) => records
            .iter()
            .filter(|r| r.engine != EngineKind::Strata.name())
            .collect(),
        None => Vec::new(),
    };
    let mut t = Table::new(
        std::iter::once(title)
            .chain(records.iter().map(|r| r.engine.to_string()))
            .chain(peers.iter().map(|p| format!("strata/{}", p.engine))),
    );
    let mut row = |name: &str, cell: &dyn Fn(&RunRecord) -> String, ratio: RatioOf<RunRecord>| {
        let ratios = ratio_cells(strata, &peers, ratio);
        t.row(
            std::iter::once(name.to_string())
                .chain(records.iter().map(cell))
                .chain(ratios),
        );
    };
    row("writes (batches)", &|r| fmt_count(r.writes), None);
    row(
        "writes/s",
        &|r| fmt_rate(r.writes_per_sec),
        Some(&|r| Some(r.writes_per_sec)),
    );
    row(
        "payload MB/s",
        &|r| fmt_rate(r.payload_mb_per_sec),
        Some(&|r| Some(r.payload_mb_per_sec)),
    );
    row(
        "latency p50 (us)",
        &|r| fmt_count(r.latency_us_p50),
        Some(&|r| Some(r.latency_us_p50 as f64)),
    );
    row(
        "latency p99 (us)",
        &|r| fmt_count(r.latency_us_p99),
        Some(&|r| Some(r.latency_us_p99 as f64)),
    );
    row(
        "latency p99.9 (us)",
        &|r| fmt_count(r.latency_us_p999),
        Some(&|r| Some(r.latency_us_p999 as f64)),
    );
    row(
        "latency p99.99 (us)",
        &|r| fmt_count(r.latency_us_p9999),
        Some(&|r| Some(r.latency_us_p9999 as f64)),
    );
    row("latency max (us)", &|r| fmt_count(r.latency_us_max), None);
    row(
        "device MB/s",
        &|r| or_na(r.device_mb_per_sec, fmt_rate),
        Some(&|r| r.device_mb_per_sec),
    );
    row(
        "device write amp",
        &|r| or_na(r.device_write_amplification, |v| format!("{v:.2}")),
        Some(&|r| r.device_write_amplification),
    );
    row(
        "engine write amp",
        &|r| or_na(r.engine_write_amplification, |v| format!("{v:.2}")),
        Some(&|r| r.engine_write_amplification),
    );
    row("fsyncs", &|r| or_na(r.fsyncs, fmt_count), None);
    row(
        "fsyncs per write",
        &|r| or_na(r.fsyncs_per_write, |v| format!("{v:.2}")),
        None,
    );
    row("peak RSS", &|r| or_na(r.peak_rss_bytes, fmt_bytes), None);
    row(
        "CPU seconds",
        &|r| or_na(r.cpu_seconds, |v| format!("{v:.2}")),
        None,
    );
    row(
        "purges / files purged",
        &|r| format!("{} / {}", r.purges, r.files_purged),
        None,
    );
    row(
        "purge time p50 (ms)",
        &|r| or_na(r.purge_ms_p50, |v| format!("{v:.2}")),
        Some(&|r| r.purge_ms_p50),
    );
    row(
        "purge time max (ms)",
        &|r| or_na(r.purge_ms_max, |v| format!("{v:.2}")),
        Some(&|r| r.purge_ms_max),
    );
    row(
        "entries rewritten",
        &|r| fmt_count(r.entries_rewritten),
        None,
    );
    row(
        "groups force-compacted",
        &|r| fmt_count(r.groups_force_compacted),
        None,
    );
    if records.iter().any(|r| r.disk_limit_mb_per_sec.is_some()) {
        row(
            "disk probe bytes per flush",
            &|r| or_na(r.probe_bytes_per_flush, fmt_bytes),
            None,
        );
        row(
            "disk limit MB/s at this flush size",
            &|r| or_na(r.disk_limit_mb_per_sec, fmt_rate),
            None,
        );
        row(
            "device MB/s / disk limit",
            &|r| or_na(r.device_pct_of_disk_limit, |v| format!("{v:.1}%")),
            None,
        );
        row(
            "payload MB/s / disk limit",
            &|r| or_na(r.payload_pct_of_disk_limit, |v| format!("{v:.1}%")),
            None,
        );
    }
    t
}
