//! `SnapshotIterator`: what a reader at a snapshot sees, over a sorted
//! stream of internal keys (a [`super::MergingIterator`] of all sources):
//! each user key once, at its newest version at or below the snapshot,
//! unless that version is a deletion or a newer range tombstone covers it.
//! The counterpart of RocksDB's `DBIter`.
//!
//! Invariants:
//! - Forward (`direction == Forward`): the inner iterator is positioned at
//!   the entry yielded, the newest visible version of the current user key.
//! - Backward (`direction == Reverse`): the inner iterator is positioned at
//!   the last entry *before* the current user key (or not valid), and the
//!   yielded key and value are copies in `saved_key` / `saved_value`, since
//!   the newest version of a key is the last one met going backward.
//! - A yielded key is always within `[lower, upper)` (after the prefix is
//!   folded into the bounds) and its kind is `Put` or `BlobIndex`.
//! - Entries of kind `RangeDelete` in the point stream are ignored: range
//!   tombstones reach this iterator only through its [`RangeTombstoneSet`].

use std::sync::Arc;

use super::{InternalIterator, RangeTombstoneSet};
use crate::error::{Error, Result};
use crate::key::{self, SeqNo, ValueKind, MAX_SEQNO, TRAILER_LEN};

/// The bounds of an iteration, on user keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IterOptions {
    /// The smallest user key yielded (inclusive).
    pub lower_bound: Option<Vec<u8>>,
    /// The first user key not yielded (exclusive).
    pub upper_bound: Option<Vec<u8>>,
    /// Prefix mode: only user keys that start with this prefix are yielded
    /// (it narrows the bounds, and seeks are clamped into them). Sources may
    /// use it to skip files by their prefix bloom filters.
    pub prefix: Option<Vec<u8>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// The user-visible view of a sorted internal-key stream at one snapshot.
#[derive(Debug)]
pub struct SnapshotIterator<I> {
    inner: I,
    snapshot: SeqNo,
    tombstones: RangeTombstoneSet,
    /// Inclusive; the prefix folded in. Shared with the sources of a
    /// database iterator (no copy per creation).
    lower: Option<Arc<[u8]>>,
    /// Exclusive; the prefix folded in.
    upper: Option<Arc<[u8]>>,
    direction: Direction,
    valid: bool,
    /// Backward: the yielded internal key. Forward: the user key whose
    /// older versions are being skipped.
    saved_key: Vec<u8>,
    /// Backward: the yielded value.
    saved_value: Vec<u8>,
    /// Reused to build seek keys.
    scratch: Vec<u8>,
}

impl<I: InternalIterator> SnapshotIterator<I> {
    /// Views `inner` at `snapshot`; `tombstones` are the range tombstones of
    /// all of `inner`'s sources, fragmented for that snapshot.
    pub fn new(
        inner: I,
        snapshot: SeqNo,
        tombstones: RangeTombstoneSet,
        options: IterOptions,
    ) -> Self {
        let mut lower = options.lower_bound;
        let mut upper = options.upper_bound;
        if let Some(prefix) = options.prefix {
            if lower.as_ref().is_none_or(|l| *l < prefix) {
                lower = Some(prefix.clone());
            }
            if let Some(end) = prefix_successor(&prefix) {
                if upper.as_ref().is_none_or(|u| *u > end) {
                    upper = Some(end);
                }
            }
        }
        Self::with_bounds(
            inner,
            snapshot,
            tombstones,
            lower.map(Arc::from),
            upper.map(Arc::from),
        )
    }

    /// [`Self::new`] with the bounds already made (the prefix folded in):
    /// `lower` inclusive, `upper` exclusive.
    pub fn with_bounds(
        inner: I,
        snapshot: SeqNo,
        tombstones: RangeTombstoneSet,
        lower: Option<Arc<[u8]>>,
        upper: Option<Arc<[u8]>>,
    ) -> Self {
        SnapshotIterator {
            inner,
            snapshot: snapshot.min(MAX_SEQNO),
            tombstones,
            lower,
            upper,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Returns true when positioned at a visible key.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current user key; empty when not valid.
    pub fn key(&self) -> &[u8] {
        let k = self.internal_key();
        &k[..k.len().saturating_sub(TRAILER_LEN)]
    }

    /// The current value: inline bytes, or a blob reference when
    /// [`Self::kind`] is `BlobIndex`. Empty when not valid.
    pub fn value(&self) -> &[u8] {
        match (self.valid, self.direction) {
            (false, _) => &[],
            (true, Direction::Forward) => self.inner.value(),
            (true, Direction::Reverse) => &self.saved_value,
        }
    }

    /// The kind of the current version: `Put` or `BlobIndex`.
    pub fn kind(&self) -> ValueKind {
        key::parse(self.internal_key()).map_or(ValueKind::Put, |(_, _, kind)| kind)
    }

    /// The sequence number of the current version.
    pub fn seqno(&self) -> SeqNo {
        key::parse(self.internal_key()).map_or(0, |(_, seqno, _)| seqno)
    }

    /// Positions at the first visible key.
    pub fn seek_to_first(&mut self) -> Result<()> {
        match self.lower.clone() {
            Some(lower) => self.seek(&lower),
            None => self.guard(|it| {
                it.inner.seek_to_first()?;
                it.find_next(false)
            }),
        }
    }

    /// Positions at the last visible key.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.guard(|it| {
            match &it.upper {
                Some(upper) => {
                    encode(&mut it.scratch, upper, u64::MAX);
                    it.inner.seek_for_prev(&it.scratch)?;
                }
                None => it.inner.seek_to_last()?,
            }
            it.find_prev()
        })
    }

    /// Positions at the first visible key at or after `target`.
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.guard(|it| {
            let target = match &it.lower {
                Some(lower) if target < &**lower => &**lower,
                _ => target,
            };
            // Lands on the newest version at or below the snapshot.
            encode(&mut it.scratch, target, (it.snapshot << 8) | 0xff);
            it.inner.seek(&it.scratch)?;
            it.find_next(false)
        })
    }

    /// Positions at the last visible key at or before `target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.guard(|it| {
            match &it.upper {
                Some(upper) if target >= &**upper => {
                    encode(&mut it.scratch, upper, u64::MAX);
                }
                // After every version of `target`.
                _ => encode(&mut it.scratch, target, 0),
            }
            it.inner.seek_for_prev(&it.scratch)?;
            it.find_prev()
        })
    }

    /// Moves to the next visible key.
    #[expect(
        clippy::should_implement_trait,
        reason = "a cursor: moving can fail and the key borrows the iterator, which Iterator cannot express"
    )]
    pub fn next(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        self.guard(|it| {
            if it.direction == Direction::Reverse {
                // The inner iterator is before the current key: go past
                // every version of it.
                let user_key = it.key().to_vec();
                encode(&mut it.scratch, &user_key, 0);
                it.inner.seek(&it.scratch)?;
                it.saved_key = user_key;
            } else {
                let user_key_len = it.key().len();
                it.saved_key.clear();
                it.saved_key
                    .extend_from_slice(&it.inner.key()[..user_key_len]);
                it.inner.next()?;
            }
            it.find_next(true)
        })
    }

    /// Moves to the previous visible key.
    pub fn prev(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        self.guard(|it| {
            if it.direction == Direction::Forward {
                // Go before every version of the current key.
                let user_key = it.key().to_vec();
                encode(&mut it.scratch, &user_key, u64::MAX);
                it.inner.seek_for_prev(&it.scratch)?;
            }
            it.find_prev()
        })
    }
}

impl<I: InternalIterator> SnapshotIterator<I> {
    /// The current internal key, wherever it is kept.
    fn internal_key(&self) -> &[u8] {
        match (self.valid, self.direction) {
            (false, _) => &[],
            (true, Direction::Forward) => self.inner.key(),
            (true, Direction::Reverse) => &self.saved_key,
        }
    }

    /// Runs a positioning step; on an error the iterator is not valid.
    fn guard(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let r = f(self);
        if r.is_err() {
            self.valid = false;
        }
        r
    }

    /// Moves forward from the inner position to the newest visible version
    /// of the next user key that is not deleted. With `skipping`, versions
    /// of `saved_key` are passed over first.
    fn find_next(&mut self, mut skipping: bool) -> Result<()> {
        self.direction = Direction::Forward;
        self.valid = false;
        while self.inner.valid() {
            let (user_key, seqno, kind) = parse(self.inner.key())?;
            if self.upper.as_deref().is_some_and(|u| user_key >= u) {
                return Ok(());
            }
            let hidden = seqno > self.snapshot
                || kind == ValueKind::RangeDelete
                || (skipping && user_key == self.saved_key.as_slice());
            if !hidden {
                // The newest version of this user key at the snapshot.
                match kind {
                    ValueKind::Put | ValueKind::BlobIndex
                        if !self.tombstones.covers(user_key, seqno) =>
                    {
                        self.valid = true;
                        return Ok(());
                    }
                    _ => {
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(user_key);
                        skipping = true;
                    }
                }
            }
            self.inner.next()?;
        }
        Ok(())
    }

    /// Moves backward from the inner position to the previous user key that
    /// is visible and not deleted, leaving the inner iterator before it.
    fn find_prev(&mut self) -> Result<()> {
        self.direction = Direction::Reverse;
        self.valid = false;
        while self.inner.valid() {
            let (user_key, _, _) = parse(self.inner.key())?;
            if self.lower.as_deref().is_some_and(|l| user_key < l) {
                return Ok(());
            }
            // Walk this user key's versions, oldest first; the last one met
            // at or below the snapshot is the newest visible.
            self.scratch.clear();
            self.scratch.extend_from_slice(user_key);
            let mut found: Option<(SeqNo, ValueKind)> = None;
            loop {
                let (user_key, seqno, kind) = parse(self.inner.key())?;
                if user_key != self.scratch.as_slice() {
                    break;
                }
                if seqno <= self.snapshot && kind != ValueKind::RangeDelete {
                    found = Some((seqno, kind));
                    self.saved_key.clear();
                    self.saved_key.extend_from_slice(self.inner.key());
                    self.saved_value.clear();
                    self.saved_value.extend_from_slice(self.inner.value());
                }
                self.inner.prev()?;
                if !self.inner.valid() {
                    break;
                }
            }
            if let Some((seqno, ValueKind::Put | ValueKind::BlobIndex)) = found {
                if !self.tombstones.covers(&self.scratch, seqno) {
                    self.valid = true;
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// Splits an internal key from a source; bad bytes are corruption.
fn parse(encoded: &[u8]) -> Result<(&[u8], SeqNo, ValueKind)> {
    key::parse(encoded)
        .map_err(|e| Error::corruption("(iterator source)", 0, format!("bad internal key: {e}")))
}

/// Builds `user_key | trailer` into `buf`.
fn encode(buf: &mut Vec<u8>, user_key: &[u8], trailer: u64) {
    buf.clear();
    // One allocation for a fresh buffer, not a grow per part.
    buf.reserve(user_key.len() + 8);
    buf.extend_from_slice(user_key);
    buf.extend_from_slice(&trailer.to_le_bytes());
}

/// The smallest key greater than every key that starts with `prefix`, if
/// any: the prefix with trailing 0xff bytes dropped and its last byte
/// incremented.
/// The smallest key above every key that starts with `prefix`; `None` when
/// no such key exists (an empty prefix, or one of 0xff bytes only).
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let keep = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=keep].to_vec();
    end[keep] += 1;
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_successors() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(b"\xff"), None);
        assert_eq!(prefix_successor(b""), None);
    }
}
