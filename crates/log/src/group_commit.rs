//! Group commit: concurrent writers queue up; one of them (the leader) writes
//! everyone's records with one append and at most one sync, then hands the
//! leadership to the first writer that queued meanwhile, unless the round was
//! cheap (no sync): then it serves the next groups itself for a little while,
//! since waking another thread costs more than an unsynced append (four
//! unsynced raftlog writers on two cores: see `docs/raftlog.md`), yielding
//! its CPU after each round that was tiny so that the writers it woke run.
//!
//! A writer that finds no leader becomes one at once, so a lone writer waits for
//! nobody. While a leader does its I/O, newcomers accumulate and become the next
//! group.
//!
//! A leader that fails, a panic included, still serves: a panic in `serve` is
//! caught and every writer of the group (the leader too) gets the outcome
//! `failed` makes of it; leadership is handed on either way, so no writer is
//! ever left waiting for a dead leader.
//!
//! Concurrency: `QueueState` is guarded by `state`; a writer's own outcome is
//! guarded by its slot's mutex and announced on its condvar. Lock order: a
//! thread holds at most one of them at a time (`state`, or one slot).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// A writer's request and, once served, its outcome.
#[derive(Debug)]
pub struct Writer<T, R> {
    /// What the writer asked for; the leader reads it while it serves.
    pub request: T,
    slot: Mutex<Slot<R>>,
    cv: Condvar,
}

#[derive(Debug)]
enum Slot<R> {
    Waiting,
    Leader,
    Done(R),
}

#[derive(Debug)]
struct QueueState<T, R> {
    leader_active: bool,
    pending: Vec<Arc<Writer<T, R>>>,
    /// An empty vector with capacity, swapped in for `pending` when a leader
    /// takes its group, so the queue does not regrow from empty every round.
    spare: Vec<Arc<Writer<T, R>>>,
}

/// The queue of writers.
#[derive(Debug)]
pub struct WriteQueue<T, R> {
    state: Mutex<QueueState<T, R>>,
}

impl<T, R> Default for WriteQueue<T, R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, R> WriteQueue<T, R> {
    /// An empty queue: the first writer leads at once.
    pub fn new() -> Self {
        WriteQueue {
            state: Mutex::new(QueueState {
                leader_active: false,
                pending: Vec::new(),
                spare: Vec::new(),
            }),
        }
    }

    /// Submits `request` and returns the served writer, holding the outcome.
    /// `serve` is called by whichever writer leads, with every request of its
    /// group in arrival order, and must return one outcome per request.
    /// A group takes the queued writers in order up to `budget` of their
    /// `weight` (at least one writer).
    /// `gather` runs on the leader just before it takes its group, without the
    /// queue's lock: it may wait for writers about to queue. If `gather` or
    /// `serve` panics, or `serve` returns the wrong number of outcomes, every
    /// writer of the group gets `failed(reason)` instead.
    pub fn submit(
        &self,
        request: T,
        weight: impl Fn(&T) -> u64,
        budget: u64,
        gather: impl Fn(),
        serve: impl Fn(&[Arc<Writer<T, R>>]) -> Vec<R>,
        failed: impl Fn(&str) -> R,
    ) -> Served<T, R> {
        let me = Arc::new(Writer {
            request,
            slot: Mutex::new(Slot::Waiting),
            cv: Condvar::new(),
        });
        let mut state = self.state.lock();
        state.pending.push(me.clone());
        if state.leader_active {
            drop(state);
            let mut slot = me.slot.lock();
            loop {
                match std::mem::replace(&mut *slot, Slot::Waiting) {
                    Slot::Done(r) => {
                        drop(slot);
                        return Served {
                            writer: me,
                            outcome: r,
                        };
                    }
                    Slot::Leader => break,
                    Slot::Waiting => me.cv.wait(&mut slot),
                }
            }
            drop(slot);
            state = self.state.lock();
        } else {
            state.leader_active = true;
        }
        drop(state);
        // A panic here only costs the wait: the group is taken below either way.
        let _ = catch_unwind(AssertUnwindSafe(&gather));
        let mut state = self.state.lock();
        let mut group = Self::take_group(&mut state, &weight, budget);
        drop(state);
        debug_assert!(group.iter().any(|w| Arc::ptr_eq(w, &me)));
        let mut round = Instant::now();
        let mine = self.serve_group(&mut group, Some(&me), &serve, &failed);
        let started = Instant::now();

        // Serve the groups that queued meanwhile while rounds are cheap: a
        // hand-off wakes another thread, which on a busy machine costs more
        // than an append that does not sync. Rounds that sync end it at once.
        let mut state = self.state.lock();
        while !state.pending.is_empty()
            && round.elapsed() < CHEAP_ROUND
            && started.elapsed() < EXTRA_ROUNDS_TIME
        {
            let taken = Self::take_group(&mut state, &weight, budget);
            drop(state);
            group = taken;
            round = Instant::now();
            self.serve_group(&mut group, None, &serve, &failed);
            if round.elapsed() < TINY_ROUND {
                // The writers just woken need a CPU, and this thread would
                // hold one for rounds that each carry little: let them run.
                std::thread::yield_now();
            }
            state = self.state.lock();
        }
        match state.pending.first() {
            Some(next) => {
                *next.slot.lock() = Slot::Leader;
                next.cv.notify_one();
            }
            None => state.leader_active = false,
        }
        if state.spare.capacity() == 0 {
            state.spare = group;
        }
        drop(state);
        Served {
            writer: me,
            outcome: mine.expect("the leader is in its first group"),
        }
    }
}

/// The longest a round may have taken for its leader to serve another
/// group rather than hand the leadership on; no sync is this short.
const CHEAP_ROUND: Duration = Duration::from_micros(50);

/// How long a leader serves groups after its own. The leader's own write
/// returns only after them, so this is added to its latency: at 200 us,
/// the p99 of four unsynced writers of 4 KiB batches on two cores was
/// 250 us, nearly all of it the leaders' extra rounds. At 100 us: p99
/// 163-166 us, p99.9 255-287 against 333-354, writes/s unchanged; 16 KiB
/// batches 2% fewer writes/s. At 50 us 16 KiB batches lost 5%, and with
/// no extra rounds 64 KiB batches lost 9% (the next leader waits for a CPU
/// while the file idles).
const EXTRA_ROUNDS_TIME: Duration = Duration::from_micros(100);

/// An extra round this short is followed by a yield of the leader's CPU.
/// With more writers than cores, the writers a leader wakes wait for a CPU
/// while it serves the next rounds; where rounds are this cheap the wait is
/// most of their latency. Four unsynced writers of 4 KiB batches on two
/// cores: p99.9 348-360 us against 472-575 without the yield, writes/s
/// 95-97k against 102-115k. Longer rounds (16 KiB batches and up) keep
/// the leader: yielding after them cost a third of their writes/s.
const TINY_ROUND: Duration = Duration::from_micros(10);

impl<T, R> WriteQueue<T, R> {
    /// Takes the queued writers in order up to `budget` of their weight (at
    /// least one); the rest wait for the next group.
    fn take_group(
        state: &mut QueueState<T, R>,
        weight: &impl Fn(&T) -> u64,
        budget: u64,
    ) -> Vec<Arc<Writer<T, R>>> {
        let mut taken = 0u64;
        let n = state
            .pending
            .iter()
            .position(|w| {
                taken += weight(&w.request);
                taken > budget
            })
            .unwrap_or(state.pending.len())
            .max(1);
        if n == state.pending.len() {
            let spare = std::mem::take(&mut state.spare);
            std::mem::replace(&mut state.pending, spare)
        } else {
            state.pending.drain(..n).collect()
        }
    }

    /// Serves `group`, hands every writer but `me` its outcome, returns
    /// `me`'s, and leaves `group` empty (its capacity kept).
    fn serve_group(
        &self,
        group: &mut Vec<Arc<Writer<T, R>>>,
        me: Option<&Arc<Writer<T, R>>>,
        serve: &impl Fn(&[Arc<Writer<T, R>>]) -> Vec<R>,
        failed: &impl Fn(&str) -> R,
    ) -> Option<R> {
        let outcomes = match catch_unwind(AssertUnwindSafe(|| serve(group))) {
            Ok(outcomes) if outcomes.len() == group.len() => outcomes,
            Ok(outcomes) => {
                debug_assert!(
                    false,
                    "{} outcomes for {} writers",
                    outcomes.len(),
                    group.len()
                );
                let why = format!(
                    "leader made {} outcomes for {} writers",
                    outcomes.len(),
                    group.len()
                );
                group.iter().map(|_| failed(&why)).collect()
            }
            Err(panic) => {
                let why = panic_message(panic.as_ref());
                group.iter().map(|_| failed(&why)).collect()
            }
        };
        let mut mine = None;
        for (w, r) in group.iter().zip(outcomes) {
            if me.is_some_and(|me| Arc::ptr_eq(w, me)) {
                mine = Some(r);
            } else {
                *w.slot.lock() = Slot::Done(r);
                w.cv.notify_one();
            }
        }
        // Drop the group's references before taking the lock, not under it.
        group.clear();
        mine
    }
}

/// The text of a panic's payload (`panic!` with a literal or a format).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-text payload");
    format!("group-commit leader panicked: {text}")
}

/// A writer after it was served: its request and its outcome.
#[derive(Debug)]
pub struct Served<T, R> {
    /// The writer, with its request (to take buffers back from it).
    pub writer: Arc<Writer<T, R>>,
    /// What the leader made of the request.
    pub outcome: R,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_request_is_served_once_and_groups_form() {
        let q = Arc::new(WriteQueue::<usize, usize>::new());
        let served = Arc::new(AtomicUsize::new(0));
        let groups = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (q, served, groups) = (q.clone(), served.clone(), groups.clone());
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let req = t * 1000 + i;
                        let out = q
                            .submit(
                                req,
                                |_| 1,
                                u64::MAX,
                                || {},
                                |group| {
                                    groups.fetch_add(1, Ordering::Relaxed);
                                    served.fetch_add(group.len(), Ordering::Relaxed);
                                    std::thread::sleep(std::time::Duration::from_micros(50));
                                    group.iter().map(|w| w.request * 2).collect()
                                },
                                |_| usize::MAX,
                            )
                            .outcome;
                        assert_eq!(out, req * 2);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(served.load(Ordering::Relaxed), 1600);
        assert!(groups.load(Ordering::Relaxed) <= 1600);
    }

    #[test]
    fn groups_stay_within_their_budget() {
        let q = Arc::new(WriteQueue::<u64, u64>::new());
        let over = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let (q, over) = (q.clone(), over.clone());
                std::thread::spawn(move || {
                    for i in 0..200 {
                        // Weights 1..=5; a group may weigh 7 at most.
                        let w = (t + i) % 5 + 1;
                        let out = q
                            .submit(
                                w,
                                |w| *w,
                                7,
                                || std::thread::sleep(std::time::Duration::from_micros(20)),
                                |group| {
                                    let total: u64 = group.iter().map(|w| w.request).sum();
                                    if total > 7 && group.len() > 1 {
                                        over.fetch_add(1, Ordering::Relaxed);
                                    }
                                    std::thread::sleep(std::time::Duration::from_micros(50));
                                    group.iter().map(|w| w.request + 100).collect()
                                },
                                |_| u64::MAX,
                            )
                            .outcome;
                        assert_eq!(out, w + 100);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(over.load(Ordering::Relaxed), 0);
    }

    /// Regression: a panic on the leader used to unwind out of `submit` without
    /// serving its followers or handing leadership on, so every later writer
    /// waited forever.
    #[test]
    fn a_panicking_leader_fails_its_group_and_hands_leadership_on() {
        let q = Arc::new(WriteQueue::<u64, Result<u64, String>>::new());
        let threads: Vec<_> = (0..6u64)
            .map(|t| {
                let q = q.clone();
                std::thread::spawn(move || {
                    let mut failed = 0;
                    for i in 0..100u64 {
                        let req = t * 1000 + i;
                        let out = q
                            .submit(
                                req,
                                |_| 1,
                                u64::MAX,
                                || {},
                                |group| {
                                    if group.iter().any(|w| w.request % 7 == 0) {
                                        panic!("request divisible by seven");
                                    }
                                    group.iter().map(|w| Ok(w.request)).collect()
                                },
                                |why| Err(why.to_string()),
                            )
                            .outcome;
                        match out {
                            Ok(v) => assert_eq!(v, req),
                            Err(why) => {
                                assert!(why.contains("seven"), "{why}");
                                failed += 1;
                            }
                        }
                    }
                    failed
                })
            })
            .collect();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let failed: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
            tx.send(failed).unwrap();
        });
        let failed = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("writers hung behind a panicked leader");
        assert!(failed >= 6 * 100 / 7, "{failed} writes failed");
        // The queue still serves.
        let out = q.submit(
            1,
            |_| 1,
            1,
            || {},
            |g| g.iter().map(|_| Ok(5)).collect(),
            |w| Err(w.into()),
        );
        assert_eq!(out.outcome, Ok(5));
    }
}
