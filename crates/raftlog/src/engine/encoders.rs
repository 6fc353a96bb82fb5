//! The count of writers between their continuity check and the write queue
//! (encoding and compressing their batches), which a syncing leader waits
//! for, briefly, so that they join its group (see `Engine::gather`).
//!
//! Every write enters and leaves the count, so it is two atomic operations
//! and no lock: a mutex here, taken twice per write by every writer and held
//! by the leader's wait, was contended on every group commit, and a contended
//! `parking_lot` mutex spins by yielding the CPU (about a third of the
//! writers' `sched_yield` calls at 100,000 groups, `docs/raftlog.md`). Only
//! the writer that takes the count to zero while a leader waits takes the
//! lock, to wake it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

#[derive(Debug, Default)]
pub(crate) struct Encoders {
    count: AtomicUsize,
    /// Leaders in [`Encoders::wait_for_none`].
    waiting: AtomicUsize,
    /// Held by a waiting leader between its check of `count` and its wait,
    /// and by a waker before it notifies, so that no wake-up falls between.
    lock: Mutex<()>,
    none: Condvar,
}

impl Encoders {
    /// Counts the caller as encoding until the guard drops, a panic
    /// included, so that no leader waits for a dead writer.
    pub fn enter(&self) -> Encoding<'_> {
        self.count.fetch_add(1, Ordering::SeqCst);
        Encoding(self)
    }

    /// Waits until no writer is encoding, or until `deadline`.
    pub fn wait_for_none(&self, deadline: Instant) {
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        // Announced before the count is read again: either this read sees
        // zero, or the writer that made it zero sees a waiter (both SeqCst).
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.lock.lock();
        while self.count.load(Ordering::SeqCst) > 0 {
            if self.none.wait_until(&mut guard, deadline).timed_out() {
                break;
            }
        }
        drop(guard);
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }

    fn leave(&self) {
        if self.count.fetch_sub(1, Ordering::SeqCst) == 1 && self.waiting.load(Ordering::SeqCst) > 0
        {
            // A waiter holds the lock from its check of the count until it
            // sleeps: taking the lock here waits for that, so the notify
            // cannot fall between its check and its sleep.
            drop(self.lock.lock());
            self.none.notify_all();
        }
    }
}

/// A writer counted as encoding (see [`Encoders::enter`]).
pub(crate) struct Encoding<'a>(&'a Encoders);

impl Drop for Encoding<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_leader_waits_for_the_last_encoder_and_no_longer() {
        let e = Arc::new(Encoders::default());
        let guards: Vec<_> = (0..3).map(|_| e.enter()).collect();
        drop(guards);
        // Nobody encoding: no wait at all, even with a far deadline.
        let t = Instant::now();
        e.wait_for_none(t + Duration::from_secs(30));
        assert!(t.elapsed() < Duration::from_secs(10));

        let held = Arc::new(std::sync::Barrier::new(2));
        let (e2, held2) = (e.clone(), held.clone());
        let writer = std::thread::spawn(move || {
            let g = e2.enter();
            held2.wait();
            std::thread::sleep(Duration::from_millis(50));
            drop(g);
        });
        held.wait();
        let t = Instant::now();
        e.wait_for_none(t + Duration::from_secs(30));
        let waited = t.elapsed();
        assert_eq!(
            e.count.load(Ordering::SeqCst),
            0,
            "woken before the writer left"
        );
        assert!(
            waited < Duration::from_secs(10),
            "the wake-up was lost: {waited:?}"
        );
        writer.join().unwrap();
        assert_eq!(e.waiting.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_wait_ends_at_its_deadline_while_a_writer_encodes() {
        let e = Encoders::default();
        let g = e.enter();
        let t = Instant::now();
        e.wait_for_none(t + Duration::from_millis(20));
        assert!(t.elapsed() >= Duration::from_millis(20));
        drop(g);
        assert_eq!(e.count.load(Ordering::SeqCst), 0);
    }

    /// Many writers entering and leaving while leaders wait: every wait
    /// ends (by its wake-up or its deadline) and the counts return to zero.
    #[test]
    fn writers_and_leaders_race_without_a_lost_count() {
        let e = Arc::new(Encoders::default());
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let e = e.clone();
                std::thread::spawn(move || {
                    for _ in 0..2_000 {
                        if i == 0 {
                            e.wait_for_none(Instant::now() + Duration::from_millis(5));
                        } else {
                            let _g = e.enter();
                            std::hint::black_box(i);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(e.count.load(Ordering::SeqCst), 0);
        assert_eq!(e.waiting.load(Ordering::SeqCst), 0);
    }
}
