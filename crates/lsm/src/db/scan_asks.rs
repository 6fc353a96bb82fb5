//! What a forward scan over separated values asks the OS to read ahead, per
//! blob file (`File::will_need`, `posix_fadvise` `WILLNEED`).
//!
//! Two sources, one record of what was asked for per file:
//! - the blocks the scan took (`super::scan_ahead`), gathered per file into
//!   an extent over gaps of at most [`ASK_GAP`] (after random overwrites a
//!   file's live blocks have dead ones between them, and a request apiece
//!   costs the device more than the dead bytes), asked for once it is
//!   [`ASK_MIN`] long, once its blocks are about to be read, or once
//!   nothing more will be taken;
//! - while the scan's end is not taken yet, a window ahead of the blocks
//!   being read, twice as long as what the scan has read of the file (at
//!   least [`FIRST_WINDOW`], at most [`MAX_WINDOW`]): the taken blocks of
//!   small values are too few per file to keep the device busy (a scan
//!   asking only for them ran at 0.44x one reading 1 MiB ahead per file, at
//!   1 KiB values). Once the scan's end is taken (its upper bound, or the
//!   last key), no window is asked for. So a scan asks past its upper
//!   bound for at most twice what it read of each file, and a short scan
//!   for little.
//!
//! A scan meets a file's blocks in offset order (files are written in key
//! order); a block behind what was asked for starts over.

use std::collections::HashMap;

/// Blocks of one file closer than this are asked for as one extent.
const ASK_GAP: u64 = 128 << 10;

/// An extent of taken blocks is asked for once it is this long: requests
/// of 55 KiB on average left a cold scan of 16 KiB values at 0.66x one
/// asking 1 MiB at a time (the device took 3x the time for 0.9x the bytes).
const ASK_MIN: u64 = 512 << 10;

/// A file's window ahead of the blocks read, at least.
const FIRST_WINDOW: u64 = 32 << 10;

/// A file's window, at most.
const MAX_WINDOW: u64 = 1 << 20;

/// Asks the OS for `len` bytes of a file (by number) at an offset: a hint,
/// whose failure (the file cannot be opened) the read that follows reports
/// if it matters.
pub(super) type Ask<'a> = dyn FnMut(u64, u64, u64) + 'a;

/// What a scan asked for and will ask for, per blob file.
#[derive(Debug, Default)]
pub(super) struct Asks {
    files: HashMap<u64, FileAsks>,
}

#[derive(Debug, Default)]
struct FileAsks {
    /// What was asked for: `asked_from..asked_to`, a frontier that only
    /// moves forward while the scan reads the file forward.
    asked_from: u64,
    asked_to: u64,
    /// The extent of taken blocks waiting, past the frontier: `from..end`,
    /// empty when equal.
    from: u64,
    end: u64,
    /// Bytes of the file's blocks the scan read.
    read: u64,
}

impl Asks {
    /// Forgets every file: the scan starts over.
    pub(super) fn clear(&mut self) {
        self.files.clear();
    }

    /// Notes a taken block of `file` at `from..end`; asks for the waiting
    /// extent once it is [`ASK_MIN`] long, or when the block does not
    /// continue it.
    pub(super) fn note(&mut self, file: u64, from: u64, end: u64, ask: &mut Ask<'_>) {
        let f = self.files.entry(file).or_default();
        if from < f.asked_from {
            // Behind what was asked for: the file starts over.
            f.flush(file, ask);
            (f.asked_from, f.asked_to) = (from, from);
            (f.from, f.end) = (from, from);
        }
        if end <= f.asked_to {
            return;
        }
        let from = from.max(f.asked_to);
        if f.from == f.end {
            (f.from, f.end) = (from, end);
        } else if from <= f.end.saturating_add(ASK_GAP) {
            f.end = f.end.max(end);
        } else {
            f.flush(file, ask);
            (f.from, f.end) = (from, end);
        }
        if f.end - f.from >= ASK_MIN {
            f.flush(file, ask);
        }
    }

    /// `bytes` of blocks of `file`, up to `need`, are about to be read:
    /// asks for its waiting extent if it starts before `need`, and, unless
    /// the scan's end was taken (`ended`), for a window past `need`.
    pub(super) fn before_read(
        &mut self,
        file: u64,
        need: u64,
        bytes: u64,
        ended: bool,
        ask: &mut Ask<'_>,
    ) {
        let f = self.files.entry(file).or_default();
        f.read = f.read.saturating_add(bytes);
        if f.from < f.end && f.from < need {
            f.flush(file, ask);
        }
        let window = f.read.saturating_mul(2).clamp(FIRST_WINDOW, MAX_WINDOW);
        // Asked again once the reads are past half of the window.
        if ended || need.saturating_add(window / 2) <= f.asked_to {
            return;
        }
        let from = f.asked_to.max(need);
        let to = need.saturating_add(window);
        ask(file, from, to - from);
        f.asked_to = to;
        if f.from < to {
            // The waiting extent's start is asked for now.
            f.from = to.min(f.end);
        }
    }

    /// Asks for every waiting extent.
    pub(super) fn flush_all(&mut self, ask: &mut Ask<'_>) {
        for (&file, f) in &mut self.files {
            f.flush(file, ask);
        }
    }
}

impl FileAsks {
    /// Asks for the waiting extent, if any.
    fn flush(&mut self, file: u64, ask: &mut Ask<'_>) {
        let from = self.from.max(self.asked_to);
        if from < self.end {
            ask(file, from, self.end - from);
            self.asked_to = self.end;
        }
        self.from = self.end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `from..to` in a file.
    type Extent = (u64, u64);

    /// A scan of one file's blocks, `(gap before it, size)` each, taken in
    /// chunks of `take` blocks and read in batches of `batch`, the take
    /// running `lead` chunks ahead of the reads; returns the blocks and
    /// every request, in order, and checks at each read that its blocks
    /// were asked for.
    fn scan(
        blocks: &[(u64, u64)],
        take: usize,
        batch: usize,
        lead: usize,
    ) -> (Vec<Extent>, Vec<Extent>) {
        let mut at = 4096;
        let extents: Vec<Extent> = blocks
            .iter()
            .map(|&(gap, size)| {
                at += gap;
                let e = (at, at + size);
                at += size;
                e
            })
            .collect();
        let mut asks = Asks::default();
        let mut asked: Vec<Extent> = Vec::new();
        let mut taken = 0;
        let mut read = 0;
        while read < extents.len() {
            while taken < extents.len() && taken < read + lead * take {
                let end = (taken + take).min(extents.len());
                for &(from, to) in &extents[taken..end] {
                    asks.note(7, from, to, &mut |_, o, l| asked.push((o, o + l)));
                }
                taken = end;
                if taken == extents.len() {
                    asks.flush_all(&mut |_, o, l| asked.push((o, o + l)));
                }
            }
            // A batch reads only taken blocks.
            let end = (read + batch).min(taken);
            let bytes = extents[read..end].iter().map(|e| e.1 - e.0).sum();
            let need = extents[end - 1].1;
            let ended = taken == extents.len();
            asks.before_read(7, need, bytes, ended, &mut |_, o, l| asked.push((o, o + l)));
            for &(from, to) in &extents[read..end] {
                // Covered by the requests so far: they are in offset order
                // and do not overlap, so their union is a few intervals.
                let mut covered = from;
                for &(a, b) in &asked {
                    if a <= covered && b > covered {
                        covered = b;
                    }
                }
                assert!(
                    covered >= to,
                    "block {from}..{to} read before it was asked for"
                );
            }
            read = end;
        }
        (extents, asked)
    }

    proptest! {
        /// Every block is asked for before it is read; no byte is asked for
        /// twice; requests only move forward; and once the scan's end is
        /// taken, nothing past its last block is asked for.
        #[test]
        fn blocks_are_asked_for_once_before_they_are_read(
            blocks in prop::collection::vec((0u64..300_000, 1u64..40_000), 1..400),
            take in 1usize..64,
            batch in 1usize..64,
            lead in 1usize..4,
        ) {
            let (extents, asked) = scan(&blocks, take, batch, lead);
            for pair in asked.windows(2) {
                prop_assert!(pair[0].1 <= pair[1].0, "overlap or backward: {pair:?}");
            }
            for &(a, b) in &asked {
                prop_assert!(a < b, "an empty request");
            }
            // Past the last block: at most the window asked before the end
            // was taken, which is twice what was read then.
            let last = extents.last().expect("one block at least").1;
            let total: u64 = extents.iter().map(|e| e.1 - e.0).sum();
            let past: u64 = asked.iter().map(|&(a, b)| b.max(last) - a.max(last)).sum();
            prop_assert!(past <= (2 * total).clamp(FIRST_WINDOW, MAX_WINDOW));
        }
    }

    /// A scan whose end is taken before it reads asks for its blocks and
    /// nothing else: no window.
    #[test]
    fn a_scan_whose_end_is_taken_asks_for_no_window() {
        let blocks = vec![(100, 2048); 50];
        let (extents, asked) = scan(&blocks, 50, 8, 1);
        let last = extents.last().unwrap().1;
        assert!(asked.iter().all(|&(_, b)| b <= last), "{asked:?}");
    }
}
