//! `RateLimiter`: a token bucket that paces the bytes flush and compaction
//! write, shared by both through an `Arc`, so that background writes leave
//! the disk's bandwidth to foreground writes and reads.
//!
//! Tokens are bytes. The bucket refills at `rate` bytes per second and holds
//! at most a tenth of a second's worth (the burst), so that an idle period
//! does not let a compaction write seconds' worth at once. A request takes
//! its tokens at once, even past zero (a debt), and sleeps for as long as
//! the debt takes to refill: requests are served in arrival order, and none
//! waits longer than the rate requires. A request larger than the burst is
//! split into burst-sized pieces, so that a large request does not make
//! smaller ones behind it wait for all of it.
//!
//! Concurrency contract: one mutex guards the bucket; it is held only to do
//! the arithmetic, never while sleeping.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Where a rate limiter reads time and how it waits: the real clock, or a
/// manual one in tests.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Returns the time since some fixed origin.
    fn now(&self) -> Duration;
    /// Waits for `d`.
    fn sleep(&self, d: Duration);
}

/// The monotonic clock of the operating system.
#[derive(Debug)]
pub struct SystemClock {
    origin: Instant,
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// The fraction of a second's worth of bytes the bucket holds.
const BURST_DIVISOR: u64 = 10;

/// A token bucket of bytes per second; see the module doc.
#[derive(Debug)]
pub struct RateLimiter {
    clock: Arc<dyn Clock>,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Bytes per second; 0 is unlimited.
    rate: u64,
    /// Bytes that may be taken now; negative is a debt being slept off.
    available: f64,
    /// When `available` was last brought up to date.
    updated: Duration,
}

impl Bucket {
    fn burst(&self) -> u64 {
        (self.rate / BURST_DIVISOR).max(1)
    }

    /// Adds the tokens earned since the last update, up to the burst.
    fn refill(&mut self, now: Duration) {
        let elapsed = now.saturating_sub(self.updated).as_secs_f64();
        self.updated = now;
        self.available = (self.available + elapsed * self.rate as f64).min(self.burst() as f64);
    }
}

impl RateLimiter {
    /// Returns a limiter of `bytes_per_sec` (0: unlimited) on the real clock.
    pub fn new(bytes_per_sec: u64) -> RateLimiter {
        RateLimiter::with_clock(bytes_per_sec, Arc::new(SystemClock::default()))
    }

    /// Returns a limiter of `bytes_per_sec` (0: unlimited) on `clock`. The
    /// bucket starts full.
    pub fn with_clock(bytes_per_sec: u64, clock: Arc<dyn Clock>) -> RateLimiter {
        let mut bucket = Bucket {
            rate: bytes_per_sec,
            available: 0.0,
            updated: clock.now(),
        };
        bucket.available = bucket.burst() as f64;
        RateLimiter {
            clock,
            bucket: Mutex::new(bucket),
        }
    }

    /// Returns the rate in bytes per second (0: unlimited).
    pub fn rate(&self) -> u64 {
        self.bucket.lock().rate
    }

    /// Changes the rate (0: unlimited). Tokens earned so far are counted at
    /// the old rate; a debt already taken is kept.
    pub fn set_rate(&self, bytes_per_sec: u64) {
        let now = self.clock.now();
        let mut b = self.bucket.lock();
        if b.rate != 0 {
            b.refill(now);
        }
        b.rate = bytes_per_sec;
        b.updated = now;
        b.available = b.available.min(b.burst() as f64);
    }

    /// Blocks until `bytes` may be written, then returns. Returns at once
    /// when the limiter is unlimited.
    pub fn request(&self, bytes: u64) {
        let mut left = bytes;
        while left > 0 {
            let wait = {
                let now = self.clock.now();
                let mut b = self.bucket.lock();
                if b.rate == 0 {
                    return;
                }
                b.refill(now);
                let piece = left.min(b.burst());
                left -= piece;
                b.available -= piece as f64;
                if b.available >= 0.0 {
                    continue;
                }
                Duration::from_secs_f64(-b.available / b.rate as f64)
            };
            self.clock.sleep(wait);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock that moves only when slept on, and records the sleeps.
    #[derive(Debug, Default)]
    struct ManualClock {
        now: Mutex<Duration>,
        slept: Mutex<Vec<Duration>>,
    }

    impl Clock for ManualClock {
        fn now(&self) -> Duration {
            *self.now.lock()
        }
        fn sleep(&self, d: Duration) {
            *self.now.lock() += d;
            self.slept.lock().push(d);
        }
    }

    fn limiter(rate: u64) -> (RateLimiter, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::default());
        (RateLimiter::with_clock(rate, clock.clone()), clock)
    }

    fn total(clock: &ManualClock) -> f64 {
        clock.slept.lock().iter().map(Duration::as_secs_f64).sum()
    }

    #[test]
    fn unlimited_never_sleeps() {
        let (l, clock) = limiter(0);
        l.request(u64::MAX);
        assert!(clock.slept.lock().is_empty());
    }

    #[test]
    fn the_burst_is_free_and_the_rest_waits_exactly_its_time() {
        let (l, clock) = limiter(1000);
        // A tenth of a second's worth is in the bucket.
        l.request(100);
        assert!(clock.slept.lock().is_empty());
        // 1,000 more bytes take one second, in burst-sized pieces.
        l.request(1000);
        assert!((total(&clock) - 1.0).abs() < 1e-6, "{}", total(&clock));
        assert!(clock.slept.lock().len() >= 10, "split into pieces");
        // Time that passed unused refills at most the burst.
        *clock.now.lock() += Duration::from_secs(60);
        l.request(200);
        assert!((total(&clock) - 1.1).abs() < 1e-6, "{}", total(&clock));
    }

    #[test]
    fn a_rate_change_applies_to_the_next_request() {
        let (l, clock) = limiter(1000);
        l.request(100);
        l.set_rate(100);
        assert_eq!(l.rate(), 100);
        l.request(100);
        assert!((total(&clock) - 1.0).abs() < 1e-6, "{}", total(&clock));
        l.set_rate(0);
        l.request(1 << 40);
        assert!((total(&clock) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn the_real_clock_paces_roughly() {
        let l = RateLimiter::new(100_000);
        let start = Instant::now();
        l.request(10_000 + 20_000);
        // 20,000 bytes past the burst take 0.2 s; allow a loaded machine.
        let elapsed = start.elapsed();
        assert!(elapsed >= Duration::from_millis(150), "{elapsed:?}");
    }
}
