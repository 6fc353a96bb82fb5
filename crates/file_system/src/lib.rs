//! The file-system layer: the only code in Strata that touches `std::fs`.
//!
//! Engines hold an `Arc<dyn FileSystem>` and never name a concrete file system, so
//! every test can swap in [`MemFs`] (fast, and able to simulate a crash that
//! loses whatever was not synced, or keeps any subset of its pages and
//! directory changes) or [`FaultFs`] (which fails chosen operations, runs out of
//! space, and flips bits).
//!
//! The contract every implementation keeps, and every engine may rely on:
//! - `write_at` (and `write_vectored_at`) writes all of `data` or returns an
//!   error; after an error the bytes in that range are unspecified (some may
//!   have been written).
//! - Bytes written are visible to `read_at` on any handle at once, but are
//!   durable only after `sync_data` / `sync_all` on that file returns `Ok`.
//! - A created, renamed or removed name is durable only after `sync_dir` of its
//!   parent directory returns `Ok`.
//! - After a failed sync, nothing about the durability of earlier writes to that
//!   file is known; callers must not retry the sync and carry on (the kernel may
//!   have dropped the dirty pages), which is why Strata's engines stop writing.
//! - `allocate(len)` extends the file to at least `len` bytes of zeros with
//!   blocks reserved, so later `write_at` inside it does not run out of space.

mod descriptors;
mod disk;
mod fault;
mod mem;
mod priority;
mod writeback;

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

pub use descriptors::reserve_descriptor_slots;
pub use disk::DiskFs;
pub use fault::{FaultFs, Hold, Op};
pub use mem::{CrashMode, MemFs, Unsynced};
pub use priority::{
    lower_thread_priority, lower_thread_priority_by, run_at_lower_priority,
    thread_involuntary_switches, BACKGROUND_NICE,
};
pub use writeback::WritebackPacer;

/// An open file. Handles are shared between threads; all methods take `&self`
/// and use positional I/O so that concurrent readers need no lock.
pub trait File: Send + Sync + fmt::Debug {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read
    /// (fewer only at the end of the file).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;

    /// Writes all of `data` at `offset`, extending the file if needed.
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;

    /// Writes the concatenation of `bufs` at `offset`, with the contract of
    /// `write_at` on the joined bytes. The default joins them and calls
    /// `write_at`, so a wrapper's faults and accounting apply unchanged; a file
    /// system that can gather (pwritev) saves the copy.
    fn write_vectored_at(&self, offset: u64, bufs: &[io::IoSlice<'_>]) -> io::Result<()> {
        let mut joined = Vec::with_capacity(bufs.iter().map(|b| b.len()).sum());
        for b in bufs {
            joined.extend_from_slice(b);
        }
        self.write_at(offset, &joined)
    }

    /// Makes the file's data durable (fdatasync).
    fn sync_data(&self) -> io::Result<()>;

    /// Makes the file's data and metadata durable (fsync).
    fn sync_all(&self) -> io::Result<()>;

    /// Returns the file's current length in bytes.
    fn len(&self) -> io::Result<u64>;

    /// Extends the file with zeros to at least `len` bytes, reserving the blocks
    /// (fallocate). Never shrinks it.
    fn allocate(&self, len: u64) -> io::Result<()>;

    /// Sets the file's length to `len`, dropping or zero-extending its tail.
    fn truncate(&self, len: u64) -> io::Result<()>;

    /// Asks the OS to drop the clean cached pages of `len` bytes at
    /// `offset` (`len` 0: to the end of the file). A hint: contents and
    /// durability are unchanged, and a file system without a cache ignores
    /// it.
    ///
    /// Log engines call it before overwriting a recycled file: the page cache
    /// keeps the file's pages in folios as large as the writes of its previous
    /// life, and a small append into a large cached folio dirties, and writes
    /// back, the whole folio.
    fn drop_cache(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }

    /// Asks the OS to start writing `len` bytes at `offset` back to the
    /// device, without waiting (`sync_file_range` with `WRITE` only). A
    /// hint: nothing becomes durable by it, and a file system without a
    /// cache ignores it.
    ///
    /// A log written at hundreds of MB/s calls it every few MiB, so that the
    /// sync that seals the file finds little left to write (an fdatasync of
    /// 30 MiB of dirty pages took 25-65 ms under load here).
    fn start_writeback(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }

    /// Asks the OS to read `len` bytes at `offset` into its cache in the
    /// background (`posix_fadvise` `WILLNEED`): a scan about to read them
    /// one block at a time finds them there. A hint; a file system without
    /// a cache ignores it.
    fn will_need(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }

    /// Reads exactly `buf.len()` bytes at `offset`, or fails with `UnexpectedEof`.
    fn read_exact_at(&self, mut offset: u64, mut buf: &mut [u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(offset, buf) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file ended before the requested range",
                    ))
                }
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Returns true when the file holds no bytes.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// A held exclusive lock on a directory; released on drop.
pub trait FileLock: Send + Sync + fmt::Debug {}

/// A file system: names, directories and files.
pub trait FileSystem: Send + Sync + fmt::Debug {
    /// Creates `dir` and any missing parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;

    /// Creates a new empty file; fails with `AlreadyExists` if the name is taken.
    fn create(&self, path: &Path) -> io::Result<Arc<dyn File>>;

    /// Opens an existing file for reading, and for writing when `writable`.
    fn open(&self, path: &Path, writable: bool) -> io::Result<Arc<dyn File>>;

    /// Renames `from` to `to`, replacing `to` if it exists.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;

    /// Makes `to` a second name of the file `from` (a hard link); fails
    /// with `AlreadyExists` if `to` is taken, and with the operating
    /// system's error (`EXDEV`: `CrossesDevices`) when the two are on
    /// different file systems, where the caller copies instead.
    ///
    /// Durability: like a creation, the new name is durable only after a
    /// sync of `to`'s directory ([`FileSystem::sync_dir`]); the file's data
    /// is as durable as it was under `from` (sync it to be sure).
    fn link(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Lists the names (not paths) of the entries of `dir`, in no set order.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;

    /// Returns true if `path` names a file or directory.
    fn exists(&self, path: &Path) -> bool;

    /// Makes the names in `dir` durable: creations, renames and removals.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;

    /// Takes an exclusive lock on `path` (created if missing) for as long as
    /// the returned guard lives; fails with `WouldBlock` if another holder has it.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>>;

    /// Makes room ahead of need for `files` open files, so that opening
    /// them later does not wait for the process's descriptor table to
    /// grow ([`reserve_descriptor_slots`]). Best effort: a file system
    /// without such a table does nothing, and a failure only means the
    /// waits stay where they were.
    fn reserve_open_files(&self, files: usize) {
        let _ = files;
    }
}
