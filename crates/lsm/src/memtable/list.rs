//! `MemtableList`: the immutable memtables of a column family, newest first,
//! waiting for a flush.
//!
//! The list is a value: switching a memtable or retiring flushed ones builds
//! a new list, which the engine publishes in its read state with one pointer
//! swap. A reader keeps the list it loaded (and so the memtables in it, by
//! their `Arc`s) for as long as it reads, whatever flushes do meanwhile.
//!
//! Invariants:
//! - Ids strictly decrease from the front (newest) to the back (oldest);
//!   memtables are flushed oldest first, so retiring removes a suffix.

use std::sync::Arc;

use super::{Memtable, MemtableId};
use crate::error::{Error, Result};

/// Immutable memtables in order, newest first.
#[derive(Debug, Clone, Default)]
pub struct MemtableList {
    tables: Vec<Arc<Memtable>>,
}

impl MemtableList {
    /// Returns an empty list.
    pub fn new() -> MemtableList {
        MemtableList::default()
    }

    /// Returns the list with `switched` (the memtable that was active until
    /// now) in front. Fails unless its id is above every id in the list.
    pub fn with_newest(&self, switched: Arc<Memtable>) -> Result<MemtableList> {
        if let Some(front) = self.tables.first() {
            if switched.id() <= front.id() {
                return Err(Error::InvalidArgument(format!(
                    "memtable {} is not newer than memtable {}",
                    switched.id(),
                    front.id()
                )));
            }
        }
        let mut tables = Vec::with_capacity(self.tables.len() + 1);
        tables.push(switched);
        tables.extend(self.tables.iter().cloned());
        Ok(MemtableList { tables })
    }

    /// Returns the list without the memtables whose ids are at or below
    /// `flushed`: the oldest ones, whose data a flush has installed as SST
    /// files.
    pub fn without_flushed(&self, flushed: MemtableId) -> MemtableList {
        let keep = self.tables.partition_point(|m| m.id() > flushed);
        MemtableList {
            tables: self.tables[..keep].to_vec(),
        }
    }

    /// Iterates newest first: the order in which a point lookup asks them.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Arc<Memtable>> + '_ {
        self.tables.iter()
    }

    /// Returns the oldest memtable: the next to flush.
    pub fn oldest(&self) -> Option<&Arc<Memtable>> {
        self.tables.last()
    }

    /// Returns the number of memtables.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    /// Returns true when no memtable waits for a flush.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// Returns the approximate bytes of all the memtables, for write stalls.
    pub fn approximate_bytes(&self) -> usize {
        self.tables.iter().map(|m| m.approximate_bytes()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_first_and_flushed_from_the_back() {
        let list = MemtableList::new();
        let list = list.with_newest(Arc::new(Memtable::new(1))).unwrap();
        let list = list.with_newest(Arc::new(Memtable::new(2))).unwrap();
        let list = list.with_newest(Arc::new(Memtable::new(4))).unwrap();
        assert!(list.with_newest(Arc::new(Memtable::new(4))).is_err());
        let ids: Vec<_> = list.iter().map(|m| m.id()).collect();
        assert_eq!(ids, [4, 2, 1]);
        assert_eq!(list.oldest().unwrap().id(), 1);
        let after = list.without_flushed(2);
        assert_eq!(after.iter().map(|m| m.id()).collect::<Vec<_>>(), [4]);
        assert_eq!(list.len(), 3, "the old list is unchanged");
        assert!(list.without_flushed(9).is_empty());
    }
}
