//! The read path's iterators, in layers:
//! - [`InternalIterator`]: one sorted source of internal keys, every version
//!   of every key (a memtable, later an SST file or a level);
//! - [`LevelIterator`]: the files of one sorted level as one source, each
//!   opened when the cursor reaches it;
//! - [`MergingIterator`]: several sources merged into one sorted stream of
//!   internal keys, in both directions;
//! - [`SnapshotIterator`]: the user-visible view at a snapshot over that
//!   stream: the newest visible version of each user key, without deleted
//!   keys, within bounds;
//! - [`RangeTombstoneSet`]: the range deletions of all sources, fragmented
//!   for a snapshot, which the snapshot iterator consults.
//!
//! Range tombstones do not travel in the point stream: each source hands
//! them over separately (a memtable keeps them apart, an SST file in its own
//! block), because a tombstone must hide keys of *other* sources.

mod level;
mod merging;
mod range_tombstone;
mod snapshot;

#[cfg(test)]
mod vec_iter;
pub use level::{FileOpener, LevelIterator};
pub use merging::MergingIterator;
pub use range_tombstone::{RangeTombstone, RangeTombstoneSet};
pub(crate) use snapshot::prefix_successor;
pub use snapshot::{IterOptions, SnapshotIterator};

use crate::error::Result;

/// A sorted source of internal keys (`user_key | u64 trailer`, ordered by
/// [`crate::key::compare`]): every version of every key it holds, range
/// tombstones excepted.
///
/// Contract:
/// - Positioning methods return an error only for a failure of the source
///   (I/O, corruption); the iterator is then not valid.
/// - `key` and `value` may be called only while `valid()`; otherwise they
///   return empty slices. The slices stay valid until the next positioning
///   call.
/// - `next` and `prev` on an iterator that is not valid do nothing.
/// - An iterator built with bounds never yields a key outside them; the
///   merging iterator does not rely on it.
pub trait InternalIterator {
    /// Returns true when positioned at an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions at the last entry.
    fn seek_to_last(&mut self) -> Result<()>;
    /// Positions at the first entry at or after the encoded internal key
    /// `target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Positions at the last entry at or before the encoded internal key
    /// `target`.
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()>;
    /// Moves to the next entry.
    fn next(&mut self) -> Result<()>;
    /// Moves to the previous entry.
    fn prev(&mut self) -> Result<()>;
    /// The encoded internal key of the current entry.
    fn key(&self) -> &[u8];
    /// The value of the current entry.
    fn value(&self) -> &[u8];
}

impl<I: InternalIterator + ?Sized> InternalIterator for Box<I> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        (**self).seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        (**self).seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek(target)
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek_for_prev(target)
    }
    fn next(&mut self) -> Result<()> {
        (**self).next()
    }
    fn prev(&mut self) -> Result<()> {
        (**self).prev()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
}
