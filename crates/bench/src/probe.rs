//! `strata-bench disk-probe`: the physical limit an engine's sync writes are
//! measured against. Writes `--bytes-per-flush` at a time, sequentially, into
//! a file whose blocks are already allocated and written (so no flush has to
//! update file-system metadata), and `fdatasync`s after each write, as a
//! raft log engine does after each group commit; prints flushes/s, MB/s and
//! flush latency.
//!
//! This is a device probe, not an engine: it uses `std::fs` directly on
//! purpose, so that nothing of Strata's own I/O layer sits between it and the
//! kernel.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::error::BenchError;
use crate::report::{fmt_count, fmt_duration, fmt_rate, Table};
use crate::runner::{latency_histogram, record_us};
use crate::units::{fmt_bytes, parse_bytes, MB};

/// Name of the probe's file inside `--dir`; removed when the probe ends.
pub const PROBE_FILE: &str = "disk-probe.dat";
/// Size of each write while the file is filled with zeros.
const FILL_CHUNK: usize = 1 << 20;

/// Arguments of `disk-probe`.
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// Bytes written before each fdatasync.
    #[arg(long, default_value = "16K", value_parser = parse_bytes)]
    bytes_per_flush: u64,
    /// How long to probe.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Size of the preallocated file; writes wrap around at its end.
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    file_bytes: u64,
    /// Directory for the probe's file (on the device to measure).
    #[arg(long, default_value = "./strata-data/probe")]
    dir: PathBuf,
}

/// What a probe measured.
#[derive(Debug, Clone)]
pub struct ProbeResult {
    /// Bytes written before each fdatasync.
    pub bytes_per_flush: u64,
    /// Write + fdatasync rounds done.
    pub flushes: u64,
    /// Time spent in them.
    pub duration: Duration,
    /// Latency of each round, in microseconds.
    pub latency_us: Histogram<u64>,
}

impl ProbeResult {
    /// Returns the rounds per second.
    pub fn flushes_per_sec(&self) -> f64 {
        self.flushes as f64 / self.duration.as_secs_f64().max(1e-9)
    }

    /// Returns the bytes written per second, in MB/s.
    pub fn mb_per_sec(&self) -> f64 {
        (self.flushes * self.bytes_per_flush) as f64 / MB / self.duration.as_secs_f64().max(1e-9)
    }
}

/// Runs the probe.
pub fn run(args: &ProbeArgs) -> Result<(), BenchError> {
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        return Err(BenchError::Usage("--seconds must be above 0".into()));
    }
    println!(
        "disk-probe: {} per write + fdatasync, for {:.1} s, into {} ({} preallocated)",
        fmt_bytes(args.bytes_per_flush),
        args.seconds,
        args.dir.join(PROBE_FILE).display(),
        fmt_bytes(args.file_bytes)
    );
    let r = measure(
        &args.dir,
        args.bytes_per_flush,
        args.file_bytes,
        Duration::from_secs_f64(args.seconds),
    )?;
    let us = |q: f64| fmt_duration(Duration::from_micros(r.latency_us.value_at_quantile(q)));
    let mut t = Table::new(["disk-probe", "value"]);
    t.row(["bytes per flush".to_string(), fmt_bytes(r.bytes_per_flush)]);
    t.row(["flushes".to_string(), fmt_count(r.flushes)]);
    t.row(["flushes/s".to_string(), fmt_rate(r.flushes_per_sec())]);
    t.row(["MB/s".to_string(), fmt_rate(r.mb_per_sec())]);
    t.row(["flush latency p50".to_string(), us(0.5)]);
    t.row(["flush latency p99".to_string(), us(0.99)]);
    t.row(["flush latency p99.9".to_string(), us(0.999)]);
    t.row([
        "flush latency max".to_string(),
        fmt_duration(Duration::from_micros(r.latency_us.max())),
    ]);
    println!();
    print!("{}", t.render());
    Ok(())
}

/// Probes the device under `dir` for `duration`: preallocates a
/// `file_bytes` file there, writes `bytes_per_flush` at a time with an
/// fdatasync after each, and removes the file, also on failure.
pub fn measure(
    dir: &Path,
    bytes_per_flush: u64,
    file_bytes: u64,
    duration: Duration,
) -> Result<ProbeResult, BenchError> {
    if bytes_per_flush == 0 || bytes_per_flush > file_bytes {
        return Err(BenchError::Usage(
            "the probe's bytes per flush must be above 0 and at most its file size".into(),
        ));
    }
    if duration.is_zero() {
        return Err(BenchError::Usage("the probe's time must be above 0".into()));
    }
    fs::create_dir_all(dir).map_err(BenchError::io("create dir", dir))?;
    let path = dir.join(PROBE_FILE);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(BenchError::io("create", &path))?;
    let result = probe(&file, &path, bytes_per_flush, file_bytes, duration);
    drop(file);
    let removed = fs::remove_file(&path).map_err(BenchError::io("remove", &path));
    let r = result?;
    removed.map(|()| r)
}

fn probe(
    file: &File,
    path: &Path,
    bytes_per_flush: u64,
    file_bytes: u64,
    limit: Duration,
) -> Result<ProbeResult, BenchError> {
    let zeros = vec![0u8; FILL_CHUNK];
    let mut at = 0;
    while at < file_bytes {
        let n = (file_bytes - at).min(FILL_CHUNK as u64) as usize;
        file.write_all_at(&zeros[..n], at)
            .map_err(BenchError::io("fill", path))?;
        at += n as u64;
    }
    file.sync_all().map_err(BenchError::io("sync", path))?;

    // Not zeros, so that no layer can skip or compress the writes.
    let block: Vec<u8> = (0..bytes_per_flush).map(|i| (i * 131 + 7) as u8).collect();
    let mut latency = latency_histogram();
    let mut offset = 0;
    let mut flushes = 0u64;
    let start = Instant::now();
    while start.elapsed() < limit {
        if offset + bytes_per_flush > file_bytes {
            offset = 0;
        }
        let t = Instant::now();
        file.write_all_at(&block, offset)
            .map_err(BenchError::io("write", path))?;
        file.sync_data()
            .map_err(BenchError::io("fdatasync", path))?;
        record_us(&mut latency, t.elapsed());
        offset += bytes_per_flush;
        flushes += 1;
    }
    Ok(ProbeResult {
        bytes_per_flush,
        flushes,
        duration: start.elapsed(),
        latency_us: latency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measure_writes_and_removes_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let r = measure(dir.path(), 8 << 10, 1 << 20, Duration::from_millis(200)).unwrap();
        assert!(r.flushes > 0);
        assert!(r.mb_per_sec() > 0.0);
        assert!(!dir.path().join(PROBE_FILE).exists());
        assert!(measure(dir.path(), 2 << 20, 1 << 20, Duration::from_millis(10)).is_err());
        assert!(measure(dir.path(), 0, 1 << 20, Duration::from_millis(10)).is_err());
    }
}
