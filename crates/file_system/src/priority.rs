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

/// Lowers the calling thread's CPU priority to [`BACKGROUND_NICE`]. Best
/// effort: where it is refused or unsupported, the thread keeps its
/// priority and works as before.
pub fn lower_thread_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid takes no argument and cannot fail; setpriority with
        // PRIO_PROCESS and a thread id changes only that thread's nice value
        // (Linux keeps nice per thread).
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            let _ = libc::setpriority(libc::PRIO_PROCESS, tid, BACKGROUND_NICE);
        }
    }
}
