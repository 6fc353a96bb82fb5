//! A file system that wraps another and injects faults: failing operations,
//! running out of space, and flipping bits on read.
//!
//! Faults are errors the kernel really returns (`EIO`, `ENOSPC`), built with
//! `io::Error::from_raw_os_error`, so engines see exactly what they would see
//! in production.
//!
//! Concurrency: one mutex guards the injection state shared by the file system,
//! its clones and every file it handed out. While a space budget is set, writes
//! that may grow a file hold it across the write, so the budget is exact.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::{File, FileLock, FileSystem};

mod hold;
pub use hold::Hold;
use hold::{Gate, HoldRule};

/// An operation that faults can target. File methods map one to one
/// (`File::sync_data` is `Op::SyncData`); `len` and `exists` are never faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `File::read_at` (and so `read_exact_at`).
    Read,
    /// `File::write_at`.
    Write,
    /// `File::sync_data`.
    SyncData,
    /// `File::sync_all`.
    SyncAll,
    /// `File::allocate`.
    Allocate,
    /// `File::truncate`.
    Truncate,
    /// `FileSystem::create`.
    Create,
    /// `FileSystem::open`.
    Open,
    /// `FileSystem::rename`.
    Rename,
    /// `FileSystem::remove`.
    Remove,
    /// `FileSystem::link`.
    Link,
    /// `FileSystem::list`.
    List,
    /// `FileSystem::sync_dir`.
    SyncDir,
    /// `FileSystem::lock`.
    Lock,
    /// `File::will_need` (a hint: counted, and faulted like the rest, but
    /// callers ignore its errors).
    WillNeed,
    /// `File::start_writeback` (a hint, as `WillNeed`).
    StartWriteback,
    /// `File::drop_cache` (a hint, as `WillNeed`; the ranges asked are kept,
    /// see [`FaultFs::cache_drops`]).
    DropCache,
}

/// A file system that fails on command; clones share the injection state.
#[derive(Clone, Debug)]
pub struct FaultFs {
    inner: Arc<dyn FileSystem>,
    state: Arc<Mutex<FaultState>>,
}

/// When an operation starts failing.
#[derive(Clone, Copy, Debug)]
struct Rule {
    /// Calls that still succeed before the fault.
    successes_left: u64,
    errno: i32,
    /// Fails only one call, then the rule is gone.
    once: bool,
}

/// A byte whose bit reads flipped.
#[derive(Clone, Debug)]
struct BitFlip {
    path: PathBuf,
    offset: u64,
    mask: u8,
}

#[derive(Debug, Default)]
struct FaultState {
    rules: HashMap<Op, Rule>,
    counts: HashMap<Op, u64>,
    /// Bytes asked for by `will_need` calls that were not failed.
    will_need_bytes: u64,
    /// `(path, offset, len)` of every `drop_cache` call, failed ones included.
    cache_drops: Vec<(PathBuf, u64, u64)>,
    /// Bytes files may still grow by; `None` is unlimited.
    space_left: Option<u64>,
    flips: Vec<BitFlip>,
    holds: Vec<HoldRule>,
    /// How long every file sync takes before it syncs (a slow disk).
    sync_delay: std::time::Duration,
}

impl FaultState {
    /// Counts a call of `op` and returns the fault it must fail with, if any.
    fn enter(&mut self, op: Op) -> io::Result<()> {
        *self.counts.entry(op).or_default() += 1;
        let Some(rule) = self.rules.get_mut(&op) else {
            return Ok(());
        };
        if rule.successes_left > 0 {
            rule.successes_left -= 1;
            return Ok(());
        }
        let errno = rule.errno;
        if rule.once {
            self.rules.remove(&op);
        }
        Err(io::Error::from_raw_os_error(errno))
    }

    /// Gives back the space of a file about to disappear.
    fn refund(&mut self, bytes: u64) {
        if let Some(left) = self.space_left.as_mut() {
            *left = left.saturating_add(bytes);
        }
    }
}

fn no_space() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSPC)
}

impl FaultFs {
    /// Wraps `inner`; no fault is set and space is unlimited.
    pub fn new(inner: Arc<dyn FileSystem>) -> Self {
        FaultFs {
            inner,
            state: Arc::new(Mutex::new(FaultState::default())),
        }
    }

    /// Lets the next `n` calls of `op` succeed, then fails every later one with
    /// `errno` (for example `libc::EIO`), until `clear_faults`.
    pub fn fail_after(&self, op: Op, n: u64, errno: i32) {
        self.set_rule(op, n, errno, false);
    }

    /// Lets the next `n` calls of `op` succeed, fails the one after with
    /// `errno`, and lets later ones succeed again.
    pub fn fail_once_after(&self, op: Op, n: u64, errno: i32) {
        self.set_rule(op, n, errno, true);
    }

    fn set_rule(&self, op: Op, n: u64, errno: i32, once: bool) {
        let rule = Rule {
            successes_left: n,
            errno,
            once,
        };
        self.state.lock().rules.insert(op, rule);
    }

    /// Removes every failure rule and bit flip. The space budget stays; set it
    /// with `set_space_left(None)`.
    pub fn clear_faults(&self) {
        let mut state = self.state.lock();
        state.rules.clear();
        state.flips.clear();
    }

    /// Sets how many bytes files may still grow by in total (`None`:
    /// unlimited). Growing past it fails with `ENOSPC`; overwriting never does;
    /// removing a file gives its length back.
    ///
    /// The model charges a file's length, so growing it with `truncate` also
    /// needs space (a real sparse file would not).
    pub fn set_space_left(&self, bytes: Option<u64>) {
        self.state.lock().space_left = bytes;
    }

    /// Makes reads through handles opened at `path` return the byte at
    /// `offset` with bit `bit` (taken modulo 8) flipped; the stored byte is
    /// unchanged. Handles are matched by the path they were opened with.
    pub fn flip_bit_on_read(&self, path: &Path, offset: u64, bit: u8) {
        self.state.lock().flips.push(BitFlip {
            path: path.to_path_buf(),
            offset,
            mask: 1 << (bit % 8),
        });
    }

    /// Makes calls of the file operation `op` (`SyncData`, `SyncAll`,
    /// `Read`, `Write`) on files whose name starts with `name_prefix` wait
    /// until the returned [`Hold`] is dropped: an operation caught in flight,
    /// for tests of what other threads do meanwhile.
    pub fn hold(&self, op: Op, name_prefix: &str) -> Hold {
        let gate = Arc::new(Gate::default());
        self.state.lock().holds.push(HoldRule {
            op,
            name_prefix: name_prefix.to_string(),
            gate: gate.clone(),
        });
        Hold { gate }
    }

    /// Makes every file sync (`sync_data`, `sync_all`) take `delay` first,
    /// as on a disk whose flush is slow, so that code paths that depend on
    /// a sync's duration run on the in-memory file system too.
    pub fn set_sync_delay(&self, delay: std::time::Duration) {
        self.state.lock().sync_delay = delay;
    }

    /// Returns how many calls of `op` have been made, failed ones included.
    pub fn count(&self, op: Op) -> u64 {
        self.state.lock().counts.get(&op).copied().unwrap_or(0)
    }

    /// Bytes asked for by `File::will_need` calls so far (failed calls not
    /// counted): how far a reader reads ahead.
    pub fn will_need_bytes(&self) -> u64 {
        self.state.lock().will_need_bytes
    }

    /// The `(path, offset, len)` of every `File::drop_cache` call so far, in
    /// call order, failed ones included.
    pub fn cache_drops(&self) -> Vec<(PathBuf, u64, u64)> {
        self.state.lock().cache_drops.clone()
    }

    fn enter(&self, op: Op) -> io::Result<()> {
        self.state.lock().enter(op)
    }

    fn wrap(&self, path: &Path, file: Arc<dyn File>) -> Arc<dyn File> {
        Arc::new(FaultFile {
            inner: file,
            path: path.to_path_buf(),
            state: Arc::clone(&self.state),
        })
    }

    /// Returns the length of the file at `path` if a space budget is set and
    /// the file exists, so that removing or replacing it can refund it.
    fn charged_len(&self, path: &Path) -> Option<u64> {
        self.state.lock().space_left?;
        self.inner.open(path, false).and_then(|f| f.len()).ok()
    }
}

impl FileSystem for FaultFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }

    fn reserve_open_files(&self, files: usize) {
        self.inner.reserve_open_files(files);
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        self.enter(Op::Create)?;
        let file = self.inner.create(path)?;
        Ok(self.wrap(path, file))
    }

    fn open(&self, path: &Path, writable: bool) -> io::Result<Arc<dyn File>> {
        self.enter(Op::Open)?;
        let file = self.inner.open(path, writable)?;
        Ok(self.wrap(path, file))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.enter(Op::Rename)?;
        let replaced = self.charged_len(to);
        self.inner.rename(from, to)?;
        if let Some(len) = replaced {
            self.state.lock().refund(len);
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.enter(Op::Remove)?;
        let len = self.charged_len(path);
        self.inner.remove(path)?;
        if let Some(len) = len {
            self.state.lock().refund(len);
        }
        Ok(())
    }

    fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.enter(Op::Link)?;
        // A second name of the same bytes takes no more space.
        self.inner.link(from, to)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.enter(Op::List)?;
        self.inner.list(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.enter(Op::SyncDir)?;
        self.inner.sync_dir(dir)
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        self.enter(Op::Lock)?;
        self.inner.lock(path)
    }
}

/// A file handed out by `FaultFs`.
#[derive(Debug)]
struct FaultFile {
    inner: Arc<dyn File>,
    /// The path it was opened with, to match bit flips.
    path: PathBuf,
    state: Arc<Mutex<FaultState>>,
}

impl FaultFile {
    fn enter(&self, op: Op) -> io::Result<()> {
        self.pass_holds(op);
        self.state.lock().enter(op)
    }

    /// Sleeps for the sync delay, if one is set (see `FaultFs::set_sync_delay`).
    fn slow_sync(&self) {
        let delay = self.state.lock().sync_delay;
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
    }

    /// Waits at every hold on `op` for this file (see `FaultFs::hold`).
    fn pass_holds(&self, op: Op) {
        let gates: Vec<_> = {
            let mut state = self.state.lock();
            // Released holds are spent.
            state.holds.retain(|h| Arc::strong_count(&h.gate) > 1);
            state
                .holds
                .iter()
                .filter(|h| h.matches(op, &self.path))
                .map(|h| h.gate.clone())
                .collect()
        };
        for gate in gates {
            gate.pass();
        }
    }
}

impl File for FaultFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.enter(Op::Read)?;
        let n = self.inner.read_at(offset, buf)?;
        let state = self.state.lock();
        for flip in state.flips.iter().filter(|f| f.path == self.path) {
            if let Some(i) = flip.offset.checked_sub(offset) {
                if i < n as u64 {
                    buf[i as usize] ^= flip.mask;
                }
            }
        }
        Ok(n)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.pass_holds(Op::Write);
        let mut state = self.state.lock();
        state.enter(Op::Write)?;
        let Some(left) = state.space_left else {
            drop(state);
            return self.inner.write_at(offset, data);
        };
        let len = self.inner.len()?;
        let end = offset.saturating_add(data.len() as u64);
        if data.is_empty() || end <= len {
            drop(state);
            return self.inner.write_at(offset, data);
        }
        // The file may grow to `len + left`; write what fits there, as a disk
        // filling up does, then report the rest.
        let limit = len.saturating_add(left);
        let fits = usize::try_from(limit.saturating_sub(offset))
            .unwrap_or(usize::MAX)
            .min(data.len());
        if fits > 0 {
            self.inner.write_at(offset, &data[..fits])?;
            let grown = (offset + fits as u64).saturating_sub(len);
            state.space_left = Some(left - grown);
        }
        if fits < data.len() {
            return Err(no_space());
        }
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.enter(Op::SyncData)?;
        self.slow_sync();
        self.inner.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.enter(Op::SyncAll)?;
        self.slow_sync();
        self.inner.sync_all()
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        let mut state = self.state.lock();
        state.enter(Op::Allocate)?;
        self.resize_within_budget(&mut state, len, |f| f.allocate(len))
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        let mut state = self.state.lock();
        state.enter(Op::Truncate)?;
        self.resize_within_budget(&mut state, len, |f| f.truncate(len))
    }

    fn drop_cache(&self, offset: u64, len: u64) -> io::Result<()> {
        {
            let mut state = self.state.lock();
            state.cache_drops.push((self.path.clone(), offset, len));
            state.enter(Op::DropCache)?;
        }
        self.inner.drop_cache(offset, len)
    }

    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        self.enter(Op::StartWriteback)?;
        self.inner.start_writeback(offset, len)
    }

    fn will_need(&self, offset: u64, len: u64) -> io::Result<()> {
        self.pass_holds(Op::WillNeed);
        {
            let mut state = self.state.lock();
            state.enter(Op::WillNeed)?;
            state.will_need_bytes += len;
        }
        self.inner.will_need(offset, len)
    }
}

impl FaultFile {
    /// Runs a length change, charging growth to the budget and refunding
    /// shrinkage. Growth that does not fit fails whole, as `fallocate` does.
    fn resize_within_budget(
        &self,
        state: &mut FaultState,
        new_len: u64,
        resize: impl FnOnce(&dyn File) -> io::Result<()>,
    ) -> io::Result<()> {
        let Some(left) = state.space_left else {
            return resize(self.inner.as_ref());
        };
        let len = self.inner.len()?;
        if new_len > len && new_len - len > left {
            return Err(no_space());
        }
        resize(self.inner.as_ref())?;
        let after = self.inner.len()?;
        state.space_left = Some(if after >= len {
            left.saturating_sub(after - len)
        } else {
            left.saturating_add(len - after)
        });
        Ok(())
    }
}
