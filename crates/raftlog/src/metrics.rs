//! Counters and the write-latency histogram.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use hdrhistogram::Histogram;
use parking_lot::Mutex;

use crate::pipe::SMALL_APPEND_BYTES;

/// Live counters, updated with relaxed atomics on the hot paths.
#[derive(Debug)]
pub(crate) struct Metrics {
    pub bytes_written: AtomicU64,
    pub payload_bytes: AtomicU64,
    pub batches_written: AtomicU64,
    pub write_groups: AtomicU64,
    pub fsyncs: AtomicU64,
    pub compressed_batches: AtomicU64,
    pub files_rotated: AtomicU64,
    pub files_recycled: AtomicU64,
    pub files_prepared: AtomicU64,
    pub rotations_prepared: AtomicU64,
    pub writeback_hints: AtomicU64,
    pub index_sections_written: AtomicU64,
    pub files_purged: AtomicU64,
    pub purges: AtomicU64,
    pub rewrites: AtomicU64,
    pub entries_rewritten: AtomicU64,
    pub bytes_rewritten: AtomicU64,
    write_latency_us: Mutex<Histogram<u64>>,
}

/// A copy of the engine's metrics at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsSnapshot {
    /// Bytes appended to log files, headers included.
    pub bytes_written: u64,
    /// Payload bytes of the batches written (before compression).
    pub payload_bytes: u64,
    /// Batches written.
    pub batches_written: u64,
    /// Group commits (one append each).
    pub write_groups: u64,
    /// File syncs issued by the write and purge paths.
    pub fsyncs: u64,
    /// Batches stored compressed.
    pub compressed_batches: u64,
    /// Log files sealed and replaced.
    pub files_rotated: u64,
    /// New log files made from recycled ones.
    pub files_recycled: u64,
    /// Append files made ahead of their rotation by the preparer thread.
    pub files_prepared: u64,
    /// Rotations that took a file made ahead (the others made their own).
    pub rotations_prepared: u64,
    /// Ranges of unsynced appends whose writeback the engine started.
    pub writeback_hints: u64,
    /// Sealed files given an index section (see `docs/format/raftlog.md`).
    pub index_sections_written: u64,
    /// Files deleted or recycled by purge.
    pub files_purged: u64,
    /// Calls of purge.
    pub purges: u64,
    /// Rewrites of live data into the rewrite queue.
    pub rewrites: u64,
    /// Entries copied by rewrites.
    pub entries_rewritten: u64,
    /// Bytes copied by rewrites.
    pub bytes_rewritten: u64,
    /// Write latency percentiles in microseconds: p50, p99, p99.9, max.
    pub write_latency_us: [u64; 4],
    /// Writes measured.
    pub writes: u64,
}

impl Metrics {
    pub fn new() -> Self {
        Metrics {
            bytes_written: AtomicU64::new(0),
            payload_bytes: AtomicU64::new(0),
            batches_written: AtomicU64::new(0),
            write_groups: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            compressed_batches: AtomicU64::new(0),
            files_rotated: AtomicU64::new(0),
            files_recycled: AtomicU64::new(0),
            files_prepared: AtomicU64::new(0),
            rotations_prepared: AtomicU64::new(0),
            writeback_hints: AtomicU64::new(0),
            index_sections_written: AtomicU64::new(0),
            files_purged: AtomicU64::new(0),
            purges: AtomicU64::new(0),
            rewrites: AtomicU64::new(0),
            entries_rewritten: AtomicU64::new(0),
            bytes_rewritten: AtomicU64::new(0),
            // Three significant digits from 1 us to an hour.
            write_latency_us: Mutex::new(
                Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("static bounds are valid"),
            ),
        }
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    pub fn record_write(&self, latency: Duration) {
        let us = (latency.as_micros() as u64).clamp(1, 3_600_000_000);
        self.write_latency_us.lock().saturating_record(us);
    }

    /// Bytes per append (group commit) so far; `u64::MAX` before the first.
    pub fn mean_append_bytes(&self) -> u64 {
        let groups = self.write_groups.load(Relaxed);
        if groups == 0 {
            return u64::MAX;
        }
        self.bytes_written.load(Relaxed) / groups
    }

    /// Whether the appends so far average [`SMALL_APPEND_BYTES`] or more
    /// (true before the first): the one rule by which a recycled file's old
    /// cache and the active file's synced pages are dropped
    /// (`cache_drop.rs`), wherever the drop is decided.
    pub fn appends_are_large(&self) -> bool {
        self.mean_append_bytes() >= SMALL_APPEND_BYTES
    }

    pub fn snapshot(&self) -> MetricsSnapshot {
        let h = self.write_latency_us.lock();
        MetricsSnapshot {
            bytes_written: self.bytes_written.load(Relaxed),
            payload_bytes: self.payload_bytes.load(Relaxed),
            batches_written: self.batches_written.load(Relaxed),
            write_groups: self.write_groups.load(Relaxed),
            fsyncs: self.fsyncs.load(Relaxed),
            compressed_batches: self.compressed_batches.load(Relaxed),
            files_rotated: self.files_rotated.load(Relaxed),
            files_recycled: self.files_recycled.load(Relaxed),
            files_prepared: self.files_prepared.load(Relaxed),
            rotations_prepared: self.rotations_prepared.load(Relaxed),
            writeback_hints: self.writeback_hints.load(Relaxed),
            index_sections_written: self.index_sections_written.load(Relaxed),
            files_purged: self.files_purged.load(Relaxed),
            purges: self.purges.load(Relaxed),
            rewrites: self.rewrites.load(Relaxed),
            entries_rewritten: self.entries_rewritten.load(Relaxed),
            bytes_rewritten: self.bytes_rewritten.load(Relaxed),
            write_latency_us: [
                h.value_at_quantile(0.5),
                h.value_at_quantile(0.99),
                h.value_at_quantile(0.999),
                h.max(),
            ],
            writes: h.len(),
        }
    }
}
