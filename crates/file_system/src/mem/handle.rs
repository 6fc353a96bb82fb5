//! The handles `MemFs` hands out: open files and held locks. Each holds the
//! file system's state and takes its mutex for every call; a file handle
//! remembers the crash epoch it was opened in and fails once a crash has
//! happened since.

use std::io;
use std::sync::Arc;

use parking_lot::Mutex;

use super::inode::Inode;
use super::path::Key;
use super::{errno, State};
use crate::{File, FileLock};

impl State {
    /// Returns a handle on inode `ino` for the current epoch.
    pub(super) fn handle(
        this: &Arc<Mutex<State>>,
        state: &mut State,
        ino: u64,
        writable: bool,
    ) -> Arc<dyn File> {
        state.open_handles += 1;
        state.peak_open_handles = state.peak_open_handles.max(state.open_handles);
        Arc::new(MemFile {
            state: Arc::clone(this),
            ino,
            epoch: state.epoch,
            writable,
        })
    }
}

/// An open in-memory file.
#[derive(Debug)]
struct MemFile {
    state: Arc<Mutex<State>>,
    ino: u64,
    /// The crash epoch the handle was opened in.
    epoch: u64,
    writable: bool,
}

impl Drop for MemFile {
    fn drop(&mut self) {
        let mut state = self.state.lock();
        state.open_handles = state.open_handles.saturating_sub(1);
    }
}

impl MemFile {
    /// Runs `f` on the inode for a call that modifies it.
    fn modify<T>(&self, f: impl FnOnce(&mut Inode) -> io::Result<T>) -> io::Result<T> {
        let mut state = self.state.lock();
        let inode = state.inode_mut(self.ino, self.epoch)?;
        if !self.writable {
            return Err(errno(libc::EBADF));
        }
        f(inode)
    }

    fn sync(&self) -> io::Result<()> {
        let mut state = self.state.lock();
        state.inode_mut(self.ino, self.epoch)?.sync();
        state.sync_count += 1;
        Ok(())
    }
}

impl File for MemFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut state = self.state.lock();
        let live = &state.inode_mut(self.ino, self.epoch)?.live;
        let Some(tail) = usize::try_from(offset).ok().and_then(|i| live.get(i..)) else {
            return Ok(0);
        };
        let n = tail.len().min(buf.len());
        buf[..n].copy_from_slice(&tail[..n]);
        Ok(n)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut state = self.state.lock();
        let inode = state.inode_mut(self.ino, self.epoch)?;
        if !self.writable {
            return Err(errno(libc::EBADF));
        }
        inode.write(offset, data)?;
        state.bytes_written += data.len() as u64;
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync()
    }

    fn len(&self) -> io::Result<u64> {
        let mut state = self.state.lock();
        Ok(state.inode_mut(self.ino, self.epoch)?.live.len() as u64)
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        self.modify(|inode| {
            if (inode.live.len() as u64) < len {
                inode.set_len(len)?;
            }
            Ok(())
        })
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        self.modify(|inode| inode.set_len(len))
    }
}

/// A held in-memory lock; dropping it frees the path unless a crash already did.
#[derive(Debug)]
pub(super) struct MemLock {
    state: Arc<Mutex<State>>,
    key: Key,
    id: u64,
}

impl MemLock {
    pub(super) fn new(state: &Arc<Mutex<State>>, key: Key, id: u64) -> Self {
        MemLock {
            state: Arc::clone(state),
            key,
            id,
        }
    }
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut state = self.state.lock();
        // After a crash someone else may hold the path; only free our own hold.
        if state.locks.get(&self.key) == Some(&self.id) {
            state.locks.remove(&self.key);
        }
    }
}
