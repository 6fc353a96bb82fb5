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
//! A group may be served in two stages (`submit_staged`): the write, which
//! must be alone and in order (the append and its sync), and the finish
//! (the raftlog's index update). After a round that synced, the leader hands
//! the leadership on before it finishes, so the next group's append overlaps
//! this group's finish instead of waiting for it; the `finishing` ticket,
//! taken before the hand-off, keeps finishes one at a time and in the
//! order of their groups. A writer is woken with its outcome only after its
//! group's finish.
//!
//! A leader that fails, a panic included, still serves: a panic in `serve`
//! (or either stage) is caught and every writer of the group (the leader
//! too) gets the outcome `failed` makes of it; leadership is handed on
//! either way, so no writer is ever left waiting for a dead leader.
//!
//! Concurrency: `QueueState` is guarded by `state`; a writer's own outcome is
//! guarded by its slot's mutex and announced on its condvar. Lock order:
//! `finishing`, then `state`, then one slot; a leader holds none of them
//! while its write stage runs, and only `finishing` while its finish runs.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// The queue's own locks (`state`, `finishing`) are the standard library's:
/// a contended one waits on a futex after a short spin. `parking_lot`'s
/// spins by yielding the CPU, and with more writers than cores each yield
/// hands the core to another writer for up to a whole time slice: on 2
/// cores with 4 writers of 100,000 groups, ~800 yields a second on these
/// two locks (see `docs/raftlog.md`, "Write path").
type QueueLock<T> = std::sync::Mutex<T>;

/// Locks `m`. No code that can panic runs under the queue's locks (the
/// stages run outside them, under `catch_unwind`), but a poisoned lock
/// still guards consistent state, so poisoning is ignored.
fn lock<T>(m: &QueueLock<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

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
    state: QueueLock<QueueState<T, R>>,
    /// Held by a leader from the end of its group's first stage until the
    /// group is finished and woken (see [`WriteQueue::submit_staged`]);
    /// only for groups with a finish.
    finishing: QueueLock<()>,
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
            state: QueueLock::new(QueueState {
                leader_active: false,
                pending: Vec::new(),
                spare: Vec::new(),
            }),
            finishing: QueueLock::new(()),
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
        self.submit_staged(
            request,
            weight,
            budget,
            gather,
            |group| Stage::<std::convert::Infallible, R>::Done(serve(group)),
            |_, never| match never {},
            failed,
        )
    }

    /// [`WriteQueue::submit`] with a group served in two stages. `write`
    /// does the part that must be done in the order of groups and alone
    /// (the append and its sync) and returns [`Stage::Finish`] with what
    /// `finish` needs, or [`Stage::Done`] with the outcomes. A round that
    /// took `CHEAP_ROUND` or longer hands the leadership on before its
    /// `finish` runs, so the next group's `write` overlaps it; finishes
    /// still run one at a time and in the order of their groups, and a
    /// writer learns its outcome only once its group's `finish` returned.
    /// [`WriteQueue::wait_for_finish`] lets a `write` wait for the finish
    /// of the group before it.
    #[allow(clippy::too_many_arguments)]
    pub fn submit_staged<S>(
        &self,
        request: T,
        weight: impl Fn(&T) -> u64,
        budget: u64,
        gather: impl Fn(),
        write: impl Fn(&[Arc<Writer<T, R>>]) -> Stage<S, R>,
        finish: impl Fn(&[Arc<Writer<T, R>>], S) -> Vec<R>,
        failed: impl Fn(&str) -> R,
    ) -> Served<T, R> {
        let me = Arc::new(Writer {
            request,
            slot: Mutex::new(Slot::Waiting),
            cv: Condvar::new(),
        });
        let mut state = lock(&self.state);
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
            state = lock(&self.state);
        } else {
            state.leader_active = true;
        }
        drop(state);
        // A panic here only costs the wait: the group is taken below either way.
        let _ = catch_unwind(AssertUnwindSafe(&gather));
        let mut state = lock(&self.state);
        let mut group = Self::take_group(&mut state, &weight, budget);
        drop(state);
        debug_assert!(group.iter().any(|w| Arc::ptr_eq(w, &me)));
        let mut mine = None;
        let mut started = None;
        let mut round = Instant::now();
        loop {
            let staged = Self::write_stage(&group, &write, &failed);
            // Taken before the next leader can exist: finishes go in order.
            // A group served whole has nothing to order (the lsm's, a failed one).
            let ticket = matches!(staged, Stage::Finish(_)).then(|| lock(&self.finishing));
            if round.elapsed() >= CHEAP_ROUND {
                // A round that synced: let the next group's append start
                // now, beside this group's finish.
                let mut state = lock(&self.state);
                Self::hand_on(&mut state);
                drop(state);
                self.finish_group(&mut group, &me, &mut mine, staged, &finish, &failed);
                drop(ticket);
                let mut state = lock(&self.state);
                if state.spare.capacity() == 0 {
                    state.spare = group;
                }
                break;
            }
            self.finish_group(&mut group, &me, &mut mine, staged, &finish, &failed);
            drop(ticket);
            if started.is_some() && round.elapsed() < TINY_ROUND {
                // The writers just woken need a CPU, and this thread would
                // hold one for rounds that each carry little: let them run.
                std::thread::yield_now();
            }
            let started = *started.get_or_insert_with(Instant::now);
            // Serve the groups that queued meanwhile while rounds are cheap: a
            // hand-off wakes another thread, which on a busy machine costs more
            // than an append that does not sync. Rounds that sync end it at once.
            let mut state = lock(&self.state);
            if !state.pending.is_empty()
                && round.elapsed() < CHEAP_ROUND
                && started.elapsed() < EXTRA_ROUNDS_TIME
            {
                group = Self::take_group(&mut state, &weight, budget);
                round = Instant::now();
                continue;
            }
            Self::hand_on(&mut state);
            if state.spare.capacity() == 0 {
                state.spare = group;
            }
            break;
        }
        Served {
            writer: me,
            outcome: mine.expect("the leader is in its first group"),
        }
    }

    /// Waits until the group before the caller's has finished (see
    /// [`WriteQueue::submit_staged`]). Called from a `write` stage, which
    /// runs before its own group takes the turn to finish.
    pub fn wait_for_finish(&self) {
        drop(lock(&self.finishing));
    }
}

/// What the first stage of a group's service left (see
/// [`WriteQueue::submit_staged`]).
#[derive(Debug)]
pub enum Stage<S, R> {
    /// The group is served: one outcome per writer, in order.
    Done(Vec<R>),
    /// The group's ordered part is done; its finish needs this.
    Finish(S),
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

    /// Makes the first stage of `group`'s service; a panic or the wrong
    /// number of outcomes becomes `failed` for every writer.
    fn write_stage<S>(
        group: &[Arc<Writer<T, R>>],
        write: &impl Fn(&[Arc<Writer<T, R>>]) -> Stage<S, R>,
        failed: &impl Fn(&str) -> R,
    ) -> Stage<S, R> {
        match catch_unwind(AssertUnwindSafe(|| write(group))) {
            Ok(Stage::Done(outcomes)) => Stage::Done(Self::checked(group, outcomes, failed)),
            Ok(staged) => staged,
            Err(panic) => {
                let why = panic_message(panic.as_ref());
                Stage::Done(group.iter().map(|_| failed(&why)).collect())
            }
        }
    }

    /// Finishes `group` if its first stage left something to finish, hands
    /// every writer but `me` its outcome, puts `me`'s in `mine`, and leaves
    /// `group` empty (its capacity kept).
    fn finish_group<S>(
        &self,
        group: &mut Vec<Arc<Writer<T, R>>>,
        me: &Arc<Writer<T, R>>,
        mine: &mut Option<R>,
        staged: Stage<S, R>,
        finish: &impl Fn(&[Arc<Writer<T, R>>], S) -> Vec<R>,
        failed: &impl Fn(&str) -> R,
    ) {
        let outcomes = match staged {
            Stage::Done(outcomes) => outcomes,
            Stage::Finish(s) => match catch_unwind(AssertUnwindSafe(|| finish(group, s))) {
                Ok(outcomes) => Self::checked(group, outcomes, failed),
                Err(panic) => {
                    let why = panic_message(panic.as_ref());
                    group.iter().map(|_| failed(&why)).collect()
                }
            },
        };
        for (w, r) in group.iter().zip(outcomes) {
            if Arc::ptr_eq(w, me) {
                *mine = Some(r);
            } else {
                *w.slot.lock() = Slot::Done(r);
                w.cv.notify_one();
            }
        }
        // Drop the group's references before taking the lock, not under it.
        group.clear();
    }

    /// `outcomes` if there is one per writer, else `failed` for each.
    fn checked(
        group: &[Arc<Writer<T, R>>],
        outcomes: Vec<R>,
        failed: &impl Fn(&str) -> R,
    ) -> Vec<R> {
        if outcomes.len() == group.len() {
            return outcomes;
        }
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

    /// Makes the first queued writer the leader, or leaves the queue without one.
    fn hand_on(state: &mut QueueState<T, R>) {
        match state.pending.first() {
            Some(next) => {
                *next.slot.lock() = Slot::Leader;
                next.cv.notify_one();
            }
            None => state.leader_active = false,
        }
    }
}

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
mod tests;
