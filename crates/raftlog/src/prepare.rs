//! Makes the append queue's next file ahead of time, on a thread of its own,
//! so that a rotation on the group-commit leader's path is no system call at
//! all instead of a creation, a preallocation, a header write and two syncs
//! (the file's and the directory's, the latter a journal commit that takes
//! milliseconds while other processes create files).
//!
//! It also starts the writeback of unsynced appends (`Preparer::start_writeback`),
//! a hint that can block while the device's queue is full, and drops
//! cached pages (`cache_drop.rs`): a recycled file's old ones just ahead of
//! the appends, synced ones some way behind them.
//!
//! The preparer, woken after each rotation:
//! 1. renames the file the rotation made active from its `recycle-` name to
//!    its own (a rename waits milliseconds on the journal while it commits);
//! 2. writes the index section of the file the rotation sealed and starts
//!    its writeback, paced (`SECTION_PACE`), without a sync: every byte of
//!    data was synced already, by its writers or by the rotation, and a
//!    section that a power cut tore fails its checksum and the file is
//!    scanned instead. A sync there
//!    was a device flush on top of the leader's, which every writer waited
//!    out right after each rotation;
//! 3. takes a recycled file (dropping the cache of its first few MiB, see
//!    `cache_drop.rs`, the rest as the appends reach it), or creates a
//!    fresh one under a `recycle-` name and preallocates it a few MiB at a
//!    time (`allocate_gently`);
//! 4. syncs the directory: the rename of step 1, a purge's renames into the
//!    recycled pool and the fresh file's name are durable from here on;
//! 5. writes the next file's first page (header, end marker, zeros) and
//!    syncs the file.
//!
//! It runs at a lower CPU priority (`strata_fs::lower_thread_priority`): a
//! section is megabytes to encode (2-7 ms for a 128 MiB file of 1,000
//! groups), time the leader and the writers need on two cores.
//!
//! A rotation takes the prepared file only if it names the file the rotation
//! needs, and leaves its rename to step 1. So at most one name of the append
//! queue, the active file's, is ever not durable, and recovery finds the file
//! under its `recycle-` name by its header (`recovery::adopt_prepared`).
//! Otherwise (the preparer is behind or failed) the leader finishes that
//! rename itself, syncs the directory and makes the file, as before.
//!
//! The preparer never reports an error: a failed step leaves nothing
//! prepared (or the rename pending), and the leader's own path then meets
//! the same failure and reports it (a failed directory sync poisons the
//! engine there).

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};
use strata_fs::{File, FileSystem};

use crate::cache_drop::{DropAhead, DropRange, DROP_AHEAD_BYTES};
use crate::format::{FileId, RECYCLE_PREFIX};
use crate::metrics::Metrics;
use crate::pipe::{file_head, ActiveFile, SectionPace};
use crate::section::SectionBuilder;
use crate::Config;

/// A file ready to become the append queue's next: its header (naming `id`)
/// and its current name are durable.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub id: FileId,
    /// Its name in the directory, a `recycle-` name.
    pub name: String,
    pub file: Arc<dyn File>,
    /// A recycled file whose old cache is dropped ahead of the appends.
    pub drop_ahead: Option<DropAhead>,
}

/// The active file's rename left to the preparer (step 1).
#[derive(Debug)]
struct Rename {
    from: String,
    to: FileId,
}

impl State {
    /// The oldest sealed file whose section is queued or being written.
    fn oldest_sealing(&self) -> Option<u64> {
        let queued = self.seal.first().map(|f| f.id.seq);
        match (self.sealing, queued) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// The file to prepare next; `None` once it is ready.
    want: Option<FileId>,
    ready: Option<Prepared>,
    /// Sealed files whose index sections are to be written and synced, in
    /// rotation order.
    seal: Vec<ActiveFile>,
    /// The oldest sealed file whose section is still being written.
    sealing: Option<u64>,
    /// Hints for the active file: writeback to start (unsynced appends),
    /// old cache to drop.
    hints: Vec<Hint>,
    stop: bool,
}

/// A hint the leader leaves to the preparer: both can block (the first while
/// the device's queue is full, the second on the kernel's freeing of pages).
#[derive(Debug)]
enum Hint {
    Writeback(Arc<dyn File>, u64, u64),
    Drop(DropRange),
}

#[derive(Debug)]
struct Shared {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    config: Config,
    recycled: Arc<Mutex<Vec<String>>>,
    metrics: Arc<Metrics>,
    state: Mutex<State>,
    /// Held while the rename is done, so that the leader, making a file
    /// itself, waits for one in progress.
    rename: Mutex<Option<Rename>>,
    /// A sealed file's section builder, emptied for the next file to reuse
    /// (`SectionBuilder::reset`).
    spare: Mutex<Option<SectionBuilder>>,
    wake: Condvar,
    /// Notified when the sections being written are done.
    sealed: Condvar,
}

/// The preparing thread and what it shares with the leader. Dropping it
/// stops the thread; a file it prepared stays in the recycled pool.
#[derive(Debug)]
pub(crate) struct Preparer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Preparer {
    /// Starts the thread, preparing `first` at once.
    pub fn start(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        config: Config,
        recycled: Arc<Mutex<Vec<String>>>,
        metrics: Arc<Metrics>,
        first: FileId,
    ) -> std::io::Result<Preparer> {
        let shared = Arc::new(Shared {
            fs,
            dir,
            config,
            recycled,
            metrics,
            state: Mutex::new(State {
                want: Some(first),
                ..State::default()
            }),
            rename: Mutex::new(None),
            spare: Mutex::new(None),
            wake: Condvar::new(),
            sealed: Condvar::new(),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("raftlog-prepare".into())
                .spawn(move || shared.run())?
        };
        Ok(Preparer {
            shared,
            thread: Some(thread),
        })
    }

    /// Takes the prepared file if it is `id`'s. Its name is the preparer's
    /// to change: hand it back with [`Preparer::rotated`].
    pub fn take(&self, id: FileId) -> Option<Prepared> {
        let mut state = self.shared.state.lock();
        if state.ready.as_ref().is_some_and(|p| p.id == id) {
            return state.ready.take();
        }
        None
    }

    /// A section builder emptied for a new file, if one is ready: it keeps
    /// the allocations of the groups the last sealed file changed.
    pub fn spare_builder(&self) -> Option<SectionBuilder> {
        self.shared.spare.lock().take()
    }

    /// Renames the active file into place if that is still to be done (the
    /// preparer is behind, or its rename failed): the next file's name must
    /// not become durable before it.
    pub fn finish_rename(&self) -> crate::Result<()> {
        self.shared.finish_rename()
    }

    /// Starts writeback of `len` bytes of `file` from `offset`, on the
    /// preparer's thread: the hint can block while the device's queue is
    /// full, which must not happen on the leader's path.
    pub fn start_writeback(&self, file: Arc<dyn File>, offset: u64, len: u64) {
        let mut state = self.shared.state.lock();
        state.hints.push(Hint::Writeback(file, offset, len));
        self.shared.wake.notify_one();
    }

    /// Drops `range`'s cached pages on the preparer's thread (see
    /// `cache_drop.rs`).
    pub fn drop_cache(&self, range: DropRange) {
        let mut state = self.shared.state.lock();
        state.hints.push(Hint::Drop(range));
        self.shared.wake.notify_one();
    }

    /// Waits until the index section of every sealed append file up to
    /// `seq` is written, for at most `timeout`; returns whether they are. A
    /// file whose section is still to be written must not be kept for reuse:
    /// its new life would take the section's bytes.
    pub fn wait_sealed(&self, seq: u64, timeout: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut state = self.shared.state.lock();
        while state.oldest_sealing().is_some_and(|s| s <= seq) {
            if self
                .shared
                .sealed
                .wait_until(&mut state, deadline)
                .timed_out()
            {
                return state.oldest_sealing().is_none_or(|s| s > seq);
            }
        }
        true
    }

    /// After a rotation to `active`: rename it from `name` if it is a
    /// prepared file still under its `recycle-` name, write the index
    /// section of `sealed`, the file it replaced (whose data is durable
    /// already), and prepare the file after it.
    pub fn rotated(&self, active: FileId, name: Option<String>, sealed: ActiveFile) {
        if let Some(from) = name {
            let mut rename = self.shared.rename.lock();
            debug_assert!(rename.is_none(), "a rotation left a rename pending");
            *rename = Some(Rename { from, to: active });
        }
        let mut state = self.shared.state.lock();
        if let Some(stale) = state.ready.take() {
            // Prepared for another id (the leader made its file itself):
            // back to the pool, where it is an ordinary recycled file.
            self.shared.recycled.lock().push(stale.name);
        }
        state.want = Some(FileId {
            queue: active.queue,
            seq: active.seq + 1,
        });
        state.seal.push(sealed);
        self.shared.wake.notify_one();
    }
}

impl Drop for Preparer {
    fn drop(&mut self) {
        self.shared.state.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Shared {
    fn run(&self) {
        strata_fs::lower_thread_priority();
        loop {
            let (want, seal, hints) = {
                let mut state = self.state.lock();
                loop {
                    if state.stop && state.seal.is_empty() {
                        return;
                    }
                    if !state.seal.is_empty() || state.want.is_some() || !state.hints.is_empty() {
                        break;
                    }
                    self.wake.wait(&mut state);
                }
                let seal = std::mem::take(&mut state.seal);
                state.sealing = seal.first().map(|f| f.id.seq);
                let want = if state.stop { None } else { state.want.take() };
                (want, seal, std::mem::take(&mut state.hints))
            };
            // Step 1. A failure leaves it pending, and nothing prepared: the
            // leader's next rotation meets it and reports it.
            let renamed = self.finish_rename().is_ok();
            for hint in hints {
                match hint {
                    // An error stays with the file, and its sync reports it.
                    Hint::Writeback(file, offset, len) => {
                        let _ = file.start_writeback(offset, len);
                    }
                    Hint::Drop(range) => range.run(),
                }
            }
            let sealed_any = !seal.is_empty();
            let mut spent = Vec::with_capacity(seal.len());
            for sealed in seal {
                // Best effort, unsynced: see the module doc, step 2.
                if sealed.write_index_section_paced(&SECTION_PACE).is_ok() {
                    Metrics::add(&self.metrics.index_sections_written, 1);
                    // What no piece hinted: a section written in one piece,
                    // and a trailer apart from it at the end of a
                    // preallocated file.
                    let _ = sealed.file.start_writeback(sealed.offset, 0);
                }
                spent.push(std::mem::take(&mut *sealed.section.lock()));
            }
            if sealed_any {
                self.state.lock().sealing = None;
                self.sealed.notify_all();
            }
            if let Some(id) = want.filter(|_| renamed) {
                self.make_ready(id);
            }
            for mut builder in spent {
                builder.reset();
                let mut spare = self.spare.lock();
                if spare.is_none() {
                    *spare = Some(builder);
                } else {
                    drop(spare);
                    drop(builder);
                }
            }
        }
    }

    /// Steps 3 to 5 for `id`, and the file offered to the next rotation.
    fn make_ready(&self, id: FileId) {
        let prepared = self.prepare(id);
        let mut state = self.state.lock();
        match prepared {
            // Still wanted: no rotation came in between.
            Some(p) if state.want.is_none() && state.ready.is_none() => {
                state.ready = Some(p);
                // Counted once ready to take (tests wait on it).
                Metrics::add(&self.metrics.files_prepared, 1);
            }
            Some(p) => self.recycled.lock().push(p.name),
            None => {}
        }
    }

    fn finish_rename(&self) -> crate::Result<()> {
        let mut pending = self.rename.lock();
        let Some(rename) = pending.as_ref() else {
            return Ok(());
        };
        let from = self.dir.join(&rename.from);
        fail::fail_point!("raftlog::rotate::rename", |_| Err(crate::Error::Io {
            op: "rename",
            path: from.clone(),
            source: std::io::Error::other("fail point"),
        }));
        // Not followed by a directory sync: the next file's preparation
        // makes it durable (step 4), and recovery finds the file by its
        // header until then.
        self.fs
            .rename(&from, &self.dir.join(rename.to.file_name()))
            .map_err(crate::Error::io("rename", &from))?;
        *pending = None;
        Ok(())
    }

    /// Steps 3 to 5 of the module doc; `None` if any of them failed.
    fn prepare(&self, id: FileId) -> Option<Prepared> {
        fail::fail_point!("raftlog::prepare", |_| None);
        let reused = self.recycled.lock().pop();
        let (name, file, drop_ahead) = match reused {
            Some(name) => match self.fs.open(&self.dir.join(&name), true) {
                Ok(file) => {
                    Metrics::add(&self.metrics.files_recycled, 1);
                    let mut drop_ahead = None;
                    if self.metrics.appends_are_large() {
                        // Best effort, as every drop of the cache.
                        let len = file.len().unwrap_or(0);
                        let _ = file.drop_cache(0, DROP_AHEAD_BYTES.min(len));
                        drop_ahead = Some(DropAhead::new(DROP_AHEAD_BYTES, len));
                    }
                    (name, file, drop_ahead)
                }
                Err(_) => {
                    self.recycled.lock().push(name);
                    return None;
                }
            },
            None => {
                let name = format!("{RECYCLE_PREFIX}prepared-{:016x}", id.seq);
                let path = self.dir.join(&name);
                let file = self.fs.create(&path).ok()?;
                if self.config.preallocate
                    && allocate_gently(file.as_ref(), self.config.target_file_size_bytes).is_err()
                {
                    let _ = self.fs.remove(&path);
                    return None;
                }
                (name, file, None)
            }
        };
        let give_back = |name: String| {
            self.recycled.lock().push(name);
            None
        };
        if self.fs.sync_dir(&self.dir).is_err() {
            return give_back(name);
        }
        Metrics::add(&self.metrics.fsyncs, 1);
        let head = file_head(id, &self.config);
        if file.write_at(0, &head).is_err() || file.sync_all().is_err() {
            return give_back(name);
        }
        Metrics::add(&self.metrics.fsyncs, 1);
        Some(Prepared {
            id,
            name,
            file,
            drop_ahead,
        })
    }
}

/// How a sealed file's index section is encoded and written: a pause of 1
/// ms after every 2,048 groups encoded and after every 256 KiB written. At
/// 100,000 groups a section is about 10 MB for 128 MiB of log and takes tens
/// of milliseconds to encode, and for the 50-100 ms after each rotation the
/// leader's syncs took 2-5 ms (M-100K, traced). The writes' p99.9 there:
/// written at once 2.7-4.5 ms and paced 1.8-3.3 ms (six pairs of runs,
/// alternated, lower paced in every pair); in throwaway builds, 1.0-1.1 ms
/// with no section and 2.2-3.0 ms with it encoded but not written (two runs
/// each; `docs/bench/raftlog-vs-peers.md`). Pacing the writes alone changed
/// nothing.
const SECTION_PACE: SectionPace = SectionPace {
    groups: 2048,
    piece_bytes: 256 << 10,
    pause: std::time::Duration::from_millis(1),
};

/// `allocate_gently` reserves this much of a fresh file at a time...
const ALLOCATE_PIECE_BYTES: u64 = 8 << 20;
/// ...and pauses this long between pieces.
const ALLOCATE_PAUSE: std::time::Duration = std::time::Duration::from_millis(1);

/// Preallocates a fresh file to `len` bytes a few MiB at a time. At 100,000
/// groups (M-100K, traced) one leader sync per fresh file took 5-8 ms, where
/// a sync takes a few hundred microseconds, while the preparer made the file:
/// one 128 MiB `fallocate` (the allocation of 32,768 blocks and their
/// metadata in one call), a directory sync and the file's sync. In pieces,
/// with pauses, the allocation's metadata work is spread out, and the
/// leader's syncs meet at most one piece of it.
fn allocate_gently(file: &dyn File, len: u64) -> std::io::Result<()> {
    let mut at = 0;
    while at < len {
        at = (at + ALLOCATE_PIECE_BYTES).min(len);
        file.allocate(at)?;
        if at < len {
            std::thread::sleep(ALLOCATE_PAUSE);
        }
    }
    Ok(())
}

/// Recovery's half of the rule above: a prepared file renamed into place by
/// a rotation whose rename a crash lost is still under its `recycle-` name,
/// yet may hold acknowledged records. Such a file names in its header the
/// append file after the last one `ids` holds, and starts with a valid
/// record. If one is among `recycled`, it is renamed into place (durably),
/// taken out of `recycled` and its id added to `ids`; returns its new path.
///
/// No other recycled file can match: every other one was once a file of the
/// queue at or below the last one, or was prepared and never written (its
/// header is followed by an end marker).
pub(crate) fn adopt_prepared(
    fs: &dyn FileSystem,
    dir: &std::path::Path,
    ids: &mut Vec<FileId>,
    recycled: &mut Vec<String>,
) -> crate::Result<Option<PathBuf>> {
    let Some((i, want)) = prepared_to_adopt(fs, dir, ids, recycled) else {
        return Ok(None);
    };
    let path = dir.join(&recycled[i]);
    let to = dir.join(want.file_name());
    fs.rename(&path, &to)
        .map_err(crate::Error::io("rename", &path))?;
    fs.sync_dir(dir)
        .map_err(crate::Error::io("sync dir", dir))?;
    recycled.swap_remove(i);
    ids.push(want);
    Ok(Some(to))
}

/// The recycled file [`adopt_prepared`] would adopt, if any: its position in
/// `recycled` and the append file it is. Reads, never writes.
pub fn prepared_to_adopt(
    fs: &dyn FileSystem,
    dir: &std::path::Path,
    ids: &[FileId],
    recycled: &[String],
) -> Option<(usize, FileId)> {
    use crate::format::RECORD_HEADER_LEN;
    use crate::format::{decode_file_header, HeaderCheck, Queue, RecordHeader, FILE_HEADER_LEN};
    let last = ids
        .iter()
        .filter(|id| id.queue == Queue::Append)
        .map(|id| id.seq)
        .max()
        .unwrap_or(0);
    let want = FileId {
        queue: Queue::Append,
        seq: last + 1,
    };
    recycled
        .iter()
        .position(|name| {
            let Ok(file) = fs.open(&dir.join(name), false) else {
                return false;
            };
            let mut head = [0u8; FILE_HEADER_LEN + RECORD_HEADER_LEN];
            if file.read_exact_at(0, &mut head).is_err() {
                return false;
            }
            if !decode_file_header(&head[..FILE_HEADER_LEN]).is_ok_and(|(id, _)| id == want) {
                return false;
            }
            let record: &[u8; RECORD_HEADER_LEN] = head[FILE_HEADER_LEN..]
                .try_into()
                .expect("slice of the record header's length");
            matches!(
                RecordHeader::check(record, want.to_u64()),
                HeaderCheck::Valid(_)
            )
        })
        .map(|i| (i, want))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use strata_fs::{FileSystem, MemFs};

    use super::*;

    /// A fresh file ends preallocated to the size asked, in whole pieces
    /// and a last partial one, and an error of any piece is returned.
    #[test]
    fn allocating_gently_reaches_the_size_asked() {
        let fs = MemFs::new();
        for len in [0, 1, ALLOCATE_PIECE_BYTES, 2 * ALLOCATE_PIECE_BYTES + 4096] {
            let path = format!("/f-{len}");
            let file = fs.create(Path::new(&path)).expect("create");
            allocate_gently(file.as_ref(), len).expect("allocate");
            assert_eq!(file.len().expect("len"), len);
        }
        let faulty = strata_fs::FaultFs::new(std::sync::Arc::new(MemFs::new()));
        let file = faulty.create(Path::new("/g")).expect("create");
        const ENOSPC: i32 = 28; // Linux's errno
        faulty.fail_once_after(strata_fs::Op::Allocate, 1, ENOSPC);
        let e = allocate_gently(file.as_ref(), 3 * ALLOCATE_PIECE_BYTES).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(ENOSPC));
    }
}
