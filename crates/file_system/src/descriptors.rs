//! Room in the process's descriptor table, made ahead of need.
//!
//! Linux grows a process's table of open files when an `open` needs a
//! slot past its end, and in a process of more than one thread the
//! growing call waits for an RCU grace period first, while every other
//! `open` of the process waits for it: traced at 4 to 8 ms, in readers
//! opening a table file as much as in the engine's own threads
//! (`docs/lsm.md`, "Open files"). The table never shrinks, so growing it
//! once at open, to the files an engine will keep open, moves those waits
//! out of the read path.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The slots reserved so far in this process (the table never shrinks).
static RESERVED: AtomicUsize = AtomicUsize::new(0);

/// Grows the descriptor table to at least `slots` entries, capped below the
/// open-file limit (`RLIMIT_NOFILE`); returns the slots the table now has
/// room for as far as this process asked (0 where not supported). Cheap
/// once done: later calls at or below the reserved size return at once.
pub fn reserve_descriptor_slots(slots: usize) -> io::Result<usize> {
    let done = RESERVED.load(Ordering::Relaxed);
    if slots <= done {
        return Ok(done);
    }
    #[cfg(target_os = "linux")]
    {
        let reserved = grow_table(slots)?;
        RESERVED.fetch_max(reserved, Ordering::Relaxed);
        Ok(reserved)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Ok(0)
    }
}

#[cfg(target_os = "linux")]
fn grow_table(slots: usize) -> io::Result<usize> {
    // SAFETY: `getrlimit` fills the struct it is given.
    let limit = unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) != 0 {
            return Err(io::Error::last_os_error());
        }
        l.rlim_cur
    };
    let highest = (slots as u64).min(limit).saturating_sub(1);
    if highest == 0 {
        return Ok(0);
    }
    let highest = libc::c_int::try_from(highest).unwrap_or(libc::c_int::MAX);
    // SAFETY: opens, duplicates and closes descriptors this function owns.
    unsafe {
        let fd = libc::open(
            c"/".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // The lowest free descriptor at or above `highest`: the table grows
        // to hold it, and keeps that size once it is closed.
        let dup = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, highest);
        let err = io::Error::last_os_error();
        libc::close(fd);
        if dup < 0 {
            return Err(err);
        }
        libc::close(dup);
    }
    Ok(highest as usize + 1)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The slots of the table, read from `/proc/self/status` (`FDSize`).
    fn table_size() -> usize {
        let status = std::fs::read_to_string("/proc/self/status").expect("status");
        let line = status
            .lines()
            .find(|l| l.starts_with("FDSize:"))
            .expect("FDSize");
        line["FDSize:".len()..].trim().parse().expect("a number")
    }

    /// One test: the reserved size is the process's, so two tests running
    /// at once would see each other's.
    #[test]
    fn the_table_grows_to_the_slots_asked_stays_and_is_capped_by_the_limit() {
        let got = reserve_descriptor_slots(3000).expect("reserve");
        assert!(got >= 1, "reserved {got}");
        assert!(
            table_size() >= got,
            "table {} for {got} reserved",
            table_size()
        );
        assert_eq!(reserve_descriptor_slots(10).expect("again"), got);

        let all = reserve_descriptor_slots(usize::MAX).expect("reserve all");
        // SAFETY: as in `grow_table`.
        let limit = unsafe {
            let mut l: libc::rlimit = std::mem::zeroed();
            assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut l), 0);
            l.rlim_cur
        };
        assert!(all >= got);
        assert!(all as u64 <= limit, "reserved {all} over the limit {limit}");
        assert!(
            table_size() >= all,
            "table {} for {all} reserved",
            table_size()
        );
    }
}
