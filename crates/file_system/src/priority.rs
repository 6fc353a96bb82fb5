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

/// Runs `work` on a thread of its own, named `name`, whose nice value is
/// `by` above the caller's, and returns what it returns; the caller waits,
/// keeping its own priority. For a job whose heavy part should take only the
/// CPU the foreground leaves, while its short steps under locks that others
/// wait for run at the caller's priority: a thread cannot take back a
/// priority it gave up without privilege, so the lowered part gets a thread
/// (one spawn per call). With `by == 0`, or when no thread
/// can be spawned, `work` runs on the caller's thread. A panic in `work` is
/// resumed on the caller's.
pub fn run_at_lower_priority<R: Send>(name: &str, by: u8, work: impl FnOnce() -> R + Send) -> R {
    let mut work = Some(work);
    if by > 0 {
        let slot = &mut work;
        let ran = std::thread::scope(|s| {
            let spawned = std::thread::Builder::new()
                .name(name.to_owned())
                .spawn_scoped(s, move || {
                    lower_thread_priority_by(by);
                    slot.take().map(|w| w())
                });
            match spawned {
                Ok(handle) => Some(
                    handle
                        .join()
                        .unwrap_or_else(|p| std::panic::resume_unwind(p)),
                ),
                Err(_) => None,
            }
        });
        if let Some(Some(r)) = ran {
            return r;
        }
    }
    // Not spawned: the closure, dropped unrun, left `work` in place.
    match work.take() {
        Some(w) => w(),
        None => unreachable!("a spawned thread that took the work returned its result"),
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
    fn lowered_work_runs_niced_and_the_caller_keeps_its_priority() {
        let caller = nice();
        let (inside, borrowed) = run_at_lower_priority("lowered", 4, || {
            let name = std::thread::current().name().map(str::to_owned);
            (nice(), name)
        });
        assert_eq!(inside, (caller + 4).min(19));
        assert_eq!(borrowed.as_deref(), Some("lowered"));
        assert_eq!(nice(), caller, "the caller's priority is unchanged");
        let here = std::thread::current().id();
        assert_eq!(
            run_at_lower_priority("inline", 0, || std::thread::current().id()),
            here
        );
    }

    #[test]
    fn lowered_work_borrows_from_the_caller_and_its_panic_reaches_the_caller() {
        let mut seen = vec![1, 2];
        let sum: i32 = run_at_lower_priority("borrow", 1, || {
            seen.push(3);
            seen.iter().sum()
        });
        assert_eq!((sum, seen.len()), (6, 3));
        let caught = std::panic::catch_unwind(|| {
            run_at_lower_priority("panics", 1, || -> u8 { panic!("inside the lowered work") })
        });
        let payload = caught.expect_err("the panic is resumed on the caller");
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"inside the lowered work")
        );
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
