//! What the kernel counts for this process: bytes sent to storage, CPU time and
//! peak memory, read from `/proc/self` (Linux). Each reader returns `None`
//! where `/proc` is missing or unreadable, so reports say "n/a" elsewhere.
//!
//! These files are not storage the engines manage, so reading them with
//! `std::fs` stays outside the `FileSystem` layer on purpose.

/// Clock ticks per second of `/proc/self/stat` times. Linux fixes USER_HZ at
/// 100 for user space on every architecture it supports.
const USER_HZ: f64 = 100.0;

/// A sample of the cumulative counters, taken before and after a run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcSample {
    /// Bytes this process caused to be sent to storage (`write_bytes` of
    /// `/proc/self/io`): page-cache pages dirtied and direct writes, all threads.
    pub write_bytes: Option<u64>,
    /// User plus system CPU seconds of all threads.
    pub cpu_seconds: Option<f64>,
}

impl ProcSample {
    /// Reads the counters now.
    pub fn now() -> ProcSample {
        ProcSample {
            write_bytes: read_io_write_bytes(),
            cpu_seconds: read_cpu_seconds(),
        }
    }

    /// Returns the counters' growth since `earlier`.
    pub fn since(&self, earlier: &ProcSample) -> ProcSample {
        ProcSample {
            write_bytes: self
                .write_bytes
                .zip(earlier.write_bytes)
                .map(|(a, b)| a.saturating_sub(b)),
            cpu_seconds: self
                .cpu_seconds
                .zip(earlier.cpu_seconds)
                .map(|(a, b)| (a - b).max(0.0)),
        }
    }
}

fn read_io_write_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    field(&text, "write_bytes:")
}

fn read_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; fields are counted after it.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / USER_HZ)
}

/// Returns the peak resident set size (`VmHWM`) in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    field(&text, "VmHWM:").map(|kib| kib * 1024)
}

/// Returns the resident set size now (`VmRSS`) in bytes.
pub fn rss_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    field(&text, "VmRSS:").map(|kib| kib * 1024)
}

/// Hands the allocator's free memory back to the kernel (glibc only), so that
/// an RSS measured next counts what is allocated, not what earlier engines of
/// the same process freed.
pub fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer and only walks glibc's own arenas,
    // under glibc's own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Caps glibc's malloc arenas at `n` (glibc only; elsewhere a no-op that
/// returns false). Must run before other threads allocate. With one arena,
/// [`release_free_heap`] hands back every free page, so RSS before and after
/// an open differ by what the open keeps: with a per-thread arena each, the
/// free tops of worker threads' arenas stay resident and the growth measured
/// swings by tens of MiB from one open to the next.
pub fn limit_malloc_arenas(n: u32) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let n = libc::c_int::try_from(n).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets a glibc tunable; it takes no pointer.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, n) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = n;
        false
    }
}

/// Writes dirty pages back, then drops the page cache (`sync`, then 3 into
/// `/proc/sys/vm/drop_caches`, which needs root), so that the next reads come
/// from the device.
pub fn drop_page_cache() -> std::io::Result<()> {
    let status = std::process::Command::new("sync").status()?;
    if !status.success() {
        return Err(std::io::Error::other(format!("sync exited with {status}")));
    }
    std::fs::write(DROP_CACHES, "3")
}

/// The kernel knob [`drop_page_cache`] writes.
pub const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";

/// Resets the peak resident set size to the current one (Linux 4.0+), so that
/// each run of a multi-run bench reports its own peak. Returns false where the
/// kernel does not allow it; the peak then covers every run so far.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Parses the number after `name` on its line (`name:   1234 kB`).
fn field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_lines() {
        let status = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t 1024 kB\n";
        assert_eq!(field(status, "VmHWM:"), Some(2048));
        assert_eq!(field(status, "VmPeak:"), None);
        assert_eq!(field("write_bytes: 40960\n", "write_bytes:"), Some(40960));
    }

    #[test]
    fn samples_grow_on_linux() {
        let before = ProcSample::now();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let d = ProcSample::now().since(&before);
        if cfg!(target_os = "linux") {
            assert!(d.cpu_seconds.is_some());
            assert!(peak_rss_bytes().is_some_and(|b| b > 0));
        }
    }
}
