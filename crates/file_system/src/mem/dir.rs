//! One in-memory directory: the names the page cache shows, the names the disk
//! holds, and the changes in between.
//!
//! Invariants:
//! - `live` equals `durable` with every change of `pending` applied in order.
//! - `pending` is empty right after a `sync_dir`.

use std::collections::BTreeMap;

use super::path::Key;

/// The names of one directory's files, each to its inode.
pub(super) type Names = BTreeMap<String, u64>;

/// What a logged change did, as the caller asked for it; a crash reports it
/// to `MemFs::crash_keeping` this way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Change {
    Create { path: Key },
    Rename { from: Key, to: Key },
    Remove { path: Key },
}

/// One name changed by one change. A rename logs two: the unlink of its source
/// and the link of its target, in their own directories, under one `seq`, so
/// that a crash keeps both or neither.
#[derive(Clone, Debug)]
pub(super) struct DirOp {
    /// Orders changes across directories; shared by the halves of a rename.
    pub(super) seq: u64,
    pub(super) change: Change,
    pub(super) name: String,
    /// The inode the name now points to, or `None` when it was unlinked.
    pub(super) target: Option<u64>,
}

impl DirOp {
    /// Applies the op to a namespace.
    pub(super) fn apply(&self, names: &mut Names) {
        match self.target {
            Some(ino) => names.insert(self.name.clone(), ino),
            None => names.remove(&self.name),
        };
    }
}

/// The names in one directory, live and durable.
#[derive(Clone, Debug, Default)]
pub(super) struct Dir {
    pub(super) live: Names,
    pub(super) durable: Names,
    pending: Vec<DirOp>,
}

impl Dir {
    /// Applies `op` to the live names and logs it.
    pub(super) fn change(&mut self, op: DirOp) {
        op.apply(&mut self.live);
        self.pending.push(op);
    }

    /// Makes the live names durable (`sync_dir`).
    pub(super) fn sync(&mut self) {
        self.durable.clone_from(&self.live);
        self.pending.clear();
    }

    /// Returns the unsynced changes, leaving none.
    pub(super) fn take_pending(&mut self) -> Vec<DirOp> {
        std::mem::take(&mut self.pending)
    }

    /// Sets both namespaces to what the disk holds after a crash.
    pub(super) fn reset(&mut self, names: Names) {
        self.live.clone_from(&names);
        self.durable = names;
        self.pending.clear();
    }
}
