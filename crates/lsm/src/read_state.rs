//! `ReadState` and its `Installer`: what a reader sees (a version, the
//! memtables and the visible sequence number), published together behind
//! one pointer, and the one path that installs a new version.
//!
//! A reader calls [`Installer::load`] (a short borrow for one lookup),
//! [`Installer::load_full`] (an `Arc<ReadState>`: a snapshot or an
//! iterator's pin) or [`Installer::load_with_visible`] (a state and the
//! seqno to read at without a snapshot) and reads over exactly those
//! memtables and files, however long it takes: later installs publish new
//! states and never change a loaded one. Readers take no lock at all.
//!
//! Installing (flush, compaction, ingestion), in [`Installer::install`]:
//! 1. take the installer lock (installers only: it serializes them, so no
//!    installer can build on a version another is replacing and lose its
//!    edits);
//! 2. take the next version from the current one with a
//!    [`VersionBuilder`] (cheap: see `version/builder.rs`; no reader waits
//!    on it anyway): built before the lock was taken, against the version
//!    current then, if that is still the current one; built again under
//!    the lock if not (another install came between);
//! 3. persist the edits through the caller's [`PersistEdits`] hook: the
//!    engine appends them to the manifest, unsynced; if that fails nothing
//!    changes: the built version is dropped, no file is marked obsolete;
//! 4. swap in a new `ReadState` holding the new version, the current
//!    memtables (less the flushed ones) and the visible seqno (raised to the
//!    install's, for ingestion), with a compare-and-swap loop, since writers
//!    publish visible seqnos and switch memtables without the lock;
//! 5. release the lock, then make the edits durable
//!    ([`PersistEdits::make_durable`]: the engine syncs the manifest, one
//!    sync covering every install appended before it);
//! 6. mark the files the edits removed obsolete: each is deleted when the
//!    last state, version or iterator holding it is dropped. The installer
//!    holds them until then, so none is deleted before the edit that
//!    removed it is durable.
//!
//! The sync runs outside the lock: it is most of an install's time (a
//! millisecond, tens of them while compactions write), and under the lock
//! every other install of the family waited for it. Publishing first is
//! safe for flushes and compactions: their new version holds the same data
//! as the old one, and what a crash before the sync needs is still there
//! (the WAL, the inputs: both deleted only once the edit is durable). An
//! ingestion publishes data no earlier state had, so
//! [`Installer::install_sequenced`] makes it durable under the lock, before
//! publishing, as every install did before.
//!
//! Each install records how long it waited for the lock, held it, built the
//! version, persisted the edits and made them durable
//! (`install_timing.rs`, reported in `Statistics::install`). Building under
//! the lock is cheap at any file count (persistent B-tree levels: O(log n)
//! copied nodes per changed file), and so is the unsynced append.
//!
//! Invariants:
//! - A file an install removed is marked obsolete only after the install's
//!   edits are durable; a published state may be ahead of the durable
//!   manifest, so whatever acts on a state's durability (the engine's WAL
//!   deletion) first makes the manifest durable.
//! - The visible seqno of the published state never goes backwards
//!   (debug-asserted at every swap; tikv/tikv#19891 crashed a production
//!   cluster over one that did).
//! - The version of the published state changes only under the manifest
//!   lock, so an installer holding the lock sees its base stay current.
//! - An ingestion's files and its seqno are published in one swap: no
//!   reader can see the seqno visible without the files, or the reverse.
//!
//! Concurrency contract / lock order:
//! - `manifest` (a `parking_lot::Mutex<()>`, the installer lock) guards
//!   the right to change `state.version` and to append to the manifest.
//!   Taken by installers only, never by readers or by writers publishing
//!   seqnos. It is lock 3 of `docs/lsm.md`; nothing in this module is taken
//!   under it but the caller's persist hook (its own file locks; for
//!   ingestion its sync too). Obsolete files are marked after it is
//!   released.
//! - `state` (an `ArcSwap`) is loaded lock-free by everyone; it is stored by
//!   compare-and-swap from installers, [`Installer::publish_visible`] and
//!   [`Installer::switch_memtable`], each retrying on a lost race.

use std::sync::Arc;
use std::time::Instant;

use arc_swap::{ArcSwap, Guard};
use parking_lot::Mutex;

use crate::install_timing::InstallTimes;
use crate::key::SeqNo;
use crate::memtable::{Memtable, MemtableId, MemtableList};
use crate::version::{BuiltVersion, EditError, Version, VersionBuilder, VersionEdit};

/// What a reader sees: one version of the files, the memtables above it and
/// the sequence number below which everything in them is whole.
#[derive(Debug, Clone)]
pub struct ReadState {
    /// The SST files.
    pub version: Arc<Version>,
    /// The memtable writers insert into.
    pub active: Arc<Memtable>,
    /// Full memtables waiting for a flush, newest first.
    pub immutables: MemtableList,
    /// The last sequence number a reader of this state may see.
    pub visible: SeqNo,
}

/// The hook that writes an install's edits to the manifest: appended under
/// the installer lock by [`PersistEdits::persist`], made durable by
/// [`PersistEdits::make_durable`] (after publishing, outside the lock, for
/// [`Installer::install`]; before publishing, under it, for
/// [`Installer::install_sequenced`]). An error from `persist` aborts the
/// install with nothing changed.
pub trait PersistEdits {
    /// Called with the edits before the installer lock is taken, so that
    /// work that needs no lock (encoding them) is done outside it. An error
    /// aborts the install with nothing changed. The default does nothing.
    fn prepare(&mut self, _edits: &[VersionEdit]) -> crate::Result<()> {
        Ok(())
    }

    /// Writes `edits`, which turn the current version into `version`; they
    /// need not be durable when this returns. Called under the installer
    /// lock: keep it short (an `Arc` to keep, not a copy of the version).
    fn persist(&mut self, edits: &[VersionEdit], version: &Arc<Version>) -> crate::Result<()>;

    /// Makes durable what the last `persist` wrote. Called once after each
    /// successful `persist`. The default does nothing: for a hook whose
    /// `persist` is durable already.
    fn make_durable(&mut self) -> crate::Result<()> {
        Ok(())
    }
}

impl<F> PersistEdits for F
where
    F: FnMut(&[VersionEdit], &Arc<Version>) -> crate::Result<()>,
{
    fn persist(&mut self, edits: &[VersionEdit], version: &Arc<Version>) -> crate::Result<()> {
        self(edits, version)
    }
}

/// One change to install.
#[derive(Debug, Clone, Copy, Default)]
pub struct Install<'a> {
    /// The version edits, applied in order.
    pub edits: &'a [VersionEdit],
    /// For a flush: the memtables at or below this id are now in files and
    /// leave the state in the same swap.
    pub flushed: Option<MemtableId>,
    /// For an ingestion: the seqno of the ingested files, made visible in
    /// the same swap as the files.
    pub visible: Option<SeqNo>,
}

/// Why an install did not happen; in every case but
/// [`InstallError::Sequence`] and [`InstallError::Durability`] nothing
/// changed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// An edit does not apply to the current version.
    #[error("version edit refused: {0}")]
    Edit(#[from] EditError),
    /// The persist hook failed.
    #[error("persisting the version edits failed: {0}")]
    Persist(#[source] crate::Error),
    /// The edits were persisted, but what was to be published in their
    /// place could not be made: the manifest is ahead of the published
    /// state, and the caller must stop writes.
    #[error("the version edits are durable but could not be published: {0}")]
    Sequence(#[source] crate::Error),
    /// The new state was published, but making its edits durable failed:
    /// the caller must stop writes. The files the edits removed are not
    /// marked obsolete (a reopen, which recovers the durable manifest,
    /// deletes what it does not name), and the files they added must stay.
    #[error("the version was published but its edits could not be made durable: {0}")]
    Durability(#[source] crate::Error),
}

/// What [`Installer::install_sequenced`] publishes in place of the edits it
/// persisted: the same files at the seqnos allocated under the lock.
#[derive(Debug)]
pub struct Sequenced {
    /// The edits to publish (applied to the same base as the persisted ones).
    pub edits: Vec<VersionEdit>,
    /// The seqno made visible in the same swap.
    pub visible: SeqNo,
}

/// Publishes read states: lock-free loads for readers, serialized installs.
#[derive(Debug)]
pub struct Installer {
    state: ArcSwap<ReadState>,
    /// Held by installers only; guards changes of `state.version`.
    manifest: Mutex<()>,
    /// How long installs wait for, and hold, `manifest`.
    times: Arc<InstallTimes>,
}

impl Installer {
    /// Starts with `initial` published, recording install times of its own.
    pub fn new(initial: ReadState) -> Installer {
        Installer::with_times(initial, Arc::default())
    }

    /// Starts with `initial` published, recording install times into
    /// `times` (shared by the installers of every family of an engine).
    pub fn with_times(initial: ReadState, times: Arc<InstallTimes>) -> Installer {
        Installer {
            state: ArcSwap::from_pointee(initial),
            manifest: Mutex::new(()),
            times,
        }
    }

    /// Returns the recorders of this installer's install times.
    pub fn times(&self) -> &Arc<InstallTimes> {
        &self.times
    }

    /// Returns the current state for a short read (no refcount traffic in
    /// the common case). Hold it briefly: use [`Installer::load_full`] for a
    /// snapshot or an iterator.
    pub fn load(&self) -> Guard<Arc<ReadState>> {
        self.state.load()
    }

    /// The current state and the seqno a read without a snapshot reads at
    /// through it: `visible()`, taken while that state was current. Every
    /// write at or below it is then in the state, and no version a read at
    /// it needs was dropped: the flushes and compactions the state holds
    /// ran before, and dropped only versions hidden by a newer one visible
    /// then. Taken the other way round (the seqno, then the state), a flush
    /// installed between the two could drop the newest version below a
    /// write that became visible meanwhile, and the read found nothing.
    pub fn load_with_visible(&self, visible: impl Fn() -> SeqNo) -> (Guard<Arc<ReadState>>, SeqNo) {
        let mut state = self.load();
        loop {
            let seqno = visible();
            #[cfg(test)]
            read_pause::hit();
            let again = self.load();
            if Arc::ptr_eq(&state, &again) {
                return (again, seqno);
            }
            state = again;
        }
    }

    /// Returns the current state as an `Arc`: a snapshot that keeps its
    /// version, memtables and files alive for as long as it is held.
    pub fn load_full(&self) -> Arc<ReadState> {
        self.state.load_full()
    }

    /// Installs `change`: builds the next version from the current one,
    /// appends the edits with `persist`, publishes the new state, releases
    /// the lock, makes the edits durable and marks the removed files
    /// obsolete. Returns the published state once the edits are durable.
    /// On error nothing changed, but for [`InstallError::Durability`].
    pub fn install(
        &self,
        change: Install<'_>,
        persist: &mut dyn PersistEdits,
    ) -> Result<Arc<ReadState>, InstallError> {
        self.install_inner(change, persist, None)
    }

    /// Installs `change` as [`Installer::install`] does, except that what
    /// is published is what `sequence` returns, called under the lock once
    /// the edits are durable: an ingestion persists its files at a seqno
    /// taken earlier and publishes them at one it allocates only now, so
    /// that the manifest's sync never holds the visible seqno back (the
    /// ingestion's latch keeps every write of its range out of the seqnos
    /// between, so both order the range alike; `db/ingest.rs`). If
    /// `sequence` fails, or its edits do not apply, the persisted edits are
    /// durable but not installed: [`InstallError::Sequence`], and the
    /// caller must stop writes (a reopen installs them). The edits are made
    /// durable before anything is published: an ingestion's state holds
    /// data no earlier one had.
    pub fn install_sequenced(
        &self,
        change: Install<'_>,
        persist: &mut dyn PersistEdits,
        sequence: &mut dyn FnMut() -> crate::Result<Sequenced>,
    ) -> Result<Arc<ReadState>, InstallError> {
        self.install_inner(change, persist, Some(sequence))
    }

    fn install_inner(
        &self,
        change: Install<'_>,
        persist: &mut dyn PersistEdits,
        sequence: Option<&mut dyn FnMut() -> crate::Result<Sequenced>>,
    ) -> Result<Arc<ReadState>, InstallError> {
        // Built ahead, outside the lock, against the version current now;
        // used if it is still current once the lock is taken (the usual
        // case), so the lock holds only the append and the swap: every
        // microsecond it is held is one a waking thread can preempt the
        // holder in. An ingestion builds under the lock: it rebuilds anyway.
        let ahead = if sequence.is_none() {
            let base = self.state.load().version.clone();
            build(&base, change.edits).ok().map(|built| (base, built))
        } else {
            None
        };
        persist
            .prepare(change.edits)
            .map_err(InstallError::Persist)?;
        let switches = strata_fs::thread_involuntary_switches();
        let called = Instant::now();
        let manifest = self.manifest.lock();
        let locked = Instant::now();
        let base = self.state.load().version.clone();
        let mut built = match ahead {
            Some((ahead_base, built)) if Arc::ptr_eq(&ahead_base, &base) => built,
            _ => build(&base, change.edits)?,
        };
        let persisting = Instant::now();
        persist
            .persist(change.edits, &built.version)
            .map_err(InstallError::Persist)?;
        let durable_first = sequence.is_some();
        if durable_first {
            persist.make_durable().map_err(InstallError::Persist)?;
        }
        let persisted = Instant::now();
        let mut visible = change.visible.unwrap_or(0);
        if let Some(sequence) = sequence {
            let sequenced = sequence().map_err(InstallError::Sequence)?;
            let mut builder = VersionBuilder::new(&base);
            for edit in &sequenced.edits {
                builder.apply(edit).map_err(|e| {
                    InstallError::Sequence(crate::Error::ReadOnly(format!(
                        "sequenced edit refused after its persisted form applied: {e}"
                    )))
                })?;
            }
            built = builder.build();
            visible = sequenced.visible;
        }
        let swapped = self.swap(|cur| {
            debug_assert!(
                Arc::ptr_eq(&cur.version, &base),
                "the version changed under the installer lock"
            );
            Some(ReadState {
                version: built.version.clone(),
                active: cur.active.clone(),
                immutables: match change.flushed {
                    Some(id) => cur.immutables.without_flushed(id),
                    None => cur.immutables.clone(),
                },
                visible: cur.visible.max(visible),
            })
        });
        let released = Instant::now();
        drop(manifest);
        // The state replaced is dropped here, after the lock: if no reader
        // holds it, its memtables and version go with it.
        let published = swapped.map(|(new, _replaced)| new);
        let preempted = switches.is_none() || strata_fs::thread_involuntary_switches() != switches;
        let durable = if durable_first {
            Ok(())
        } else {
            persist.make_durable()
        };
        let done = Instant::now();
        let t = &self.times;
        t.lock_wait.record(locked - called);
        t.build.record(persisting - locked);
        t.persist.record(persisted - persisting);
        t.lock_held.record(released - locked);
        if !preempted {
            t.lock_held_unpreempted.record(released - locked);
        }
        if !durable_first {
            t.durable.record(done - released);
        }
        durable.map_err(InstallError::Durability)?;
        // Only now, with the new state published and its edits durable, may
        // the removed files go: old states may still hold them, and the
        // last drop queues them.
        for file in &built.removed {
            file.mark_obsolete();
        }
        for blob in &built.removed_blobs {
            blob.mark_obsolete();
        }
        Ok(published.expect("an install always publishes"))
    }

    /// Raises the visible seqno of the published state to `seqno`; a lower
    /// value than the published one is a race lost to a later writer and
    /// changes nothing. For a user of the installer whose writers publish
    /// through the state. The engine's writers publish through the sequence
    /// allocator instead (no swap per write), and its readers combine the
    /// two with [`Installer::load_with_visible`].
    pub fn publish_visible(&self, seqno: SeqNo) {
        self.swap(|cur| {
            (seqno > cur.visible).then(|| ReadState {
                visible: seqno,
                ..cur.clone()
            })
        });
    }

    /// Makes `active` the memtable writers insert into, and the current one
    /// the newest immutable. Fails, changing nothing, unless `active`'s id is
    /// above the current one's.
    pub fn switch_memtable(&self, active: Arc<Memtable>) -> crate::Result<()> {
        let mut err = None;
        self.swap(|cur| {
            if active.id() <= cur.active.id() {
                err = Some(crate::Error::InvalidArgument(format!(
                    "memtable {} is not newer than the active memtable {}",
                    active.id(),
                    cur.active.id()
                )));
                return None;
            }
            match cur.immutables.with_newest(cur.active.clone()) {
                Ok(immutables) => Some(ReadState {
                    version: cur.version.clone(),
                    active: active.clone(),
                    immutables,
                    visible: cur.visible,
                }),
                Err(e) => {
                    err = Some(e);
                    None
                }
            }
        });
        err.map_or(Ok(()), Err)
    }

    /// Replaces the published state with `next(current)` by compare-and-swap,
    /// retrying with the new current state when another thread swapped
    /// first; `None` from `next` leaves the state as it is. Returns what was
    /// published and the state it replaced, for the caller to drop where it
    /// likes (an installer: after its lock).
    fn swap(
        &self,
        mut next: impl FnMut(&ReadState) -> Option<ReadState>,
    ) -> Option<(Arc<ReadState>, Arc<ReadState>)> {
        let mut cur = self.state.load_full();
        loop {
            let new = Arc::new(next(&cur)?);
            // Always on: one compare per publication, and a visible seqno
            // going backwards is silent data loss for readers.
            assert!(
                new.visible >= cur.visible,
                "visible seqno going backwards: {} -> {}",
                cur.visible,
                new.visible
            );
            let prev = self.state.compare_and_swap(&cur, new.clone());
            if Arc::ptr_eq(&prev, &cur) {
                return Some((new, cur));
            }
            cur = Guard::into_inner(prev);
        }
    }
}

/// Applies `edits` to `base`.
fn build(base: &Arc<Version>, edits: &[VersionEdit]) -> Result<BuiltVersion, EditError> {
    let mut builder = VersionBuilder::new(base);
    for edit in edits {
        builder.apply(edit)?;
    }
    Ok(builder.build())
}

/// A pause between a read's seqno and its state, for tests that install a
/// state there.
#[cfg(test)]
pub(crate) mod read_pause {
    use std::cell::RefCell;

    thread_local! {
        static HOOK: RefCell<Option<Box<dyn FnOnce()>>> = RefCell::new(None);
    }

    /// Runs `f` once, on this thread, at its next read's pause.
    pub fn once(f: impl FnOnce() + 'static) {
        HOOK.with(|h| *h.borrow_mut() = Some(Box::new(f)));
    }

    pub(crate) fn hit() {
        if let Some(f) = HOOK.with(|h| h.borrow_mut().take()) {
            f();
        }
    }
}
