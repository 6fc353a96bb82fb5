//! Where a compaction closes its output files: at its target size, and
//! earlier at a boundary of the files in the level below the output (the
//! "grandparents"), so that a later compaction of an output file into that
//! level rewrites fewer of its files.
//!
//! An output file of a compaction into level `n` is later compacted, alone,
//! into level `n + 1`: that compaction rewrites the file and every file of
//! `n + 1` its key range meets. A file cut by size alone ends inside an
//! `n + 1` file about as often as not, and that file is then rewritten by two
//! compactions instead of one. So:
//! - once an output holds half its target size, it is closed where the key
//!   stream enters or leaves a grandparent file; the threshold rises by 5% of
//!   the target for each boundary the output crossed before (at most 90%),
//!   so that outputs stay large where boundaries are dense;
//! - an output is closed before a key that would make it, with the
//!   grandparent files it meets, reach [`MAX_OVERLAP_TARGETS`] target sizes;
//! - an output is closed before a key that would make it span a whole
//!   grandparent file (of at least an eighth of the target) it has no key
//!   for: a later compaction of it would rewrite that file for nothing.
//!
//! RocksDB's leveled compaction does the same since 7.8
//! (`level_compaction_dynamic_file_size`, on by default). Only user keys are
//! compared, bytewise: files of L1 and below never share a user key, and a
//! user key is never split between outputs.

use std::sync::Arc;

use crate::version::FileMeta;

/// An output, with the grandparent files it meets, closes before it reaches
/// this many target file sizes (RocksDB's default `max_compaction_bytes`).
pub const MAX_OVERLAP_TARGETS: u64 = 25;

/// Tracks where the key stream of one sorted run stands among the files of
/// the level below its output level, and says where to close outputs.
pub(super) struct OutputCutter<'a> {
    grandparents: &'a [Arc<FileMeta>],
    target: u64,
    /// The grandparent file the last key was in, or the first one after it.
    index: usize,
    /// The last key fell between grandparent files (or before the first,
    /// or after the last).
    in_gap: bool,
    /// A key has been seen: boundaries crossed before it do not count.
    seen_key: bool,
    /// Boundaries the open output crossed before the current key.
    crossed: u64,
    /// Bytes of the grandparent files the open output meets.
    overlapped: u64,
}

impl<'a> OutputCutter<'a> {
    /// A cutter for outputs of `target` bytes above `grandparents` (sorted
    /// by key and disjoint, as a level of L1 and below is; empty when the
    /// output level is the last, or is L0).
    pub(super) fn new(grandparents: &'a [Arc<FileMeta>], target: u64) -> Self {
        OutputCutter {
            grandparents,
            target,
            index: 0,
            in_gap: true,
            seen_key: false,
            crossed: 0,
            overlapped: 0,
        }
    }

    /// Called with each new user key of the run, in order, before it is
    /// written; `open` is the size of the open output, if one is open.
    /// Returns whether to close it before this key; it then counts the
    /// next output from this key.
    pub(super) fn close_before(&mut self, user_key: &[u8], open: Option<u64>) -> bool {
        let before = self.overlapped;
        let crossed_now = self.advance(user_key);
        let Some(size) = open else {
            return false;
        };
        let close =
            size >= self.target || (crossed_now > 0 && self.at_boundary(size, before, crossed_now));
        if close {
            self.crossed = 0;
            self.overlapped = self.current_file_bytes();
        } else {
            self.crossed += crossed_now;
        }
        close
    }

    /// The rules that close an output at a grandparent boundary.
    fn at_boundary(&self, size: u64, before: u64, crossed_now: u64) -> bool {
        let target = self.target;
        if self.overlapped.saturating_add(size) >= target.saturating_mul(MAX_OVERLAP_TARGETS) {
            return true;
        }
        // A whole file stepped over: into the gap after it (two boundaries),
        // or into the file after it (three).
        let skipped = if self.in_gap { 2 } else { 3 };
        if crossed_now >= skipped && self.overlapped.saturating_sub(before) > target / 8 {
            return true;
        }
        let percent = 50 + (self.crossed * 5).min(40);
        size >= target.saturating_mul(percent) / 100
    }

    /// Moves to `user_key`; returns the boundaries crossed on the way
    /// (counted once a key was seen), adding each file entered to the
    /// overlapped bytes.
    fn advance(&mut self, user_key: &[u8]) -> u64 {
        let mut crossed = 0;
        while let Some(file) = self.grandparents.get(self.index) {
            if self.in_gap {
                if user_key < file.smallest().user_key() {
                    break;
                }
                if self.seen_key {
                    crossed += 1;
                    self.overlapped += file.size();
                }
                self.in_gap = false;
            } else {
                if user_key <= file.largest().user_key() {
                    break;
                }
                if self.seen_key {
                    crossed += 1;
                }
                self.in_gap = true;
                self.index += 1;
            }
        }
        if !self.seen_key {
            self.seen_key = true;
            self.overlapped = self.current_file_bytes();
        }
        crossed
    }

    /// The size of the grandparent file the last key is in; 0 in a gap.
    fn current_file_bytes(&self) -> u64 {
        if self.in_gap {
            return 0;
        }
        self.grandparents.get(self.index).map_or(0, |f| f.size())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{InternalKey, ValueKind};
    use crate::version::{FileDesc, ObsoleteFiles};

    /// Grandparent files over `[lo, hi]` pairs of one-byte keys.
    fn level(ranges: &[(u8, u8, u64)]) -> Vec<Arc<FileMeta>> {
        let (queue, _rx) = ObsoleteFiles::channel();
        ranges
            .iter()
            .enumerate()
            .map(|(i, &(lo, hi, size))| {
                let desc = FileDesc {
                    number: i as u64 + 1,
                    size,
                    smallest: InternalKey::new(&[lo], 1, ValueKind::Put),
                    largest: InternalKey::new(&[hi], 1, ValueKind::Put),
                    smallest_seqno: 1,
                    largest_seqno: 1,
                    blob_refs: Vec::new(),
                    range_tombstones: false,
                };
                Arc::new(FileMeta::new(desc, queue.clone()))
            })
            .collect()
    }

    /// Feeds `keys`, each adding `per_key` bytes to the open
    /// output; returns the keys each output starts at.
    fn cuts(gp: &[Arc<FileMeta>], target: u64, keys: &[u8], per_key: u64) -> Vec<u8> {
        let mut c = OutputCutter::new(gp, target);
        let mut starts = Vec::new();
        let mut open: Option<u64> = None;
        for &k in keys {
            if c.close_before(&[k], open) {
                open = None;
            }
            if open.is_none() {
                starts.push(k);
            }
            open = Some(open.unwrap_or(0) + per_key);
        }
        starts
    }

    #[test]
    fn without_grandparents_outputs_are_cut_at_the_target() {
        let keys: Vec<u8> = (0..100).collect();
        assert_eq!(
            cuts(&[], 10, &keys, 1),
            vec![0, 10, 20, 30, 40, 50, 60, 70, 80, 90]
        );
    }

    #[test]
    fn past_half_the_target_an_output_ends_at_a_grandparent_boundary() {
        // Grandparent files of 30 keys, target 100 keys: size alone would cut
        // at 100, inside the file [90, 119]; at a boundary past 50 the output
        // ends with a file instead, and the next starts with the next file.
        let gp = level(&[
            (0, 29, 30),
            (30, 59, 30),
            (60, 89, 30),
            (90, 119, 30),
            (120, 149, 30),
        ]);
        let keys: Vec<u8> = (0..150).collect();
        assert_eq!(cuts(&gp, 100, &keys, 1), vec![0, 60, 120]);
    }

    #[test]
    fn an_output_does_not_span_a_grandparent_file_it_has_no_key_for() {
        // Keys on both sides of the file [20, 39] but none in it: the output
        // closes before stepping over it.
        let gp = level(&[(20, 39, 50)]);
        let keys: Vec<u8> = (0..20).chain(40..60).collect();
        assert_eq!(cuts(&gp, 100, &keys, 1), vec![0, 40]);
        // A file under an eighth of the target is stepped over.
        let gp = level(&[(20, 39, 10)]);
        assert_eq!(cuts(&gp, 100, &keys, 1), vec![0]);
    }

    #[test]
    fn an_output_closes_before_it_meets_too_many_grandparent_bytes() {
        // Each key enters a grandparent file of 3 targets: at the ninth file
        // the output would meet 27 targets' worth of them.
        let gp: Vec<(u8, u8, u64)> = (0..20).map(|i| (i * 2, i * 2, 300)).collect();
        let gp = level(&gp);
        let keys: Vec<u8> = (0..40).step_by(2).collect();
        let starts = cuts(&gp, 100, &keys, 1);
        assert_eq!(starts[0], 0);
        assert!(starts.len() > 2, "{starts:?}");
        for w in starts.windows(2) {
            assert!((w[1] - w[0]) / 2 <= 9, "{starts:?}");
        }
    }
}
