//! An in-memory file system that models durability exactly, for crash tests.
//!
//! Every file keeps two images: `live` (what reads see, the page cache) and
//! `durable` (what survives power loss), plus the log of operations between
//! them. Every directory keeps a live and a durable namespace the same way.
//! [`MemFs::crash`] throws the live state away, as a power cut would, keeping
//! only what was synced (and, if asked, a random prefix of what was not).
//!
//! Simplifications, chosen because Strata's engines do not depend on them:
//! - Directories are durable as soon as `create_dir_all` returns, and cannot be
//!   renamed or removed.
//! - `sync_data` and `sync_all` are the same: both make the file's data and
//!   length durable. Neither makes the file's name durable; only `sync_dir` does.
//! - Relative paths are taken from the root; there is no working directory.
//!
//! Invariants:
//! - Every inode named by a live or a durable namespace exists in `inodes`;
//!   inodes named by neither (removed, still open) are dropped at the next crash.
//! - A directory's key is in `dirs` if and only if its parent's key is.
//!
//! Concurrency: one mutex guards the whole state; handles and lock guards hold
//! the same `Arc` and take it for every call.

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

use self::handle::MemLock;
use self::inode::Inode;
use self::path::{normalize, split, Key};
use crate::{File, FileLock, FileSystem};

/// What a simulated power loss keeps of the writes that were not synced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// Keeps only synced bytes: every unsynced operation is lost.
    DropUnsynced,
    /// Keeps, for each file, a prefix of its unsynced operations in order, of a
    /// length chosen by a generator seeded with `seed`; the last write kept may
    /// be torn (only a prefix of its bytes reaches the disk).
    KeepRandomPrefix {
        /// Seeds the choice, so a failing crash replays exactly.
        seed: u64,
    },
}

/// An in-memory file system; clones share the same files.
#[derive(Clone, Debug)]
pub struct MemFs {
    state: Arc<Mutex<State>>,
}

/// The names in one directory.
#[derive(Clone, Debug, Default)]
struct Dir {
    live: BTreeMap<String, u64>,
    durable: BTreeMap<String, u64>,
}

#[derive(Clone)]
struct State {
    /// Counts crashes; handles from an earlier epoch are dead.
    epoch: u64,
    dirs: BTreeMap<Key, Dir>,
    inodes: BTreeMap<u64, Inode>,
    next_inode: u64,
    /// Held locks: path to the id of the guard holding it.
    locks: BTreeMap<Key, u64>,
    next_lock: u64,
    sync_count: u64,
    bytes_written: u64,
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
            dirs,
            inodes: BTreeMap::new(),
            next_inode: 0,
            locks: BTreeMap::new(),
            next_lock: 0,
            sync_count: 0,
            bytes_written: 0,
        }
    }

    /// Returns the directory `key`, or `ENOENT`.
    fn dir_mut(&mut self, key: &Key) -> io::Result<&mut Dir> {
        self.dirs.get_mut(key).ok_or_else(|| errno(libc::ENOENT))
    }

    fn is_dir(&self, dir: &Key, name: &str) -> bool {
        let mut key = dir.clone();
        key.push(name.to_owned());
        self.dirs.contains_key(&key)
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
        let entries = self.dir_mut(&dir)?;
        if entries.live.contains_key(&name) {
            return Err(errno(libc::EEXIST));
        }
        entries.live.insert(name, ino);
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

    /// Simulates a power loss and reboot: each directory's names revert to the
    /// last `sync_dir`, each file's bytes to the last sync (plus what `mode`
    /// keeps), every handle opened before fails from now on, and every lock is
    /// released.
    pub fn crash(&self, mode: CrashMode) {
        let mut state = self.state.lock();
        state.epoch += 1;
        state.locks.clear();
        for dir in state.dirs.values_mut() {
            dir.live.clone_from(&dir.durable);
        }
        let named: std::collections::BTreeSet<u64> = state
            .dirs
            .values()
            .flat_map(|dir| dir.durable.values().copied())
            .collect();
        state.inodes.retain(|ino, _| named.contains(ino));
        for (&ino, inode) in state.inodes.iter_mut() {
            inode.crash(mode, ino);
        }
    }

    /// Returns an independent copy of the whole state, live and durable, so a
    /// test can branch one directory into many futures. Handles and locks of
    /// `self` do not carry over: the copy starts with no lock held.
    pub fn deep_clone(&self) -> MemFs {
        let mut state = self.state.lock().clone();
        state.locks.clear();
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
}

impl FileSystem for MemFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let key = normalize(dir)?;
        let mut state = self.state.lock();
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
        let ino = state.create(path)?;
        Ok(State::handle(&self.state, &state, ino, true))
    }

    fn open(&self, path: &Path, writable: bool) -> io::Result<Arc<dyn File>> {
        let state = self.state.lock();
        let ino = state.lookup(path)?;
        Ok(State::handle(&self.state, &state, ino, writable))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        let ino = state.lookup(from)?;
        let (to_dir, to_name) = split(to)?;
        if state.is_dir(&to_dir, &to_name) {
            return Err(errno(libc::EISDIR));
        }
        // Checked before unlinking `from`, so a failed rename changes nothing.
        state.dir_mut(&to_dir)?;
        let (from_dir, from_name) = split(from)?;
        state.dir_mut(&from_dir)?.live.remove(&from_name);
        state.dir_mut(&to_dir)?.live.insert(to_name, ino);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.lookup(path)?;
        let (dir, name) = split(path)?;
        // The inode stays: open handles keep working, and the durable namespace
        // may still name it.
        state.dir_mut(&dir)?.live.remove(&name);
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let key = normalize(dir)?;
        let state = self.state.lock();
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
        state.dirs.contains_key(&key) || state.lookup(path).is_ok()
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let key = normalize(dir)?;
        let mut state = self.state.lock();
        if !state.dirs.contains_key(&key) {
            let is_file = state.lookup(dir).is_ok();
            return Err(errno(if is_file { libc::ENOTDIR } else { libc::ENOENT }));
        }
        let entries = state.dir_mut(&key)?;
        entries.durable.clone_from(&entries.live);
        Ok(())
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let key = normalize(path)?;
        let mut state = self.state.lock();
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
