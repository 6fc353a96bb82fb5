//! CPU priority of background threads.
//!
//! On a machine with few cores, a background thread that encodes megabytes
//! (a sealed file's index section, a compaction) competes with the threads
//! that serve writes: a writer whose sync completed waits for a core, and the
//! wait shows up as a slow sync at the tail. Background threads lower their
//! own priority, so that the scheduler preempts them for foreground work and
//! lets them have the cores that foreground work leaves idle.

/// The nice value background threads take: weight about a tenth of a normal
/// thread's when both want a core.
pub const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's CPU priority by [`BACKGROUND_NICE`] (see
/// [`lower_thread_priority_by`]).
pub fn lower_thread_priority() {
    lower_thread_priority_by(BACKGROUND_NICE as u8);
}

/// Raises the calling thread's nice value by `by`, at most to 19: relative
/// to the process's own, so a process started under `nice` keeps its
/// threads' order. Raising it needs no privilege. Best effort: where it is
/// refused or unsupported, the thread keeps its priority and works as
/// before, which costs the foreground CPU but nothing else.
pub fn lower_thread_priority_by(by: u8) {
    if by == 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain system calls on the calling thread; Linux keeps the
        // nice value per thread, and `PRIO_PROCESS` with a thread id reads
        // or changes only that thread's.
        unsafe {
            let tid = libc::gettid() as libc::id_t;
            *libc::__errno_location() = 0;
            let mut now = libc::getpriority(libc::PRIO_PROCESS, tid);
            if now == -1 && *libc::__errno_location() != 0 {
                now = 0;
            }
            let _ = libc::setpriority(libc::PRIO_PROCESS, tid, (now + i32::from(by)).min(19));
        }
    }
}

/// The calling thread's involuntary context switches so far: the times
/// the scheduler took its core while it could still run. `None` where not
/// supported. Two reads that differ bracket a preemption.
pub fn thread_involuntary_switches() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `getrusage` fills the struct it is given, for the calling
        // thread only.
        unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            if libc::getrusage(libc::RUSAGE_THREAD, &mut ru) == 0 {
                return Some(ru.ru_nivcsw as u64);
            }
        }
    }
    None
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn nice() -> i32 {
        // SAFETY: reads the calling thread's nice value.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
    }

    #[test]
    fn priority_is_lowered_relative_to_the_thread_and_capped() {
        std::thread::spawn(|| {
            let start = nice();
            lower_thread_priority_by(3);
            assert_eq!(nice(), (start + 3).min(19));
            lower_thread_priority();
            assert_eq!(nice(), (start + 3 + BACKGROUND_NICE).min(19));
            lower_thread_priority_by(19);
            assert_eq!(nice(), 19, "capped");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn involuntary_switches_are_counted_per_thread_and_never_fall() {
        let first = thread_involuntary_switches().expect("Linux counts them");
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_involuntary_switches().unwrap() >= first);
    }
}
