//! [`LevelIterator`]: the files of one sorted level (L1+) as a single
//! source, each file opened only when the cursor reaches it.
//!
//! An iterator with one source per file costs, at creation, a lookup and an
//! iterator per file in range, and at each seek a seek in every one of
//! them: at 100,000 files an unbounded iterator's creation took longer than
//! a compaction. A sorted level's files are disjoint and ordered, so one
//! cursor walks them in turn: creation costs nothing per file, and a seek
//! is one descent of the level's tree and one file's seek.
//!
//! Range tombstones do not come through here: a file that may hold them
//! (`FileDesc::range_tombstones`) is opened when the iterator is created,
//! and its tombstones join the snapshot's set (`Db::iter`), since they hide
//! keys of other sources before this cursor reaches the file.
//!
//! Invariant: the entries produced are exactly those of the level's files
//! meeting the bounds, in order, as a merging iterator over one iterator
//! per file would produce them (`tests::matches_one_source_per_file`).

use std::borrow::Borrow;
use std::sync::Arc;

use super::InternalIterator;
use crate::error::Result;
use crate::key::user_key_of;
use crate::version::{FileMeta, Level};

/// Opens one file of a level as an iterator within the level iterator's
/// bounds.
pub trait FileOpener {
    /// The iterator over one file.
    type Iter: InternalIterator;
    /// The file's iterator, or `None` when the file holds nothing the
    /// iterator wants (a prefix its filter rules out).
    fn open(&self, file: &Arc<FileMeta>) -> Result<Option<Self::Iter>>;
}

/// An opener shared by the iterators of several levels.
impl<T: FileOpener> FileOpener for Arc<T> {
    type Iter = T::Iter;
    fn open(&self, file: &Arc<FileMeta>) -> Result<Option<T::Iter>> {
        (**self).open(file)
    }
}

/// One sorted level as one source; see the module doc.
pub struct LevelIterator<O: FileOpener, L: Borrow<Level> = Level> {
    /// The level: owned, or borrowed from an owner the caller keeps beside
    /// the iterator (a database iterator's read state).
    level: L,
    /// User-key bounds: `lower` inclusive, `upper` exclusive. Shared: an
    /// iterator has one source per level, and a copy of each bound per
    /// level was an allocation apiece at every iterator creation.
    lower: Option<Arc<[u8]>>,
    upper: Option<Arc<[u8]>>,
    opener: O,
    /// The file the cursor is in, and its iterator (`None`: the file was
    /// ruled out, or the cursor is off the level).
    file: Option<Arc<FileMeta>>,
    iter: Option<O::Iter>,
}

impl<O: FileOpener, L: Borrow<Level>> std::fmt::Debug for LevelIterator<O, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelIterator")
            .field("files", &self.level.borrow().len())
            .field("file", &self.file.as_ref().map(|f| f.number()))
            .field("valid", &self.current_valid())
            .finish()
    }
}

impl<O: FileOpener, L: Borrow<Level>> LevelIterator<O, L> {
    /// A cursor over `level` (a sorted level) within the user-key bounds;
    /// not positioned until a seek. Inlined, so that a caller storing it
    /// builds it in place (it holds a file iterator: hundreds of bytes).
    #[inline]
    pub fn new(level: L, lower: Option<Arc<[u8]>>, upper: Option<Arc<[u8]>>, opener: O) -> Self {
        LevelIterator {
            level,
            lower,
            upper,
            opener,
            file: None,
            iter: None,
        }
    }

    /// Whether `file`'s user-key range meets `[lower, upper)`.
    fn in_bounds(&self, file: &FileMeta) -> bool {
        self.lower
            .as_deref()
            .is_none_or(|l| file.largest().user_key() >= l)
            && self
                .upper
                .as_deref()
                .is_none_or(|u| file.smallest().user_key() < u)
    }

    /// Moves the cursor to `file` (unpositioned within it); `None` leaves
    /// the level. A file out of bounds leaves it too.
    fn enter(&mut self, file: Option<Arc<FileMeta>>) -> Result<()> {
        self.iter = None;
        self.file = file.filter(|f| self.in_bounds(f));
        if let Some(f) = &self.file {
            self.iter = self.opener.open(f)?;
        }
        Ok(())
    }

    fn current_valid(&self) -> bool {
        self.iter.as_ref().is_some_and(|i| i.valid())
    }

    /// While the current file has no entry left, moves on to the next
    /// file's first entry.
    fn skip_forward(&mut self) -> Result<()> {
        while !self.current_valid() {
            let Some(f) = &self.file else {
                return Ok(());
            };
            let next = self.level.borrow().next_file(f).cloned();
            if next.is_none() {
                return self.enter(None);
            }
            self.enter(next)?;
            if let Some(i) = &mut self.iter {
                i.seek_to_first()?;
            }
        }
        Ok(())
    }

    /// While the current file has no entry left, moves back to the previous
    /// file's last entry.
    fn skip_backward(&mut self) -> Result<()> {
        while !self.current_valid() {
            let Some(f) = &self.file else {
                return Ok(());
            };
            let prev = self.level.borrow().prev_file(f).cloned();
            if prev.is_none() {
                return self.enter(None);
            }
            self.enter(prev)?;
            if let Some(i) = &mut self.iter {
                i.seek_to_last()?;
            }
        }
        Ok(())
    }

    /// The first file at or after `user_key`, not before the lower bound.
    fn file_from(&self, user_key: Option<&[u8]>) -> Option<Arc<FileMeta>> {
        let key = match (user_key, self.lower.as_deref()) {
            (Some(k), Some(l)) => Some(k.max(l)),
            (k, l) => k.or(l),
        };
        match key {
            Some(k) => self.level.borrow().file_at_or_after(k),
            None => self.level.borrow().first_file(),
        }
        .cloned()
    }

    /// The last file at or before `user_key` that starts below the upper
    /// bound.
    fn file_until(&self, user_key: Option<&[u8]>) -> Option<Arc<FileMeta>> {
        let mut file = match user_key {
            Some(k) => self.level.borrow().file_at_or_before(k),
            None => self.level.borrow().last_file(),
        };
        if let Some(u) = self.upper.as_deref() {
            // Files starting at or past the exclusive bound hold nothing.
            while let Some(f) = file.filter(|f| f.smallest().user_key() >= u) {
                file = self.level.borrow().prev_file(f);
            }
        }
        file.cloned()
    }
}

impl<O: FileOpener, L: Borrow<Level>> InternalIterator for LevelIterator<O, L> {
    fn valid(&self) -> bool {
        self.current_valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.enter(self.file_from(None))?;
        if let Some(i) = &mut self.iter {
            i.seek_to_first()?;
        }
        self.skip_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.enter(self.file_until(None))?;
        if let Some(i) = &mut self.iter {
            i.seek_to_last()?;
        }
        self.skip_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.enter(self.file_from(Some(user_key_of(target))))?;
        if let Some(i) = &mut self.iter {
            i.seek(target)?;
        }
        self.skip_forward()
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.enter(self.file_until(Some(user_key_of(target))))?;
        if let Some(i) = &mut self.iter {
            i.seek_for_prev(target)?;
        }
        self.skip_backward()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(i) = self.iter.as_mut().filter(|i| i.valid()) {
            i.next()?;
            self.skip_forward()?;
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(i) = self.iter.as_mut().filter(|i| i.valid()) {
            i.prev()?;
            self.skip_backward()?;
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        match &self.iter {
            Some(i) if i.valid() => i.key(),
            _ => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match &self.iter {
            Some(i) if i.valid() => i.value(),
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests;
