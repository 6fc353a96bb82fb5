//! `MergingIterator`: several sorted sources merged into one sorted stream
//! of internal keys, forward and backward.
//!
//! Invariants:
//! - Moving forward, every valid child is positioned at its first key after
//!   the merged iterator's previous key, and the current child holds the
//!   smallest key among them; moving backward, every valid child is at its
//!   last key before it, and the current child holds the largest.
//! - A change of direction re-seeks every child but the current one to
//!   re-establish that, as RocksDB's `MergingIterator` does.
//! - Equal internal keys in two sources (which unique seqnos rule out) are
//!   yielded once per source, the earlier source first, never lost.
//!
//! The current child is picked by a linear scan over the children: a read
//! merges a few sorted runs (memtables, level-0 files, one per level), where
//! a scan of a few dozen keys costs about what a heap's bookkeeping does.
//! A heap is the change to make if a benchmark with many runs says so.

use std::cmp::Ordering;

use super::InternalIterator;
use crate::error::Result;
use crate::key;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Merges sorted [`InternalIterator`]s into one; itself one.
#[derive(Debug)]
pub struct MergingIterator<I> {
    children: Vec<I>,
    /// Index of the child at the merged position; `None` when not valid.
    current: Option<usize>,
    direction: Direction,
    /// The current key, kept across a change of direction.
    scratch: Vec<u8>,
}

impl<I: InternalIterator> MergingIterator<I> {
    /// Merges `children`. List newer sources first: among equal keys the
    /// earlier child comes first.
    pub fn new(children: Vec<I>) -> MergingIterator<I> {
        MergingIterator {
            children,
            current: None,
            direction: Direction::Forward,
            scratch: Vec::new(),
        }
    }

    /// Picks the child with the smallest key (forward) or the largest
    /// (backward); ties go to the earlier child in both directions, so that
    /// backward order is the exact reverse of forward order.
    fn pick(&mut self) {
        let mut best: Option<usize> = None;
        for (i, child) in self.children.iter().enumerate() {
            if !child.valid() {
                continue;
            }
            let Some(b) = best else {
                best = Some(i);
                continue;
            };
            let ord = key::compare(child.key(), self.children[b].key());
            let better = match self.direction {
                Direction::Forward => ord == Ordering::Less,
                // Going backward, the later of equal keys comes first.
                Direction::Reverse => ord != Ordering::Less,
            };
            if better {
                best = Some(i);
            }
        }
        self.current = best;
    }

    /// Runs `f` over every child, then picks; on an error the merged
    /// iterator is not valid.
    fn for_all(
        &mut self,
        direction: Direction,
        mut f: impl FnMut(&mut I) -> Result<()>,
    ) -> Result<()> {
        self.direction = direction;
        self.current = None;
        for child in &mut self.children {
            f(child)?;
        }
        self.pick();
        Ok(())
    }

    /// Turns to `direction` around the current key: every other child moves
    /// to the first key past it in that direction.
    fn turn(&mut self, direction: Direction, current: usize) -> Result<()> {
        self.scratch.clear();
        self.scratch.extend_from_slice(self.children[current].key());
        let target = &self.scratch;
        for (i, child) in self.children.iter_mut().enumerate() {
            if i == current {
                continue;
            }
            match direction {
                Direction::Forward => {
                    child.seek(target)?;
                    // Equal keys of earlier children were yielded before
                    // the current one going backward; of later ones, after.
                    while child.valid()
                        && key::compare(child.key(), target) == Ordering::Equal
                        && i < current
                    {
                        child.next()?;
                    }
                }
                Direction::Reverse => {
                    child.seek_for_prev(target)?;
                    while child.valid()
                        && key::compare(child.key(), target) == Ordering::Equal
                        && i > current
                    {
                        child.prev()?;
                    }
                }
            }
        }
        self.direction = direction;
        Ok(())
    }

    /// Moves one step in `direction`.
    fn step(&mut self, direction: Direction) -> Result<()> {
        let Some(current) = self.current else {
            return Ok(());
        };
        self.current = None;
        if self.direction != direction {
            self.turn(direction, current)?;
        }
        match direction {
            Direction::Forward => self.children[current].next()?,
            Direction::Reverse => self.children[current].prev()?,
        }
        self.pick();
        Ok(())
    }
}

impl<I: InternalIterator> InternalIterator for MergingIterator<I> {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.for_all(Direction::Forward, |c| c.seek_to_first())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.for_all(Direction::Reverse, |c| c.seek_to_last())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.for_all(Direction::Forward, |c| c.seek(target))
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.for_all(Direction::Reverse, |c| c.seek_for_prev(target))
    }

    fn next(&mut self) -> Result<()> {
        self.step(Direction::Forward)
    }

    fn prev(&mut self) -> Result<()> {
        self.step(Direction::Reverse)
    }

    fn key(&self) -> &[u8] {
        self.current.map_or(&[], |i| self.children[i].key())
    }

    fn value(&self) -> &[u8] {
        self.current.map_or(&[], |i| self.children[i].value())
    }
}
