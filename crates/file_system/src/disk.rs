//! The real file system, over `std::fs` and a few Linux system calls.
//!
//! Errors are the operating system's own (`io::Error::last_os_error()` or what
//! `std` returns), so callers can match on `raw_os_error()` exactly as they
//! would against the kernel.

use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::Arc;

use crate::{File, FileLock, FileSystem};

/// The file system of the host, as the kernel provides it.
#[derive(Clone, Copy, Debug, Default)]
pub struct DiskFs;

impl DiskFs {
    /// Returns a handle on the host's file system.
    pub fn new() -> Self {
        DiskFs
    }
}

/// An open file of the host.
#[derive(Debug)]
struct DiskFile {
    file: fs::File,
}

impl File for DiskFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        // `pread` may return short counts before the end of the file (signals);
        // the trait promises a short count only at the end, so keep reading.
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.file.write_all_at(data, offset)
    }

    #[cfg(target_os = "linux")]
    fn write_vectored_at(&self, offset: u64, bufs: &[io::IoSlice<'_>]) -> io::Result<()> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        // The usual case: one call writes everything, with no copy of `bufs`.
        let first = bufs.len().min(IOV_MAX);
        let n = pwritev(&self.file, offset, &bufs[..first])?;
        if n == total {
            return Ok(());
        }
        // Short write (a signal, a full disk) or more slices than one call
        // takes: carry on from where it stopped.
        let mut rest: Vec<io::IoSlice<'_>> = bufs.to_vec();
        let mut rest = &mut rest[..];
        io::IoSlice::advance_slices(&mut rest, n);
        let mut offset = offset + n as u64;
        while !rest.is_empty() {
            let n = pwritev(&self.file, offset, &rest[..rest.len().min(IOV_MAX)])?;
            if n == 0 {
                return Err(io::Error::from(io::ErrorKind::WriteZero));
            }
            io::IoSlice::advance_slices(&mut rest, n);
            offset += n as u64;
        }
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        if self.len()? >= len {
            return Ok(());
        }
        allocate(&self.file, len)
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    #[cfg(target_os = "linux")]
    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        let (off, n) = file_range(offset, len)?;
        // SAFETY: the descriptor is owned by `self.file` and open for the call;
        // sync_file_range reads no memory of ours.
        let rc = unsafe {
            libc::sync_file_range(self.file.as_raw_fd(), off, n, libc::SYNC_FILE_RANGE_WRITE)
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    #[cfg(target_os = "linux")]
    fn will_need(&self, offset: u64, len: u64) -> io::Result<()> {
        fadvise(&self.file, offset, len, libc::POSIX_FADV_WILLNEED)
    }

    #[cfg(target_os = "linux")]
    fn drop_cache(&self, offset: u64, len: u64) -> io::Result<()> {
        fadvise(&self.file, offset, len, libc::POSIX_FADV_DONTNEED)
    }
}

/// `offset` and `len` as the kernel's signed offsets; EFBIG past them.
#[cfg(target_os = "linux")]
fn file_range(offset: u64, len: u64) -> io::Result<(libc::off_t, libc::off_t)> {
    match (libc::off_t::try_from(offset), libc::off_t::try_from(len)) {
        (Ok(off), Ok(n)) => Ok((off, n)),
        _ => Err(io::Error::from_raw_os_error(libc::EFBIG)),
    }
}

/// `posix_fadvise` over `len` bytes at `offset` (0 and 0: the whole file).
#[cfg(target_os = "linux")]
fn fadvise(file: &fs::File, offset: u64, len: u64, advice: libc::c_int) -> io::Result<()> {
    let (off, n) = file_range(offset, len)?;
    // SAFETY: the descriptor is owned by `file` and open for the call;
    // posix_fadvise reads no memory of ours.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), off, n, advice) };
    // posix_fadvise returns the error number instead of setting errno.
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Most slices one `pwritev` takes (Linux's `UIO_MAXIOV`).
#[cfg(target_os = "linux")]
const IOV_MAX: usize = 1024;

/// One `pwritev` of `bufs` at `offset`, retried on `EINTR`; returns the bytes
/// written, which may be fewer than asked.
#[cfg(target_os = "linux")]
fn pwritev(file: &fs::File, offset: u64, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    let Ok(off) = libc::off_t::try_from(offset) else {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    };
    debug_assert!(bufs.len() <= IOV_MAX);
    loop {
        // SAFETY: the descriptor is owned by `file` and open for the call;
        // `IoSlice` is ABI-compatible with `iovec` on Unix, and each one
        // borrows memory that stays valid and unmodified for the call.
        let rc = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                bufs.as_ptr().cast::<libc::iovec>(),
                bufs.len() as libc::c_int,
                off,
            )
        };
        if rc >= 0 {
            return Ok(rc as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Reserves blocks up to `len` with `fallocate` mode 0, which also grows the
/// size; file systems without it (EOPNOTSUPP) get a plain `set_len`, which
/// zero-extends but reserves nothing.
#[cfg(target_os = "linux")]
fn allocate(file: &fs::File, len: u64) -> io::Result<()> {
    let Ok(len_off) = libc::off_t::try_from(len) else {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    };
    loop {
        // SAFETY: the descriptor is owned by `file` and open for the whole call;
        // fallocate reads no memory of ours.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len_off) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EOPNOTSUPP) => return file.set_len(len),
            _ => return Err(err),
        }
    }
}

/// Other Unix systems have no portable `fallocate`; a zero-extension keeps the
/// length contract, without the reservation.
#[cfg(not(target_os = "linux"))]
fn allocate(file: &fs::File, len: u64) -> io::Result<()> {
    file.set_len(len)
}

/// An exclusive `flock` on an open file; closing the file releases it.
#[derive(Debug)]
struct DiskLock {
    _file: fs::File,
}

impl FileLock for DiskLock {}

impl FileSystem for DiskFs {
    fn reserve_open_files(&self, files: usize) {
        // Best effort (see the trait): the limit caps it, an error changes nothing.
        let _ = crate::reserve_descriptor_slots(files);
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        Ok(Arc::new(DiskFile { file }))
    }

    fn open(&self, path: &Path, writable: bool) -> io::Result<Arc<dyn File>> {
        let file = OpenOptions::new().read(true).write(writable).open(path)?;
        Ok(Arc::new(DiskFile { file }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            // Strata only ever creates UTF-8 names; anything else is not ours.
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        fs::File::open(dir)?.sync_all()
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        // SAFETY: the descriptor is owned by `file` and open for the whole call.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            // EWOULDBLOCK maps to `ErrorKind::WouldBlock`, as the trait promises.
            return Err(io::Error::last_os_error());
        }
        Ok(Box::new(DiskLock { _file: file }))
    }
}
