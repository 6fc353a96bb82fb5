//! An in-memory file system that models durability exactly, for crash tests.
//!
//! Every file keeps two images: `live` (what reads see, the page cache) and
//! `durable` (what survives power loss), plus the log of operations between
//! them. Every directory keeps a live and a durable namespace the same way,
//! plus the log of its unsynced changes (creates, renames, removals).
//!
//! [`MemFs::crash`] throws the live state away, as a power cut would, keeping
//! what was synced and, depending on the [`CrashMode`], some of what was not:
//! - nothing (`DropUnsynced`);
//! - per file, a prefix of its unsynced operations, the last write torn
//!   (`KeepRandomPrefix`), with every directory back at its last `sync_dir`;
//! - any subset of the unsynced directory changes, then, per file, any subset
//!   of its unsynced 4 KiB pages and any length it had since its last sync
//!   (`KeepRandomPages`), as a disk that writes pages back in any order would.
//!
//! [`MemFs::halt`] crashes and then refuses every operation until
//! [`MemFs::restart`]: the power cut a running process does not outlive (after
//! a plain `crash`, only handles opened before it fail).
//!
//! [`MemFs::crash_keeping`] makes the same kind of crash as `KeepRandomPages`
//! with every choice made by the caller, so a test can build one exact crash;
//! [`MemFs::unsynced_pages`] lists the pages at stake.
//!
//! Simplifications, chosen because Strata's engines do not depend on them:
//! - Directories are durable as soon as `create_dir_all` returns, and cannot be
//!   renamed or removed.
//! - `sync_data` and `sync_all` are the same: both make the file's data and
//!   length durable. Neither makes the file's name durable; only `sync_dir` does.
//! - The page modes keep or lose whole 4 KiB pages, never a page torn into
//!   sectors. (`KeepRandomPrefix` tears its last write at any byte, but keeps
//!   a file's operations in order.)
//! - A crash keeps a directory change only when every earlier unsynced change
//!   to the same names was kept (see `crash.rs`); a real file system without a
//!   journal might show more.
//! - Relative paths are taken from the root; there is no working directory.
//!
//! Invariants:
//! - Every inode named by a live or a durable namespace, or by an unsynced
//!   directory change, exists in `inodes`; inodes are dropped only by a crash,
//!   which drops those no namespace names after it (removed, still open).
//! - A directory's key is in `dirs` if and only if its parent's key is.
//! - Directory changes are numbered in the order they were made, across all
//!   directories; the two halves of a rename share a number.
//!
//! Concurrency: one mutex guards the whole state; handles and lock guards hold
//! the same `Arc` and take it for every call.

mod crash;
mod dir;
mod handle;
mod inode;
mod path;
mod rng;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use self::crash::Choice;
pub use self::crash::{CrashMode, Unsynced};
use self::dir::{Change, Dir, DirOp};
use self::handle::MemLock;
use self::inode::{Inode, PAGE_BYTES};
use self::path::{join, normalize, split, Key};
use crate::{File, FileLock, FileSystem};

/// An in-memory file system; clones share the same files.
#[derive(Clone, Debug)]
pub struct MemFs {
    state: Arc<Mutex<State>>,
}

#[derive(Clone)]
struct State {
    /// Counts crashes; handles from an earlier epoch are dead.
    epoch: u64,
    /// Between [`MemFs::halt`] and [`MemFs::restart`]: every operation fails.
    halted: bool,
    dirs: BTreeMap<Key, Dir>,
    inodes: BTreeMap<u64, Inode>,
    next_inode: u64,
    /// Numbers directory changes, so that a crash replays them in order.
    next_change: u64,
    /// Held locks: path to the id of the guard holding it.
    locks: BTreeMap<Key, u64>,
    next_lock: u64,
    sync_count: u64,
    bytes_written: u64,
    /// File handles alive now, and the most at once since the last reset.
    open_handles: u64,
    peak_open_handles: u64,
}

impl fmt::Debug for State {
    // File contents would drown any assertion message; a summary is enough.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State")
            .field("epoch", &self.epoch)
            .field("dirs", &self.dirs.len())
            .field("inodes", &self.inodes.len())
            .field("locks", &self.locks.len())
            .finish_non_exhaustive()
    }
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

fn crashed() -> io::Error {
    io::Error::other("file system crashed")
}

impl State {
    fn new() -> Self {
        let mut dirs = BTreeMap::new();
        dirs.insert(Key::new(), Dir::default());
        State {
            epoch: 0,
            halted: false,
            dirs,
            inodes: BTreeMap::new(),
            next_inode: 0,
            next_change: 0,
            locks: BTreeMap::new(),
            next_lock: 0,
            sync_count: 0,
            bytes_written: 0,
            open_handles: 0,
            peak_open_handles: 0,
        }
    }

    /// Returns the directory `key`, or `ENOENT`.
    fn dir_mut(&mut self, key: &Key) -> io::Result<&mut Dir> {
        self.dirs.get_mut(key).ok_or_else(|| errno(libc::ENOENT))
    }

    /// Returns a fresh number for a directory change.
    fn next_change(&mut self) -> u64 {
        self.next_change += 1;
        self.next_change
    }

    fn is_dir(&self, dir: &Key, name: &str) -> bool {
        self.dirs.contains_key(&join(dir, name))
    }

    /// Returns the inode the live namespace names at `path`.
    fn lookup(&self, path: &Path) -> io::Result<u64> {
        let (dir, name) = split(path)?;
        let Some(entries) = self.dirs.get(&dir) else {
            return Err(errno(libc::ENOENT));
        };
        match entries.live.get(&name) {
            Some(&ino) => Ok(ino),
            None if self.is_dir(&dir, &name) => Err(errno(libc::EISDIR)),
            None => Err(errno(libc::ENOENT)),
        }
    }

    /// Creates an empty file at `path`, live only until its directory is synced.
    fn create(&mut self, path: &Path) -> io::Result<u64> {
        let (dir, name) = split(path)?;
        if self.is_dir(&dir, &name) {
            return Err(errno(libc::EEXIST));
        }
        let ino = self.next_inode;
        let seq = self.next_change();
        let entries = self.dir_mut(&dir)?;
        if entries.live.contains_key(&name) {
            return Err(errno(libc::EEXIST));
        }
        entries.change(DirOp {
            seq,
            change: Change::Create {
                path: join(&dir, &name),
            },
            name,
            target: Some(ino),
        });
        self.next_inode += 1;
        self.inodes.insert(ino, Inode::default());
        Ok(ino)
    }

    /// Returns the inode of a handle, unless a crash has happened since it was
    /// opened.
    fn inode_mut(&mut self, ino: u64, epoch: u64) -> io::Result<&mut Inode> {
        if epoch != self.epoch {
            return Err(crashed());
        }
        self.inodes.get_mut(&ino).ok_or_else(crashed)
    }
}

impl Default for MemFs {
    fn default() -> Self {
        Self::new()
    }
}

impl MemFs {
    /// Returns an empty file system holding only the root directory.
    pub fn new() -> Self {
        MemFs {
            state: Arc::new(Mutex::new(State::new())),
        }
    }

    /// The size of the pages a crash keeps or loses whole, in bytes
    /// (`KeepRandomPages`, `crash_keeping`, `unsynced_pages`).
    pub const PAGE_BYTES: u64 = PAGE_BYTES;

    /// Simulates a power loss and reboot: each directory's names revert to the
    /// last `sync_dir`, each file's bytes to the last sync, plus what `mode`
    /// keeps of the rest; files no name reaches any more are gone. Every handle
    /// opened before fails from now on, and every lock is released.
    pub fn crash(&self, mode: CrashMode) {
        let mut state = self.state.lock();
        state.epoch += 1;
        state.locks.clear();
        match mode {
            CrashMode::DropUnsynced | CrashMode::KeepRandomPrefix { .. } => {
                state.crash_op_log(mode);
            }
            CrashMode::KeepRandomPages { seed } => state.crash_choosing(Choice::Random { seed }),
        }
    }

    /// A power cut the running process does not outlive: [`crash`](Self::crash),
    /// and from then on every operation fails, the file system's own
    /// (create, rename, remove, sync_dir, ...) as well as the handles', until
    /// [`restart`](Self::restart). After a plain `crash` an engine that is
    /// still running can go on renaming and creating files by path, which no
    /// process can do after a real power cut.
    pub fn halt(&self, mode: CrashMode) {
        self.crash(mode);
        self.state.lock().halted = true;
    }

    /// Ends a [`halt`](Self::halt): the next process may start.
    pub fn restart(&self) {
        self.state.lock().halted = false;
    }

    /// Simulates a power loss, like [`crash`](Self::crash) with
    /// `KeepRandomPages`, that keeps exactly the unsynced changes for which
    /// `keep` returns true.
    ///
    /// `keep` is asked first about each unsynced directory change, in the order
    /// they were made, except those that cannot be kept because an earlier
    /// change to the same name was lost (those are lost). Then, file by file in
    /// the order they were created, for each file that still has a name (under
    /// its first name in path order): about its length (`Unsynced::Len`, if its
    /// live and durable lengths differ), then about each page
    /// [`unsynced_pages`](Self::unsynced_pages) lists for it that starts before
    /// that length, in order. Nothing else is at stake: synced pages and names
    /// always survive.
    ///
    /// `crash_keeping(|_| false)` is `crash(CrashMode::DropUnsynced)`;
    /// `crash_keeping(|_| true)` keeps the whole live state.
    pub fn crash_keeping(&self, mut keep: impl FnMut(Unsynced<'_>) -> bool) {
        let mut state = self.state.lock();
        state.epoch += 1;
        state.locks.clear();
        state.crash_choosing(Choice::Explicit(&mut keep));
    }

    /// Returns, in order, the indexes of the pages of the file at `path` whose
    /// live bytes differ from their durable bytes (past the end of either
    /// image, its bytes count as zeros): the pages a crash may keep or lose.
    /// Page `i` covers bytes `i * PAGE_BYTES .. (i + 1) * PAGE_BYTES`.
    pub fn unsynced_pages(&self, path: &Path) -> io::Result<Vec<u64>> {
        let state = self.state.lock();
        let ino = state.lookup(path)?;
        let inode = state.inodes.get(&ino).ok_or_else(|| errno(libc::ENOENT))?;
        Ok(inode.unsynced_pages())
    }

    /// Returns an independent copy of the whole state, live and durable, so a
    /// test can branch one directory into many futures. Handles and locks of
    /// `self` do not carry over: the copy starts with no lock held.
    pub fn deep_clone(&self) -> MemFs {
        let mut state = self.state.lock().clone();
        state.locks.clear();
        state.open_handles = 0;
        state.peak_open_handles = 0;
        MemFs {
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// XORs the byte at `offset` of the file with `xor_mask`, in both the live
    /// and the durable image (bit rot at rest: it survives a crash). Meant for
    /// synced files; an unsynced write that a crash replays over that byte
    /// overwrites the rot, as it would on a disk.
    pub fn corrupt(&self, path: &Path, offset: u64, xor_mask: u8) -> io::Result<()> {
        let mut state = self.state.lock();
        let ino = state.lookup(path)?;
        let inode = state
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| errno(libc::ENOENT))?;
        let mut hit = false;
        for image in [&mut inode.live, &mut inode.durable] {
            if let Some(byte) = usize::try_from(offset).ok().and_then(|i| image.get_mut(i)) {
                *byte ^= xor_mask;
                hit = true;
            }
        }
        if hit {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "corrupt: offset past the end of the file",
            ))
        }
    }

    /// Sets the length of both the live and the durable image to `len`,
    /// zero-extending if longer (a torn tail at rest: it survives a crash).
    pub fn set_len_raw(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut state = self.state.lock();
        let ino = state.lookup(path)?;
        let len = usize::try_from(len).map_err(|_| errno(libc::EFBIG))?;
        let inode = state
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| errno(libc::ENOENT))?;
        inode.live.resize(len, 0);
        inode.durable.resize(len, 0);
        Ok(())
    }

    /// Returns how many file syncs (`sync_data` and `sync_all`) have succeeded.
    pub fn sync_count(&self) -> u64 {
        self.state.lock().sync_count
    }

    /// Returns how many bytes have been passed to `write_at`.
    pub fn bytes_written(&self) -> u64 {
        self.state.lock().bytes_written
    }

    /// Returns how many file handles are open now (the descriptors a disk
    /// file system would hold).
    pub fn open_files(&self) -> u64 {
        self.state.lock().open_handles
    }

    /// Returns the most file handles open at once since the file system was
    /// made or [`reset_peak_open_files`](Self::reset_peak_open_files).
    pub fn peak_open_files(&self) -> u64 {
        self.state.lock().peak_open_handles
    }

    /// Starts a new peak from the handles open now.
    pub fn reset_peak_open_files(&self) {
        let mut state = self.state.lock();
        state.peak_open_handles = state.open_handles;
    }
}

impl FileSystem for MemFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let key = normalize(dir)?;
        let mut state = self.state.lock();
        if state.halted {
            return Err(crashed());
        }
        for depth in 1..=key.len() {
            let (parent, name) = (&key[..depth - 1], &key[depth - 1]);
            let parent = parent.to_vec();
            if state
                .dirs
                .get(&parent)
                .is_some_and(|d| d.live.contains_key(name))
            {
                // A file already holds the name.
                return Err(errno(if depth == key.len() {
                    libc::EEXIST
                } else {
                    libc::ENOTDIR
                }));
            }
            state.dirs.entry(key[..depth].to_vec()).or_default();
        }
        Ok(())
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        let mut state = self.state.lock();
        if state.halted {
            return Err(crashed());
        }
        let ino = state.create(path)?;
        Ok(State::handle(&self.state, &mut state, ino, true))
    }

    fn open(&self, path: &Path, writable: bool) -> io::Result<Arc<dyn File>> {
        let mut state = self.state.lock();
        if state.halted {
            return Err(crashed());
        }
        let ino = state.lookup(path)?;
        Ok(State::handle(&self.state, &mut state, ino, writable))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        if state.halted {
            return Err(crashed());
        }
        let ino = state.lookup(from)?;
        let (to_dir, to_name) = split(to)?;
        if state.is_dir(&to_dir, &to_name) {
            return Err(errno(libc::EISDIR));
        }
        // Checked before unlinking `from`, so a failed rename changes nothing.
        state.dir_mut(&to_dir)?;
        let (from_dir, from_name) = split(from)?;
        if (&from_dir, &from_name) == (&to_dir, &to_name) {
            return Ok(());
        }
        let seq = state.next_change();
        let change = Change::Rename {
            from: join(&from_dir, &from_name),
            to: join(&to_dir, &to_name),
        };
        // Both halves carry one number: a crash keeps the rename whole or not
        // at all.
        state.dir_mut(&from_dir)?.change(DirOp {
            seq,
            change: change.clone(),
            name: from_name,
            target: None,
        });
        state.dir_mut(&to_dir)?.change(DirOp {
            seq,
            change,
            name: to_name,
            target: Some(ino),
        });
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        if state.halted {
            return Err(crashed());
        }
        state.lookup(path)?;
        let (dir, name) = split(path)?;
        // The inode stays: open handles keep working, and the durable namespace
        // may still name it.
        let seq = state.next_change();
        let path = join(&dir, &name);
        state.dir_mut(&dir)?.change(DirOp {
            seq,
            change: Change::Remove { path },
            name,
            target: None,
        });
        Ok(())
    }

    fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        if state.halted {
            return Err(crashed());
        }
        let ino = state.lookup(from)?;
        let (dir, name) = split(to)?;
        if state.is_dir(&dir, &name) || state.dir_mut(&dir)?.live.contains_key(&name) {
            return Err(errno(libc::EEXIST));
        }
        // A new name for an existing inode: to a crash it is a creation of
        // `to` (kept or lost with the directory's unsynced changes) whose
        // bytes are the inode's, durable as far as they were synced.
        let seq = state.next_change();
        let path = join(&dir, &name);
        state.dir_mut(&dir)?.change(DirOp {
            seq,
            change: Change::Create { path },
            name,
            target: Some(ino),
        });
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let key = normalize(dir)?;
        let state = self.state.lock();
        if state.halted {
            return Err(crashed());
        }
        let Some(entries) = state.dirs.get(&key) else {
            return Err(errno(libc::ENOENT));
        };
        let mut names: Vec<String> = entries.live.keys().cloned().collect();
        let subdirs = state
            .dirs
            .keys()
            .filter(|k| k.len() == key.len() + 1 && k.starts_with(&key));
        names.extend(subdirs.filter_map(|k| k.last().cloned()));
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        let Ok(key) = normalize(path) else {
            return false;
        };
        let state = self.state.lock();
        if state.halted {
            return false;
        }
        state.dirs.contains_key(&key) || state.lookup(path).is_ok()
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let key = normalize(dir)?;
        let mut state = self.state.lock();
        if state.halted {
            return Err(crashed());
        }
        if !state.dirs.contains_key(&key) {
            let is_file = state.lookup(dir).is_ok();
            return Err(errno(if is_file { libc::ENOTDIR } else { libc::ENOENT }));
        }
        state.dir_mut(&key)?.sync();
        Ok(())
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let key = normalize(path)?;
        let mut state = self.state.lock();
        if state.halted {
            return Err(crashed());
        }
        match state.lookup(path) {
            Ok(_) => {}
            // Like `open(O_CREAT)`: the lock file appears, durable once synced.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                state.create(path)?;
            }
            Err(e) => return Err(e),
        }
        if state.locks.contains_key(&key) {
            return Err(errno(libc::EWOULDBLOCK));
        }
        let id = state.next_lock;
        state.next_lock += 1;
        state.locks.insert(key.clone(), id);
        Ok(Box::new(MemLock::new(&self.state, key, id)))
    }
}
