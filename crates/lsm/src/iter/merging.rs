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
//! The valid children sit in a binary heap by their current key (the
//! smallest on top going forward, the largest going backward; ties by child
//! order), so a step costs O(log n) comparisons: L0 reaches dozens of files
//! when flushes outrun compaction, and a linear scan compared every one of
//! them at every step. Seeks and changes of direction rebuild the heap in
//! O(n), as they move every child anyway.

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
    /// Index of the child at the merged position (the heap's top); `None`
    /// when not valid.
    current: Option<usize>,
    /// The valid children's indexes, a heap ordered by [`Self::before`].
    heap: Vec<usize>,
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
            heap: Vec::new(),
            direction: Direction::Forward,
            scratch: Vec::new(),
        }
    }

    /// Whether child `a` comes out before child `b` in the current
    /// direction: the smaller key going forward, the larger going backward;
    /// among equal keys the earlier child going forward and the later one
    /// going backward, so that backward order is the exact reverse of
    /// forward order.
    fn before(&self, a: usize, b: usize) -> bool {
        match key::compare(self.children[a].key(), self.children[b].key()) {
            Ordering::Less => self.direction == Direction::Forward,
            Ordering::Greater => self.direction == Direction::Reverse,
            Ordering::Equal => (a < b) == (self.direction == Direction::Forward),
        }
    }

    /// Moves the heap entry at `at` down to its place.
    fn sift_down(&mut self, mut at: usize) {
        loop {
            let left = 2 * at + 1;
            if left >= self.heap.len() {
                return;
            }
            let right = left + 1;
            let mut first = left;
            if right < self.heap.len() && self.before(self.heap[right], self.heap[left]) {
                first = right;
            }
            if !self.before(self.heap[first], self.heap[at]) {
                return;
            }
            self.heap.swap(at, first);
            at = first;
        }
    }

    /// Rebuilds the heap from every valid child and picks its top.
    fn pick(&mut self) {
        self.heap.clear();
        self.heap
            .extend((0..self.children.len()).filter(|&i| self.children[i].valid()));
        for at in (0..self.heap.len() / 2).rev() {
            self.sift_down(at);
        }
        self.current = self.heap.first().copied();
    }

    /// After the top child moved one step: puts it back in its place, or
    /// drops it from the heap when it ran out, and picks the new top.
    fn repick(&mut self) {
        if let Some(&top) = self.heap.first() {
            if !self.children[top].valid() {
                self.heap.swap_remove(0);
            }
            self.sift_down(0);
        }
        self.current = self.heap.first().copied();
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
        let turned = self.direction != direction;
        if turned {
            self.turn(direction, current)?;
        }
        match direction {
            Direction::Forward => self.children[current].next()?,
            Direction::Reverse => self.children[current].prev()?,
        }
        if turned {
            self.pick();
        } else {
            self.repick();
        }
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

#[cfg(test)]
mod tests;
