//! Makes the append queue's next file ahead of time, on a thread of its own,
//! so that a rotation on the group-commit leader's path is a rename instead
//! of a creation, a preallocation, a header write and two syncs (the file's
//! and the directory's, the latter a journal commit that takes milliseconds
//! while other processes create files).
//!
//! It also starts the writeback of unsynced appends (`Preparer::start_writeback`),
//! a hint that can block while the device's queue is full.
//!
//! The preparer, woken after each rotation:
//! 1. writes the index section of the file the rotation sealed and syncs it
//!    (every byte of data was synced already, by its writers or by the
//!    rotation; a file without a durable section is scanned by recovery);
//! 2. takes a recycled file, or creates and preallocates a fresh one under a
//!    `recycle-` name;
//! 3. syncs the directory: the rotation's rename of the active file, a purge's
//!    renames into the recycled pool and the fresh file's name are durable
//!    from here on;
//! 4. writes the next file's header (and end marker) and syncs the file.
//!
//! A rotation takes the prepared file only if it names the file the rotation
//! needs; it renames it into place without a directory sync. So at most one
//! rename of the append queue, the active file's own, is ever not durable,
//! and recovery finds the file under its `recycle-` name by its header
//! (`recovery::adopt_prepared`). Otherwise (the preparer is behind or failed)
//! the leader syncs the directory and makes the file itself, as before.
//!
//! The preparer never reports an error: a failed step leaves nothing
//! prepared, and the leader's own path then meets the same failure and
//! reports it (a failed directory sync poisons the engine there).

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};
use strata_fs::{File, FileSystem};

use crate::format::{encode_file_header, FileId, END_MARKER, RECYCLE_PREFIX};
use crate::metrics::Metrics;
use crate::pipe::{ActiveFile, SMALL_APPEND_BYTES};
use crate::Config;

/// A file ready to become the append queue's next: its header (naming `id`)
/// and its current name are durable.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub id: FileId,
    /// Its name in the directory, a `recycle-` name.
    pub name: String,
    pub file: Arc<dyn File>,
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
    /// Ranges of the active file whose writeback to start (unsynced appends).
    writeback: Vec<(Arc<dyn File>, u64, u64)>,
    stop: bool,
}

#[derive(Debug)]
struct Shared {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    config: Config,
    recycled: Arc<Mutex<Vec<String>>>,
    metrics: Arc<Metrics>,
    state: Mutex<State>,
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

    /// Takes the prepared file if it is `id`'s.
    pub fn take(&self, id: FileId) -> Option<Prepared> {
        let mut state = self.shared.state.lock();
        if state.ready.as_ref().is_some_and(|p| p.id == id) {
            return state.ready.take();
        }
        None
    }

    /// Starts writeback of `len` bytes of `file` from `offset`, on the
    /// preparer's thread: the hint can block while the device's queue is
    /// full, which must not happen on the leader's path.
    pub fn start_writeback(&self, file: Arc<dyn File>, offset: u64, len: u64) {
        let mut state = self.shared.state.lock();
        state.writeback.push((file, offset, len));
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

    /// After a rotation to `active`: prepare the file after it, and first
    /// write and sync the index section of `sealed`, the file it replaced
    /// (whose data is durable already).
    pub fn rotated(&self, active: FileId, sealed: ActiveFile) {
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
        loop {
            let (want, seal, writeback) = {
                let mut state = self.state.lock();
                loop {
                    if state.stop && state.seal.is_empty() {
                        return;
                    }
                    if !state.seal.is_empty() || state.want.is_some() || !state.writeback.is_empty()
                    {
                        break;
                    }
                    self.wake.wait(&mut state);
                }
                let seal = std::mem::take(&mut state.seal);
                state.sealing = seal.first().map(|f| f.id.seq);
                let want = if state.stop { None } else { state.want.take() };
                (want, seal, std::mem::take(&mut state.writeback))
            };
            for (file, offset, len) in writeback {
                // A hint: an error stays with the file, and its sync reports it.
                let _ = file.start_writeback(offset, len);
            }
            let sealed_any = !seal.is_empty();
            for sealed in seal {
                // Best effort: see the module doc, step 1. The builder is
                // freed here too, off the leader's path.
                if sealed.write_index_section().is_ok() {
                    Metrics::add(&self.metrics.index_sections_written, 1);
                }
                if sealed.file.sync_data().is_ok() {
                    Metrics::add(&self.metrics.fsyncs, 1);
                }
            }
            if sealed_any {
                self.state.lock().sealing = None;
                self.sealed.notify_all();
            }
            let Some(id) = want else { continue };
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
    }

    /// Steps 2 to 4 of the module doc; `None` if any of them failed.
    fn prepare(&self, id: FileId) -> Option<Prepared> {
        fail::fail_point!("raftlog::prepare", |_| None);
        let reused = self.recycled.lock().pop();
        let (name, file) = match reused {
            Some(name) => match self.fs.open(&self.dir.join(&name), true) {
                Ok(file) => {
                    Metrics::add(&self.metrics.files_recycled, 1);
                    if self.metrics.mean_append_bytes() >= SMALL_APPEND_BYTES {
                        // Best effort, as in `Pipe::new_file`.
                        let _ = file.drop_cache();
                    }
                    (name, file)
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
                    && file.allocate(self.config.target_file_size_bytes).is_err()
                {
                    let _ = self.fs.remove(&path);
                    return None;
                }
                (name, file)
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
        let mut head = encode_file_header(id).to_vec();
        head.extend_from_slice(&END_MARKER);
        if file.write_at(0, &head).is_err() || file.sync_all().is_err() {
            return give_back(name);
        }
        Metrics::add(&self.metrics.fsyncs, 1);
        Some(Prepared { id, name, file })
    }
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
