//! `VecIter`: a sorted vector of entries as an [`InternalIterator`], the
//! model source of the iterator tests.

use std::cmp::Ordering;

use super::InternalIterator;
use crate::error::Result;
use crate::key::compare;

/// Entries sorted by internal key, with a cursor.
pub(crate) struct VecIter {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    at: Option<usize>,
}

impl VecIter {
    /// A cursor over `entries` (sorted by internal key), not positioned.
    pub(crate) fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> VecIter {
        VecIter { entries, at: None }
    }

    fn set(&mut self, at: Option<usize>) {
        self.at = at.filter(|&i| i < self.entries.len());
    }
}

impl InternalIterator for VecIter {
    fn valid(&self) -> bool {
        self.at.is_some()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.set(Some(0));
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.set(self.entries.len().checked_sub(1));
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let i = self
            .entries
            .partition_point(|(k, _)| compare(k, target) == Ordering::Less);
        self.set(Some(i));
        Ok(())
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let i = self
            .entries
            .partition_point(|(k, _)| compare(k, target) != Ordering::Greater);
        self.set(i.checked_sub(1));
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        if let Some(i) = self.at {
            self.set(Some(i + 1));
        }
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        if let Some(i) = self.at {
            self.set(i.checked_sub(1));
        }
        Ok(())
    }
    fn key(&self) -> &[u8] {
        self.at.map_or(&[], |i| &self.entries[i].0)
    }
    fn value(&self) -> &[u8] {
        self.at.map_or(&[], |i| &self.entries[i].1)
    }
}
