//! `MemtableIter`: a cursor over a memtable's point entries, every version
//! in internal-key order, within optional user-key bounds.
//!
//! The cursor holds a skiplist entry, which pins its node: `next` and `prev`
//! follow the links from it without a new search, and entries inserted
//! meanwhile by other threads show up if they fall after the cursor. The
//! iterator borrows the memtable; the engine keeps the memtable alive (its
//! `Arc` in the read state) for as long as an iterator lives.

use std::ops::Bound;
use std::sync::Arc;

use crossbeam_skiplist::map::Entry;
use crossbeam_skiplist::SkipMap;

use super::entry_key::{encode_into, EntryKey, KeyRef, TRAILER_FIRST};
use crate::error::Result;
use crate::iter::InternalIterator;

/// An [`InternalIterator`] over one memtable.
pub struct MemtableIter<'a> {
    map: &'a SkipMap<EntryKey, ()>,
    /// The current entry; `None` when not valid.
    cur: Option<Entry<'a, EntryKey, ()>>,
    /// Inclusive lower bound on user keys (shared with the iterator's
    /// other sources).
    lower: Option<Arc<[u8]>>,
    /// Exclusive upper bound on user keys.
    upper: Option<Arc<[u8]>>,
    /// Reused to build seek keys.
    scratch: Vec<u8>,
}

impl std::fmt::Debug for MemtableIter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemtableIter")
            .field("cur", &self.cur.as_ref().map(|e| e.key()))
            .field("lower", &self.lower)
            .field("upper", &self.upper)
            .finish()
    }
}

impl<'a> MemtableIter<'a> {
    pub(super) fn new(
        map: &'a SkipMap<EntryKey, ()>,
        lower: Option<Arc<[u8]>>,
        upper: Option<Arc<[u8]>>,
    ) -> MemtableIter<'a> {
        MemtableIter {
            map,
            cur: None,
            lower,
            upper,
            scratch: Vec::new(),
        }
    }

    /// Drops the current entry if it lies outside the bounds.
    fn check_bounds(&mut self) {
        let Some(e) = &self.cur else { return };
        let user_key = e.key().user_key();
        let below = self.lower.as_deref().is_some_and(|l| user_key < l);
        let above = self.upper.as_deref().is_some_and(|u| user_key >= u);
        if below || above {
            self.cur = None;
        }
    }

    /// Positions at the first entry at or after `target`, clamped to the
    /// lower bound.
    fn seek_at_least(&mut self, target: &[u8]) {
        self.cur = match &self.lower {
            Some(lower) => {
                encode_into(&mut self.scratch, lower, TRAILER_FIRST);
                let first = KeyRef::new(&self.scratch);
                let target = KeyRef::new(target);
                self.map.lower_bound(Bound::Included(first.max(target)))
            }
            None => self.map.lower_bound(Bound::Included(KeyRef::new(target))),
        };
        self.check_bounds();
    }

    /// Positions at the last entry at or before `target`, clamped to the
    /// upper bound.
    fn seek_at_most(&mut self, target: Bound<&[u8]>) {
        let target = target.map(KeyRef::new);
        self.cur = match &self.upper {
            Some(upper) => {
                encode_into(&mut self.scratch, upper, TRAILER_FIRST);
                let past = KeyRef::new(&self.scratch);
                match target {
                    Bound::Included(t) if t < past => self.map.upper_bound(Bound::Included(t)),
                    _ => self.map.upper_bound(Bound::Excluded(past)),
                }
            }
            None => self.map.upper_bound(target),
        };
        self.check_bounds();
    }
}

impl InternalIterator for MemtableIter<'_> {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        match &self.lower {
            Some(_) => self.seek_at_least(&[]),
            None => {
                self.cur = self.map.front();
                self.check_bounds();
            }
        }
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.seek_at_most(Bound::Unbounded);
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.seek_at_least(target);
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.seek_at_most(Bound::Included(target));
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if let Some(e) = &self.cur {
            self.cur = e.next();
            self.check_bounds();
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(e) = &self.cur {
            self.cur = e.prev();
            self.check_bounds();
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |e| e.key().encoded())
    }

    fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |e| e.key().value())
    }
}
