//! Install timing: how long each version install waits for and holds its
//! column family's installer lock, and how long the parts done under it
//! take. Always on: six clock reads and a few relaxed atomic adds per
//! install, which runs at most once per flush, compaction or ingestion.
//!
//! What is measured, per successful [`Installer::install`]
//! (`crate::read_state`); a refused or failed install records nothing:
//! - `lock_wait`: from the call to the lock taken (another installer of
//!   the same family held it);
//! - `build`: the [`VersionBuilder`] applying the edits to the current
//!   version under the lock, which happens only when the version built
//!   ahead of the lock is stale (another install came between; see
//!   `read_state.rs`) and for ingestions; near zero otherwise;
//! - `persist`: the engine's persist hook, also under the lock: the
//!   manifest append (unsynced), or a manifest rewrite, which writes every
//!   file of every family; for an ingestion also the sync;
//! - `lock_held`: the whole critical section, from the lock taken to the
//!   new state stored in the `ArcSwap`, i.e. build + persist + swap;
//! - `lock_held_unpreempted`: the same, for the installs whose thread the
//!   scheduler did not preempt from just before the lock to just after it
//!   (its count of involuntary context switches unchanged; Linux only, two
//!   `getrusage` calls outside the critical section): the section's own
//!   cost, without the installing thread's waits for a core;
//! - `durable`: making the edits durable after the lock is released (the
//!   manifest sync, or the wait for another install's sync that covers
//!   them); not recorded for ingestions, which sync under the lock.
//!
//! Each is kept as a [`TimeHistogram`]: a count, a sum, a maximum and
//! power-of-two buckets of nanoseconds, lock-free (one `AtomicU64` per
//! bucket), so that a quantile is known within a factor of two.
//!
//! Concurrency contract: [`InstallTimes`] is shared (`Arc`) by every
//! installer of an engine and written with relaxed atomics; a snapshot
//! taken while an install records may count it in some fields and not
//! yet in others (the bucket counts are the reference for quantiles).
//!
//! [`Installer::install`]: crate::read_state::Installer::install
//! [`VersionBuilder`]: crate::version::VersionBuilder

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Buckets of a [`TimeHistogram`]: bucket `i` counts durations in
/// `[2^i, 2^(i+1))` nanoseconds (bucket 0 holds 0 and 1 ns), the last one
/// everything from `2^39` ns (about 9 minutes) up.
pub const TIME_BUCKETS: usize = 40;

/// A lock-free recorder of durations; see the module doc.
#[derive(Debug)]
pub struct TimeRecorder {
    count: AtomicU64,
    sum_nanos: AtomicU64,
    max_nanos: AtomicU64,
    buckets: [AtomicU64; TIME_BUCKETS],
}

impl Default for TimeRecorder {
    fn default() -> Self {
        TimeRecorder {
            count: AtomicU64::new(0),
            sum_nanos: AtomicU64::new(0),
            max_nanos: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// Returns the bucket of a duration of `nanos`.
fn bucket_of(nanos: u64) -> usize {
    (63 - nanos.max(1).leading_zeros() as usize).min(TIME_BUCKETS - 1)
}

/// Returns the first duration past bucket `b`, in nanoseconds.
fn bucket_end(b: usize) -> u64 {
    if b + 1 >= TIME_BUCKETS {
        u64::MAX
    } else {
        1u64 << (b + 1)
    }
}

impl TimeRecorder {
    /// Records one duration.
    pub fn record(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.count.fetch_add(1, Relaxed);
        self.sum_nanos.fetch_add(nanos, Relaxed);
        self.max_nanos.fetch_max(nanos, Relaxed);
        self.buckets[bucket_of(nanos)].fetch_add(1, Relaxed);
    }

    /// Returns a copy of what was recorded so far.
    pub fn snapshot(&self) -> TimeHistogram {
        TimeHistogram {
            count: self.count.load(Relaxed),
            sum_nanos: self.sum_nanos.load(Relaxed),
            max_nanos: self.max_nanos.load(Relaxed),
            buckets: std::array::from_fn(|i| self.buckets[i].load(Relaxed)),
        }
    }
}

/// A copy of a [`TimeRecorder`]: durations by power-of-two bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeHistogram {
    /// Durations recorded.
    pub count: u64,
    /// Their sum, in nanoseconds.
    pub sum_nanos: u64,
    /// The longest, in nanoseconds (after [`TimeHistogram::since`]: an
    /// upper bound, see there).
    pub max_nanos: u64,
    /// Bucket `i`: durations in `[2^i, 2^(i+1))` ns ([`TIME_BUCKETS`]).
    pub buckets: [u64; TIME_BUCKETS],
}

impl Default for TimeHistogram {
    fn default() -> Self {
        TimeHistogram {
            count: 0,
            sum_nanos: 0,
            max_nanos: 0,
            buckets: [0; TIME_BUCKETS],
        }
    }
}

impl TimeHistogram {
    /// Returns the mean, in nanoseconds (0 when empty).
    pub fn mean_nanos(&self) -> u64 {
        self.sum_nanos.checked_div(self.count).unwrap_or(0)
    }

    /// Returns an upper bound of the `q` quantile (0 to 1), in nanoseconds:
    /// the end of the bucket holding it, never above the maximum (0 when
    /// empty). Within a factor of two of the true value.
    pub fn quantile_nanos(&self, q: f64) -> u64 {
        let total: u64 = self.buckets.iter().sum();
        if total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (b, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_end(b).saturating_sub(1).min(self.max_nanos);
            }
        }
        self.max_nanos
    }

    /// Returns what was recorded between `earlier` (a snapshot of the same
    /// recorder) and `self`. The maximum of the interval is exact when it
    /// raised the recorder's maximum, else the end of its highest non-empty
    /// bucket, capped at the recorder's maximum: an upper bound.
    pub fn since(&self, earlier: &TimeHistogram) -> TimeHistogram {
        let buckets: [u64; TIME_BUCKETS] =
            std::array::from_fn(|i| self.buckets[i].saturating_sub(earlier.buckets[i]));
        let max_nanos = if self.max_nanos > earlier.max_nanos {
            self.max_nanos
        } else {
            buckets
                .iter()
                .rposition(|&n| n > 0)
                .map_or(0, |b| bucket_end(b).saturating_sub(1).min(self.max_nanos))
        };
        TimeHistogram {
            count: self.count.saturating_sub(earlier.count),
            sum_nanos: self.sum_nanos.saturating_sub(earlier.sum_nanos),
            max_nanos,
            buckets,
        }
    }
}

/// The recorders of every install of an engine; see the module doc.
#[derive(Debug, Default)]
pub struct InstallTimes {
    pub(crate) lock_wait: TimeRecorder,
    pub(crate) lock_held: TimeRecorder,
    pub(crate) lock_held_unpreempted: TimeRecorder,
    pub(crate) build: TimeRecorder,
    pub(crate) persist: TimeRecorder,
    pub(crate) durable: TimeRecorder,
}

impl InstallTimes {
    /// Returns a copy of every recorder.
    pub fn snapshot(&self) -> InstallTiming {
        let lock_held = self.lock_held.snapshot();
        InstallTiming {
            installs: lock_held.count,
            lock_wait: self.lock_wait.snapshot(),
            lock_held,
            lock_held_unpreempted: self.lock_held_unpreempted.snapshot(),
            build: self.build.snapshot(),
            persist: self.persist.snapshot(),
            durable: self.durable.snapshot(),
        }
    }
}

/// How long installs took, since open; see the module doc.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstallTiming {
    /// Versions installed (flushes, compactions, ingestions).
    pub installs: u64,
    /// Waiting for the installer lock.
    pub lock_wait: TimeHistogram,
    /// The critical section: the lock taken to the new state published.
    pub lock_held: TimeHistogram,
    /// The critical sections of the installs not preempted around them
    /// (none recorded where the count of preemptions is not available).
    pub lock_held_unpreempted: TimeHistogram,
    /// Building the next version under the lock (when the one built ahead
    /// was stale, and for ingestions).
    pub build: TimeHistogram,
    /// The persist hook: the manifest append, and for an ingestion its
    /// sync (under the lock).
    pub persist: TimeHistogram,
    /// Making the edits durable, after the lock (flushes, compactions).
    pub durable: TimeHistogram,
}

impl InstallTiming {
    /// Returns what was recorded between `earlier` and `self`
    /// ([`TimeHistogram::since`] for each).
    pub fn since(&self, earlier: &InstallTiming) -> InstallTiming {
        InstallTiming {
            installs: self.installs.saturating_sub(earlier.installs),
            lock_wait: self.lock_wait.since(&earlier.lock_wait),
            lock_held: self.lock_held.since(&earlier.lock_held),
            lock_held_unpreempted: self
                .lock_held_unpreempted
                .since(&earlier.lock_held_unpreempted),
            build: self.build.since(&earlier.build),
            persist: self.persist.since(&earlier.persist),
            durable: self.durable.since(&earlier.durable),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_of_nanoseconds() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 0);
        assert_eq!(bucket_of(2), 1);
        assert_eq!(bucket_of(1023), 9);
        assert_eq!(bucket_of(1024), 10);
        assert_eq!(bucket_of(u64::MAX), TIME_BUCKETS - 1);
    }

    #[test]
    fn quantiles_bound_the_recorded_durations_within_a_factor_of_two() {
        let r = TimeRecorder::default();
        for us in 1..=1000u64 {
            r.record(Duration::from_micros(us));
        }
        let h = r.snapshot();
        assert_eq!(h.count, 1000);
        assert_eq!(h.max_nanos, 1_000_000);
        assert_eq!(h.mean_nanos(), 500_500);
        for q in [0.5, 0.99, 0.999] {
            let truth = (q * 1000.0_f64).ceil() * 1000.0;
            let got = h.quantile_nanos(q) as f64;
            assert!(got >= truth && got < 2.0 * truth, "q {q}: {got} vs {truth}");
        }
        assert_eq!(h.quantile_nanos(1.0), 1_000_000);
        assert_eq!(TimeHistogram::default().quantile_nanos(0.5), 0);
    }

    #[test]
    fn an_interval_keeps_its_own_counts_and_bounds_its_maximum() {
        let r = TimeRecorder::default();
        r.record(Duration::from_millis(5));
        let before = r.snapshot();
        r.record(Duration::from_micros(3));
        r.record(Duration::from_micros(4));
        let d = r.snapshot().since(&before);
        assert_eq!(d.count, 2);
        assert_eq!(d.sum_nanos, 7_000);
        // 4 us is in [2048, 4096) ns: the bound is that bucket's end.
        assert_eq!(d.max_nanos, 4095);
        r.record(Duration::from_millis(9));
        let d = r.snapshot().since(&before);
        assert_eq!(d.max_nanos, 9_000_000);
    }
}
