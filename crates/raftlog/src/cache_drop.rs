//! Dropping a log file's cached pages as the appends go: a recycled file's
//! old pages just ahead of them, and the synced pages some way behind them.
//!
//! After large appends a recycled file's cache is dropped before its pages
//! are written again (`pipe::SMALL_APPEND_BYTES` says why). Dropped all at
//! once, a 128 MiB file's pages are free memory until the appends allocate
//! them again, over the file's whole life. In a virtual machine whose
//! balloon reports free memory to its host (`page_reporting`, every 2 s,
//! any free block of 2 MiB or more), the host reclaims those blocks, and
//! every page the appends allocate afterwards faults into the host and is
//! zeroed there: the leader's 4 MiB `pwritev` took 20-45 ms instead of 1,
//! and its index update, plain user-space work, 15-40 ms instead of 0.5
//! (B-64, traced: the leader on the CPU throughout, no run-queue wait and no
//! sleep; none of it with the reporting turned off). So a file's cache is
//! dropped a few MiB at a time, `DROP_AHEAD_BYTES` ahead of the appends:
//! what is freed is allocated again within milliseconds, before any report.
//!
//! The same holds for memory the page cache never had: appends that keep
//! every page they write cached take fresh memory at the write rate until
//! the cache fills the machine, and every fresh page is one the host has
//! to fault in. So, after the same large appends, the pages of synced data
//! more than `Config::cached_tail_bytes` behind the active file's end are
//! dropped too ([`DropBehind`]): the log's cache stays a few tens of MiB per
//! active file, and the appends mostly reuse pages the drops freed (not
//! all: the kernel hands out its smallest free blocks first, and pages
//! freed together can sit free long enough to be reported).
//! Synced pages are clean, so dropping them writes nothing. Raft logs are
//! read near their end (followers a little behind, the state machine
//! applying) and, long after, rarely: a read further back reads the disk.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use strata_fs::File;

use crate::pipe::PAGE_BYTES;

/// How far ahead of the appends the cache is dropped, and how much at a
/// time: a drop of 4 MiB of clean pages takes about 0.35 ms of kernel time.
pub(crate) const DROP_AHEAD_BYTES: u64 = 8 << 20;

/// Synced pages are dropped this many bytes at a time: one call per 8 MiB
/// of appends, and few enough pages freed at once that the next appends
/// take them again within milliseconds.
pub(crate) const DROP_BEHIND_STEP_BYTES: u64 = 8 << 20;

/// The part of a file whose old cache is still to be dropped, and where the
/// appends are (shared with the thread that drops, which never drops behind
/// them: those pages hold new data).
#[derive(Debug)]
pub(crate) struct DropAhead {
    /// Dropped below this offset.
    dropped_to: u64,
    /// The file's length: nothing past it is cached.
    len: u64,
    head: Arc<AtomicU64>,
}

/// A range to drop, handed to the thread that drops it.
#[derive(Debug)]
pub(crate) struct DropRange {
    pub file: Arc<dyn File>,
    pub from: u64,
    pub to: u64,
    /// Where the appends are, for a range ahead of them; `None` for synced
    /// pages behind them.
    pub head: Option<Arc<AtomicU64>>,
}

impl DropAhead {
    /// A file of `len` bytes whose cache is dropped below `dropped_to`.
    pub fn new(dropped_to: u64, len: u64) -> DropAhead {
        DropAhead {
            dropped_to,
            len,
            head: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Called after appending up to `end`: the range to drop now, if the
    /// appends came within `DROP_AHEAD_BYTES` of the dropped part's end.
    pub fn due(&mut self, file: &Arc<dyn File>, end: u64) -> Option<DropRange> {
        self.head.store(end, Ordering::Relaxed);
        if self.dropped_to >= self.len || end + DROP_AHEAD_BYTES / 2 < self.dropped_to {
            return None;
        }
        let from = self.dropped_to;
        let to = (end + DROP_AHEAD_BYTES).min(self.len);
        self.dropped_to = to;
        Some(DropRange {
            file: file.clone(),
            from,
            to,
            head: Some(self.head.clone()),
        })
    }
}

impl DropRange {
    /// Drops the range's cached pages, past the appends' page if they got
    /// there first (the thread that drops fell behind): best effort, a cache
    /// left in place only costs write amplification.
    pub fn run(&self) {
        let head = self.head.as_ref().map_or(0, |h| {
            h.load(Ordering::Relaxed).next_multiple_of(PAGE_BYTES)
        });
        let from = self.from.max(head);
        if from < self.to {
            let _ = self.file.drop_cache(from, self.to - from);
        }
    }
}

/// Where the active file's synced pages have been dropped up to.
#[derive(Debug, Default)]
pub(crate) struct DropBehind {
    dropped_to: u64,
}

impl DropBehind {
    /// Called after a sync that made every byte below `synced_end` durable:
    /// the whole pages more than `keep` bytes behind it not dropped yet, once
    /// they are `DROP_BEHIND_STEP_BYTES` or more.
    pub fn due(&mut self, file: &Arc<dyn File>, synced_end: u64, keep: u64) -> Option<DropRange> {
        let to = synced_end.saturating_sub(keep) / PAGE_BYTES * PAGE_BYTES;
        if to < self.dropped_to + DROP_BEHIND_STEP_BYTES {
            return None;
        }
        let from = std::mem::replace(&mut self.dropped_to, to);
        Some(DropRange {
            file: file.clone(),
            from,
            to,
            head: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use strata_fs::{FaultFs, FileSystem, MemFs, Op};

    use super::*;

    /// A file on a `FaultFs` whose cache drops fail (a hint may), and a way
    /// to read the ranges asked, as (from, to).
    fn recording() -> (Arc<dyn File>, impl Fn() -> Vec<(u64, u64)>) {
        let fs = FaultFs::new(Arc::new(MemFs::new()));
        fs.fail_after(Op::DropCache, 0, 5);
        let file = fs.create(Path::new("/f")).expect("create");
        let dropped = move || {
            let drops = fs.cache_drops().into_iter();
            drops.map(|(_, at, len)| (at, at + len)).collect()
        };
        (file, dropped)
    }

    /// The whole file's cache is dropped once, in order, each range asked
    /// before the appends come within half the lead of it, nothing past the
    /// file's end; an append longer than the lead is jumped over.
    #[test]
    fn the_cache_is_dropped_once_and_always_ahead_of_the_appends() {
        const MIB: u64 = 1 << 20;
        let len = 128 * MIB;
        for step in [4096, 300 * 1024, 4 * MIB + 17, 20 * MIB] {
            let (file, dropped) = recording();
            let mut ahead = DropAhead::new(DROP_AHEAD_BYTES, len);
            let mut at = DROP_AHEAD_BYTES;
            let mut end = 4096;
            while end < len {
                if let Some(range) = ahead.due(&file, end) {
                    range.run();
                    let (from, to) = *dropped().last().expect("recorded");
                    // Where the last drop ended, or past the appends.
                    assert_eq!(
                        from,
                        at.max(end.next_multiple_of(PAGE_BYTES)),
                        "step {step}"
                    );
                    assert!(to > from && to <= len);
                    at = to;
                }
                assert!(
                    at == len || at >= end + DROP_AHEAD_BYTES / 2,
                    "step {step}: appends at {end}, dropped only to {at}"
                );
                end = (end + step).min(len);
            }
            assert_eq!(at, len, "step {step}: dropped to the end");
            assert!(ahead.due(&file, len).is_none());
            let jumped = dropped().windows(2).any(|w| w[0].1 != w[1].0);
            assert_eq!(jumped, step > DROP_AHEAD_BYTES, "step {step}");
        }
    }

    /// A drop that runs late (the appends got past its start) leaves alone
    /// the pages the appends wrote, the page they end in among them.
    #[test]
    fn a_late_drop_spares_the_pages_the_appends_reached() {
        let (file, dropped) = recording();
        let mut ahead = DropAhead::new(0, 64 << 20);
        let range = ahead.due(&file, 4096).expect("due at once");
        assert_eq!((range.from, range.to), (0, 4096 + DROP_AHEAD_BYTES));
        // The appends move on before the range is run.
        ahead.head.store(3 * 4096 + 10, Ordering::Relaxed);
        range.run();
        assert_eq!(dropped(), vec![(4 * 4096, 4096 + DROP_AHEAD_BYTES)]);
        // Past its end: nothing to drop at all.
        let range = DropRange {
            file,
            from: 0,
            to: 8192,
            head: Some(Arc::new(AtomicU64::new(8192))),
        };
        range.run();
        assert_eq!(dropped().len(), 1);
    }

    /// Synced pages go in steps of whole pages, each range starting where
    /// the last ended and ending `keep` or more behind the synced end, never
    /// past it; none while the synced end is within `keep` of the start.
    #[test]
    fn synced_pages_are_dropped_in_steps_a_fixed_way_behind() {
        const MIB: u64 = 1 << 20;
        let keep = 32 * MIB;
        for step in [4096 + 7, 300 * 1024, 4 * MIB + 17, 40 * MIB] {
            let (file, dropped) = recording();
            let mut behind = DropBehind::default();
            let mut at = 0;
            let mut synced = 4096;
            while synced < 300 * MIB {
                if let Some(range) = behind.due(&file, synced, keep) {
                    range.run();
                    let (from, to) = *dropped().last().expect("recorded");
                    assert_eq!(from, at, "step {step}");
                    assert_eq!(to % PAGE_BYTES, 0);
                    assert!(to + keep <= synced && to - from >= DROP_BEHIND_STEP_BYTES);
                    at = to;
                }
                assert!(
                    at + keep + DROP_BEHIND_STEP_BYTES + PAGE_BYTES > synced || synced < keep,
                    "step {step}: synced to {synced}, dropped only to {at}"
                );
                synced += step;
            }
            assert!(at > 200 * MIB, "step {step}");
        }
        let (file, dropped) = recording();
        let mut behind = DropBehind::default();
        assert!(behind
            .due(&file, keep + DROP_BEHIND_STEP_BYTES - 1, keep)
            .is_none());
        assert!(behind.due(&file, u64::MAX, u64::MAX).is_none());
        assert!(dropped().is_empty());
    }
}
