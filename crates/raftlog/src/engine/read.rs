//! The read path: entries by index or range, keys, first and last index.
//! Readers take one group's read lock for the look-up and none for the file
//! read; a read that lost a race with purge retries (see `moved`).
//!
//! Invariants:
//! - Every entry returned comes from a record whose header and whole payload
//!   passed their checksums in this read: damage gives `Error::Corruption`,
//!   never wrong bytes. So an entry is never read alone, even from an
//!   uncompressed record whose header and length table would locate it: the
//!   payload checksum covers the whole stored payload, and the format has no
//!   checksum per entry that a partial read could verify (a flipped bit in the
//!   entry's own bytes would be returned as data). What is read is exactly the
//!   record (`RecordLoc` gives its offset and length), never more of the file.
//!   raft-engine makes the same choice: it reads and verifies an entry's whole
//!   entries block, then keeps it in a cache (`read_entry_bytes_from_file`).
//! - `fetch_entries_to` reads records in log order and stops at the first
//!   entry that would take it over its byte budget, so the record after the
//!   one holding that entry is never read.
//! - Arguments are checked against the index before any file is read, and no
//!   allocation is sized by an argument: only by what the index holds.

use std::ops::{Bound, RangeBounds};

use crate::index::{EntryLoc, RecordLoc, Run};
use crate::log_batch::entry_at;
use crate::run_entries::RunEntries;
use crate::{Engine, Error, Result};

impl Engine {
    /// Returns entry `index` of `group`, or `None` if the group does not hold
    /// it (compacted, not yet written, or no such group).
    ///
    /// Reads the entry's whole record, exactly its bytes, and verifies it (see
    /// the module docs for why not only the entry's bytes).
    pub fn get_entry(&self, group: u64, index: u64) -> Result<Option<Vec<u8>>> {
        for _ in 0..RETRIES {
            let Some(g) = self.index.group(group) else {
                return Ok(None);
            };
            let loc = match g.read().find(index) {
                Some(run) => run.entry(index),
                None => return Ok(None),
            };
            match self.read_entry(loc) {
                Ok(data) => return Ok(Some(data)),
                Err(e) if self.moved(group, index, loc) => drop(e),
                Err(e) => return Err(e),
            }
        }
        Err(self.retry_error(group, index))
    }

    /// Appends the entries `begin..end` of `group` to `out` and returns how
    /// many it appended. With `max_bytes`, it stops before the first entry that
    /// would take the appended entries' total size over it, but always appends
    /// at least one (as raft-engine's `fetch_entries_to` does); `None` is no
    /// limit.
    ///
    /// Records are read one at a time, in log order, each verified whole. The
    /// size of an entry is known only once its record is read, so the record
    /// holding the first entry over the budget is read, and no record after it.
    ///
    /// Errors, all before any file is read: `begin > end` is
    /// [`Error::InvalidArgument`]; `begin == end` appends nothing, whatever the
    /// group. An unknown group, or entries past the last index, are
    /// [`Error::Unavailable`] naming the first missing index; `begin` below
    /// the first index is [`Error::Compacted`]. On any error `out` is left as
    /// it was.
    ///
    /// The entries come from one consistent view of the group's log, taken
    /// under its read lock: a concurrent write that replaces some of them is
    /// either wholly visible or not at all.
    pub fn fetch_entries_to(
        &self,
        group: u64,
        begin: u64,
        end: u64,
        max_bytes: Option<usize>,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<usize> {
        if begin > end {
            return Err(Error::InvalidArgument(format!(
                "group {group}: entry range {begin}..{end} ends before it begins"
            )));
        }
        if begin == end {
            return Ok(0);
        }
        let budget = max_bytes.unwrap_or(usize::MAX);
        let before = out.len();
        for _ in 0..RETRIES {
            let runs = self.runs_in(group, begin, end)?;
            match self.read_runs(group, &runs, budget, out) {
                Ok(()) => return Ok(out.len() - before),
                Err(Retry::Moved) => out.truncate(before),
                Err(Retry::Failed(e)) => {
                    out.truncate(before);
                    return Err(e);
                }
            }
        }
        Err(self.retry_error(group, begin))
    }

    /// Returns the entries `begin..end` of `group`, stopping early once their
    /// total size would exceed `max_bytes` (at least one entry is always
    /// returned); see [`Engine::fetch_entries_to`], which it wraps.
    pub fn fetch_entries(
        &self,
        group: u64,
        begin: u64,
        end: u64,
        max_bytes: usize,
    ) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        self.fetch_entries_to(group, begin, end, Some(max_bytes), &mut out)?;
        Ok(out)
    }

    /// Checks `begin..end` (not empty) against the group's log and returns its
    /// runs, cut to the range.
    fn runs_in(&self, group: u64, begin: u64, end: u64) -> Result<Vec<Run>> {
        let unavailable = |index| Error::Unavailable { group, index };
        let Some(g) = self.index.group(group) else {
            return Err(unavailable(begin));
        };
        let g = g.read();
        let (Some(first), Some(last)) = (g.first_index(), g.last_index()) else {
            return Err(unavailable(begin));
        };
        if begin < first {
            return Err(Error::Compacted {
                group,
                index: begin,
                first,
            });
        }
        // `end > begin`, so `end - 1` does not wrap.
        if end - 1 > last {
            return Err(unavailable(begin.max(last.saturating_add(1))));
        }
        g.runs_in(begin, end).map_err(unavailable)
    }

    /// Appends the entries of `runs` to `out` until the budget is spent.
    fn read_runs(
        &self,
        group: u64,
        runs: &[Run],
        budget: usize,
        out: &mut Vec<Vec<u8>>,
    ) -> std::result::Result<(), Retry> {
        let mut bytes = 0usize;
        let mut taken = 0usize;
        for run in runs {
            let payload = match self.pipe.read_payload(run.record) {
                Ok(p) => p,
                Err(_) if self.moved(group, run.first, run.entry(run.first)) => {
                    return Err(Retry::Moved)
                }
                Err(e) => return Err(Retry::Failed(e)),
            };
            let entries = RunEntries::new(&payload, run)
                .map_err(|why| Retry::Failed(self.corrupt(run.record, why.into())))?;
            for data in entries {
                let data =
                    data.map_err(|why| Retry::Failed(self.corrupt(run.record, why.into())))?;
                let total = bytes.saturating_add(data.len());
                if taken > 0 && total > budget {
                    return Ok(());
                }
                bytes = total;
                taken += 1;
                out.push(data.to_vec());
            }
        }
        Ok(())
    }

    fn read_entry(&self, loc: EntryLoc) -> Result<Vec<u8>> {
        let payload = self.pipe.read_payload(loc.record)?;
        entry_at(&payload, loc.body_offset, loc.item_count, loc.position)
            .map(|d| d.to_vec())
            .map_err(|e| self.corrupt(loc.record, e.to_string()))
    }

    fn corrupt(&self, loc: RecordLoc, reason: String) -> Error {
        Error::Corruption {
            path: self.pipe.path(loc.file.id()),
            offset: loc.offset as u64,
            reason,
        }
    }

    /// True when the entry no longer lives at `loc`: purge moved or dropped it
    /// between the index look-up and the read, so the read should be retried.
    fn moved(&self, group: u64, index: u64, loc: EntryLoc) -> bool {
        match self.index.group(group) {
            Some(g) => g.read().find(index).map(|r| r.entry(index)) != Some(loc),
            None => true,
        }
    }

    fn retry_error(&self, group: u64, index: u64) -> Error {
        Error::InvalidArgument(format!(
            "group {group}: entry {index} kept moving under concurrent purges; retry"
        ))
    }

    /// Returns the first index of `group`, if it has entries.
    pub fn first_index(&self, group: u64) -> Option<u64> {
        self.index.group(group)?.read().first_index()
    }

    /// Returns the last index of `group`, if it has entries.
    pub fn last_index(&self, group: u64) -> Option<u64> {
        self.index.last_index(group)
    }

    /// Returns the value of `key` in `group`.
    pub fn get(&self, group: u64, key: &[u8]) -> Option<Vec<u8>> {
        let g = self.index.group(group)?;
        let g = g.read();
        g.kvs.get(key).map(|s| s.value.clone())
    }

    /// Returns every key of `group` with its value, in key order.
    pub fn scan_keys(&self, group: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        match self.index.group(group) {
            Some(g) => g
                .read()
                .kvs
                .iter()
                .map(|(k, s)| (k.to_vec(), s.value.clone()))
                .collect(),
            None => Vec::new(),
        }
    }

    /// Calls `f` with each key of `group` in `range`, and its value, in key
    /// order, until `f` returns false. For example
    /// `engine.scan_keys_in(g, &b"a"[..]..&b"b"[..], |k, v| ...)`, or with any
    /// `RangeBounds` (`..`, `start..`, `(Bound::Excluded(k), Bound::Unbounded)`).
    ///
    /// `f` sees one consistent view of the group's keys: the pairs in the
    /// range are copied under the group's read lock, and `f` runs after it is
    /// released, so it may call into the engine (a callback run under the lock
    /// could deadlock by writing the group, or by reading it while a writer
    /// waits). A group's keys are few (its Raft states), so the copy is small.
    ///
    /// A range that starts after it ends is [`Error::InvalidArgument`] (a
    /// caller's bug, like `begin > end` in [`Engine::fetch_entries_to`]); a
    /// range that is merely empty (`k..k`, or both ends excluded at the same
    /// key) calls `f` on nothing. An unknown group has no keys.
    pub fn scan_keys_in<'k, R, F>(&self, group: u64, range: R, mut f: F) -> Result<()>
    where
        R: RangeBounds<&'k [u8]>,
        F: FnMut(&[u8], &[u8]) -> bool,
    {
        let start: Bound<&[u8]> = range.start_bound().map(|k| *k);
        let end: Bound<&[u8]> = range.end_bound().map(|k| *k);
        if let (
            Bound::Included(lo) | Bound::Excluded(lo),
            Bound::Included(hi) | Bound::Excluded(hi),
        ) = (start, end)
        {
            if lo > hi {
                return Err(Error::InvalidArgument(format!(
                    "group {group}: key range starts at {lo:?}, after its end {hi:?}"
                )));
            }
            // Empty unless both ends are included; `BTreeMap::range` would
            // panic on two excluded equal ends.
            if lo == hi && !matches!((start, end), (Bound::Included(_), Bound::Included(_))) {
                return Ok(());
            }
        }
        let Some(g) = self.index.group(group) else {
            return Ok(());
        };
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = g
            .read()
            .kvs
            .range((start, end))
            .map(|(k, s)| (k.to_vec(), s.value.clone()))
            .collect();
        for (k, v) in &pairs {
            if !f(k, v) {
                break;
            }
        }
        Ok(())
    }
}

/// Why a fetch attempt stopped without its entries.
enum Retry {
    /// Purge moved an entry while it was being read: look it up again.
    Moved,
    Failed(Error),
}

const RETRIES: usize = 8;
