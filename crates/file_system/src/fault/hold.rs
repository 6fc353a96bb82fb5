//! Holds: an operation caught in the middle, for tests of what others do
//! while it is in flight (a sync that takes long, a writer waiting on it).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::Op;

/// Calls of one operation on files whose name starts with a prefix wait
/// while their [`Hold`] is held.
#[derive(Debug)]
pub(super) struct HoldRule {
    pub op: Op,
    pub name_prefix: String,
    pub gate: Arc<Gate>,
}

impl HoldRule {
    pub fn matches(&self, op: Op, path: &Path) -> bool {
        self.op == op
            && path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&self.name_prefix))
    }
}

#[derive(Debug, Default)]
struct GateState {
    /// Calls waiting now.
    waiting: usize,
    /// Calls that ever waited.
    held: u64,
    released: bool,
}

#[derive(Debug, Default)]
pub(super) struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    /// Waits until the gate is released.
    pub fn pass(&self) {
        let mut s = self.state.lock();
        if s.released {
            return;
        }
        s.waiting += 1;
        s.held += 1;
        self.changed.notify_all();
        while !s.released {
            self.changed.wait(&mut s);
        }
        s.waiting -= 1;
    }
}

/// A hold set by [`super::FaultFs::hold`]; dropping it releases the calls
/// it holds and lets later ones through.
#[derive(Debug)]
pub struct Hold {
    pub(super) gate: Arc<Gate>,
}

impl Hold {
    /// Waits up to `timeout` for a call to be held; returns whether one is.
    pub fn wait_until_held(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut s = self.gate.state.lock();
        while s.waiting == 0 {
            if self.gate.changed.wait_until(&mut s, deadline).timed_out() {
                return s.waiting > 0;
            }
        }
        true
    }

    /// How many calls this hold has held so far.
    pub fn calls_held(&self) -> u64 {
        self.gate.state.lock().held
    }

    /// Lets the held calls, and every later one, through.
    pub fn release(self) {}
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.gate.state.lock().released = true;
        self.gate.changed.notify_all();
    }
}
