//! Iteration over a file's data entries, both ways, with user-key bounds.
//!
//! Two levels: a cursor over the index yields data block handles, and a
//! cursor over the current data block yields entries; moving past a block's
//! end loads the next one. A partitioned index is itself such a pair (top
//! level over partitions), so the data cursor is two-level over a two-level
//! index cursor, built from the same [`TwoLevel`] type.
//!
//! Invariants:
//! - A positioned iterator's key parsed as an internal key of a point kind;
//!   a data entry that does not is reported as corruption, never returned.
//! - Bounds: `lower` is inclusive, `upper` exclusive, both on user keys; an
//!   entry outside them is never reported as valid.
//! - Each block's order is checked when it is decoded; the order across
//!   blocks is checked as the iterator moves: `next` must reach a larger
//!   key, `prev` a smaller one, `seek` a key at or after its target and
//!   `seek_for_prev` one at or before it. A file whose blocks pass their
//!   checksums but disagree with each other (only a writer bug or a forged
//!   file can do that) is then reported as corruption rather than scanned
//!   out of order.
//!
//! Concurrency: an iterator is owned by one thread; it holds the reader's
//! shared state (`Arc`), so it outlives the `SstReader` it came from.

use std::sync::Arc;

use super::block::{Block, BlockIter, BorrowedBlock, KeyOrder};
use super::format::{BlockHandle, IndexKind};
use super::reader::ReaderInner;
use crate::error::Result;
use crate::key::{self, SeqNo, ValueKind, MAX_SEQNO};

/// The key a lookup of `user_key` at `snapshot` seeks to: it sorts before
/// every version of `user_key` with a sequence number at or below
/// `snapshot`, and after every newer one. `BlobIndex` is the largest kind, so
/// its trailer is the largest for that sequence number.
pub fn lookup_key(user_key: &[u8], snapshot: SeqNo) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + key::TRAILER_LEN);
    k.extend_from_slice(user_key);
    k.extend_from_slice(&lookup_trailer(snapshot).to_le_bytes());
    k
}

/// The trailer of [`lookup_key`].
pub(crate) fn lookup_trailer(snapshot: SeqNo) -> u64 {
    key::trailer(snapshot.min(MAX_SEQNO), ValueKind::BlobIndex)
}

/// A cursor whose moves may need to read blocks.
trait Cursor: Send + std::fmt::Debug {
    fn valid(&self) -> bool;
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
    fn first(&mut self) -> Result<()>;
    fn last(&mut self) -> Result<()>;
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()>;
    fn next(&mut self) -> Result<()>;
    fn prev(&mut self) -> Result<()>;
}

impl<B: std::ops::Deref<Target = Block> + Send + std::fmt::Debug> Cursor for BlockIter<B> {
    fn valid(&self) -> bool {
        BlockIter::valid(self)
    }
    fn key(&self) -> &[u8] {
        BlockIter::key(self)
    }
    fn value(&self) -> &[u8] {
        BlockIter::value(self)
    }
    fn first(&mut self) -> Result<()> {
        BlockIter::first(self);
        Ok(())
    }
    fn last(&mut self) -> Result<()> {
        BlockIter::last(self);
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        BlockIter::seek(self, target);
        Ok(())
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        BlockIter::seek_for_prev(self, target);
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        BlockIter::next(self);
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        BlockIter::prev(self);
        Ok(())
    }
}

/// How an iterator holds its file's reader: a reference count of its own,
/// or a borrow whose owner travels beside the iterator (a database
/// iterator's L0 files, whose readers its read state keeps:
/// `SstReader::iter_borrowed`). The count is shared by every iterator over
/// the file, so taking it cost each creation a cache line from the other
/// cores.
#[derive(Debug, Clone)]
pub(super) enum ReaderHandle {
    Owned(Arc<ReaderInner>),
    Borrowed(std::ptr::NonNull<ReaderInner>),
}

// SAFETY: `ReaderInner` is `Sync` (readers are shared between threads
// behind an `Arc`); the borrowed form only reads through the pointer.
unsafe impl Send for ReaderHandle {}

impl std::ops::Deref for ReaderHandle {
    type Target = ReaderInner;
    fn deref(&self) -> &ReaderInner {
        match self {
            ReaderHandle::Owned(r) => r,
            // SAFETY: `SstReader::iter_borrowed`'s contract: the reader
            // outlives the iterator.
            ReaderHandle::Borrowed(r) => unsafe { r.as_ref() },
        }
    }
}

/// An outer cursor whose values are block handles, and a cursor over the
/// block the outer one points at.
#[derive(Debug)]
struct TwoLevel<O> {
    outer: O,
    inner: Option<(BlockHandle, BlockIter)>,
    reader: ReaderHandle,
    what: &'static str,
    /// Blocks read from the file go into the block cache.
    fill_cache: bool,
    /// The inner blocks are index partitions, which the open file keeps.
    partitions: bool,
}

impl<O: Cursor> TwoLevel<O> {
    #[inline]
    fn new(outer: O, reader: ReaderHandle, what: &'static str) -> Self {
        TwoLevel {
            outer,
            inner: None,
            reader,
            what,
            fill_cache: true,
            partitions: false,
        }
    }

    /// Points the inner cursor at the outer cursor's block (reusing it when
    /// it is already there), or at nothing when the outer one is invalid.
    fn load(&mut self) -> Result<Option<&mut BlockIter>> {
        if !self.outer.valid() {
            self.inner = None;
            return Ok(None);
        }
        let handle = BlockHandle::decode(self.outer.value()).map_err(|e| {
            let at = self.inner.as_ref().map_or(0, |(h, _)| h.offset);
            self.reader
                .corruption(at, format!("{} entry: bad block handle: {e}", self.what))
        })?;
        if self.inner.as_ref().is_none_or(|(h, _)| *h != handle) {
            let block = if self.partitions {
                self.reader.index_partition(handle)?
            } else {
                self.reader.read_block_filling(
                    handle,
                    KeyOrder::Internal,
                    self.what,
                    self.fill_cache,
                )?
            };
            self.inner = Some((handle, block.iter()));
        }
        Ok(self.inner.as_mut().map(|(_, it)| it))
    }

    fn skip_empty_forward(&mut self) -> Result<()> {
        while self.inner.as_ref().is_some_and(|(_, it)| !it.valid()) {
            self.outer.next()?;
            if let Some(it) = self.load()? {
                it.first();
            }
        }
        Ok(())
    }

    fn skip_empty_backward(&mut self) -> Result<()> {
        while self.inner.as_ref().is_some_and(|(_, it)| !it.valid()) {
            self.outer.prev()?;
            if let Some(it) = self.load()? {
                it.last();
            }
        }
        Ok(())
    }

    fn block_offset(&self) -> u64 {
        self.inner.as_ref().map_or(0, |(h, _)| h.offset)
    }
}

impl<O: Cursor> Cursor for TwoLevel<O> {
    fn valid(&self) -> bool {
        self.inner.as_ref().is_some_and(|(_, it)| it.valid())
    }
    fn key(&self) -> &[u8] {
        self.inner.as_ref().map_or(&[], |(_, it)| it.key())
    }
    fn value(&self) -> &[u8] {
        self.inner.as_ref().map_or(&[], |(_, it)| it.value())
    }
    fn first(&mut self) -> Result<()> {
        self.outer.first()?;
        if let Some(it) = self.load()? {
            it.first();
        }
        self.skip_empty_forward()
    }
    fn last(&mut self) -> Result<()> {
        self.outer.last()?;
        if let Some(it) = self.load()? {
            it.last();
        }
        self.skip_empty_backward()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.outer.seek(target)?;
        if let Some(it) = self.load()? {
            it.seek(target);
        }
        self.skip_empty_forward()
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        // The first block whose separator is at or after the target holds the
        // last key at or before it, or that key is in an earlier block.
        self.outer.seek(target)?;
        if !self.outer.valid() {
            self.outer.last()?;
        }
        if let Some(it) = self.load()? {
            it.seek_for_prev(target);
        }
        self.skip_empty_backward()
    }
    fn next(&mut self) -> Result<()> {
        if let Some((_, it)) = &mut self.inner {
            it.next();
        }
        self.skip_empty_forward()
    }
    fn prev(&mut self) -> Result<()> {
        if let Some((_, it)) = &mut self.inner {
            it.prev();
        }
        self.skip_empty_backward()
    }
}

/// The index cursor: the top index block, or its partitions through it.
/// An enum rather than a boxed trait object: the box was an allocation at
/// every creation of an iterator over the file, and L0's files are opened
/// by every database iterator.
#[derive(Debug)]
enum IndexCursor {
    Single(BlockIter<BorrowedBlock>),
    /// Boxed: two block cursors would double the size of every `SstIter`,
    /// and files of a partitioned index are the large, rarer ones.
    Partitioned(Box<TwoLevel<BlockIter<BorrowedBlock>>>),
}

impl<C: Cursor + ?Sized> Cursor for Box<C> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
    fn first(&mut self) -> Result<()> {
        (**self).first()
    }
    fn last(&mut self) -> Result<()> {
        (**self).last()
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
}

/// Runs `$e` on whichever cursor `$index` holds, bound to `$it`.
macro_rules! on_index {
    ($index:expr, $it:ident => $e:expr) => {
        match $index {
            IndexCursor::Single($it) => $e,
            IndexCursor::Partitioned($it) => $e,
        }
    };
}

impl Cursor for IndexCursor {
    fn valid(&self) -> bool {
        on_index!(self, it => Cursor::valid(it))
    }
    fn key(&self) -> &[u8] {
        on_index!(self, it => Cursor::key(it))
    }
    fn value(&self) -> &[u8] {
        on_index!(self, it => Cursor::value(it))
    }
    fn first(&mut self) -> Result<()> {
        on_index!(self, it => Cursor::first(it))
    }
    fn last(&mut self) -> Result<()> {
        on_index!(self, it => Cursor::last(it))
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        on_index!(self, it => Cursor::seek(it, target))
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        on_index!(self, it => Cursor::seek_for_prev(it, target))
    }
    fn next(&mut self) -> Result<()> {
        on_index!(self, it => Cursor::next(it))
    }
    fn prev(&mut self) -> Result<()> {
        on_index!(self, it => Cursor::prev(it))
    }
}

/// An iterator over an SST file's data entries (internal keys and values),
/// within optional user-key bounds.
///
/// Every move returns `Result`: a block that fails its checks is
/// `Error::Corruption`, after which the iterator is not valid.
#[derive(Debug)]
pub struct SstIter {
    data: TwoLevel<IndexCursor>,
    /// Shared with the other sources of a database iterator (no copy per
    /// file).
    lower: Option<Arc<[u8]>>,
    upper: Option<Arc<[u8]>>,
    /// The current entry is within bounds and well-formed.
    positioned: bool,
    seqno: SeqNo,
    kind: ValueKind,
    /// The key before the last move (a reused buffer), for the order check.
    before: Vec<u8>,
    /// An ingested file's seqno (see `SstReader::open_assigned`): entries
    /// are stored at seqno 0 with unique user keys, and presented at it.
    global_seqno: Option<SeqNo>,
    /// The presented key of the current entry, when `global_seqno` is set.
    presented: Vec<u8>,
}

/// What the key reached by a move must be, relative to a reference key.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// After `before` (next).
    After,
    /// Before `before` (prev).
    Before,
    /// At or after `before` (seek to `before`).
    AtOrAfter,
    /// At or before `before` (seek_for_prev to `before`).
    AtOrBefore,
    /// No check (first, last).
    Any,
}

impl SstIter {
    // Inlined into the callers, so that a database iterator's source is
    // built where it is stored rather than copied there (a source is
    // hundreds of bytes; the copies were a third of a creation).
    #[inline]
    pub(super) fn new(
        reader: ReaderHandle,
        lower: Option<Arc<[u8]>>,
        upper: Option<Arc<[u8]>>,
    ) -> SstIter {
        let global_seqno = reader.global_seqno;
        // SAFETY: the index block belongs to `reader`, which this iterator
        // holds (in `data`, and in the partitioned cursor) or borrows for as
        // long as the cursor lives, and a reader never replaces its index
        // block.
        let top = unsafe { reader.index_top.iter_borrowed() };
        let index: IndexCursor = match reader.footer.index_kind {
            IndexKind::Single => IndexCursor::Single(top),
            IndexKind::Partitioned => IndexCursor::Partitioned(Box::new(TwoLevel {
                partitions: true,
                ..TwoLevel::new(top, reader.clone(), "index partition")
            })),
        };
        SstIter {
            data: TwoLevel::new(index, reader, "data"),
            lower,
            upper,
            positioned: false,
            seqno: 0,
            kind: ValueKind::Put,
            before: Vec::new(),
            global_seqno,
            presented: Vec::new(),
        }
    }

    /// Keeps the data blocks this iterator reads from the file out of the
    /// block cache (index partitions are the open file's own).
    pub(super) fn stop_filling_cache(&mut self) {
        self.data.fill_cache = false;
    }

    /// True when positioned at an entry.
    pub fn valid(&self) -> bool {
        self.positioned
    }

    /// The current encoded internal key. Only meaningful when `valid()`.
    pub fn key(&self) -> &[u8] {
        if self.global_seqno.is_some() {
            return &self.presented;
        }
        self.data.key()
    }

    /// The current user key.
    pub fn user_key(&self) -> &[u8] {
        let k = self.data.key();
        &k[..k.len().saturating_sub(key::TRAILER_LEN)]
    }

    /// The current entry's sequence number.
    pub fn seqno(&self) -> SeqNo {
        self.seqno
    }

    /// The current entry's kind.
    pub fn kind(&self) -> ValueKind {
        self.kind
    }

    /// The current value.
    pub fn value(&self) -> &[u8] {
        self.data.value()
    }

    /// Checks the entry the data cursor is at, and the bounds in the
    /// direction of travel (`forward`: the upper bound, else the lower).
    fn settle(&mut self, result: Result<()>, forward: bool, expect: Expect) -> Result<()> {
        self.positioned = false;
        if let Err(e) = result {
            self.data.inner = None;
            return Err(e);
        }
        if !self.data.valid() {
            return Ok(());
        }
        let (user_key, seqno, kind) = match key::parse(self.data.key()) {
            Ok(parsed) => parsed,
            Err(e) => {
                let at = self.data.block_offset();
                self.data.inner = None;
                return Err(self
                    .data
                    .reader
                    .corruption(at, format!("data block: bad key: {e}")));
            }
        };
        if kind == ValueKind::RangeDelete {
            let at = self.data.block_offset();
            self.data.inner = None;
            return Err(self
                .data
                .reader
                .corruption(at, "data block: a range deletion among point entries"));
        }
        let order = key::compare(self.data.key(), &self.before);
        let ordered = match expect {
            Expect::After => order.is_gt(),
            Expect::Before => order.is_lt(),
            Expect::AtOrAfter => order.is_ge(),
            Expect::AtOrBefore => order.is_le(),
            Expect::Any => true,
        };
        if !ordered {
            let at = self.data.block_offset();
            self.data.inner = None;
            return Err(self.data.reader.corruption(
                at,
                format!("data block: keys out of order across blocks ({expect:?} expected)"),
            ));
        }
        let in_bounds = if forward {
            self.upper.as_deref().is_none_or(|u| user_key < u)
        } else {
            self.lower.as_deref().is_none_or(|l| user_key >= l)
        };
        self.positioned = in_bounds;
        self.seqno = seqno;
        self.kind = kind;
        if let Some(g) = self.global_seqno {
            if seqno != 0 {
                let at = self.data.block_offset();
                self.positioned = false;
                self.data.inner = None;
                return Err(self
                    .data
                    .reader
                    .corruption(at, "ingested file: an entry not stored at seqno 0"));
            }
            self.seqno = g;
            self.presented.clear();
            // One allocation for a fresh buffer, not a grow per part.
            self.presented.reserve(user_key.len() + 8);
            self.presented.extend_from_slice(user_key);
            self.presented
                .extend_from_slice(&key::trailer(g, kind).to_le_bytes());
        }
        Ok(())
    }

    /// For an ingested file: the stored key to seek to for the presented
    /// `target`. The stored entries of a user key sort after every target
    /// of that key (seqno 0 is the smallest), so a seek goes to the key's
    /// newest possible target and then steps over an entry presented
    /// below `target`; see `seek` and `seek_for_prev`.
    fn stored_target(target: &[u8], newest: bool) -> Vec<u8> {
        let user_key = &target[..target.len().saturating_sub(key::TRAILER_LEN)];
        let mut t = Vec::with_capacity(user_key.len() + 8);
        t.extend_from_slice(user_key);
        let trailer = if newest {
            key::trailer(MAX_SEQNO, ValueKind::BlobIndex)
        } else {
            0
        };
        t.extend_from_slice(&trailer.to_le_bytes());
        t
    }

    /// Moves to the first entry at or after `target` (an encoded internal
    /// key; see [`lookup_key`]), or the lower bound if later.
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        if self.global_seqno.is_some() && target.len() >= key::TRAILER_LEN {
            let stored = SstIter::stored_target(target, true);
            self.seek_stored(&stored)?;
            // One user key has one entry: at most one step.
            if self.positioned && key::compare(&self.presented, target).is_lt() {
                self.next()?;
            }
            return Ok(());
        }
        self.seek_stored(target)
    }

    fn seek_stored(&mut self, target: &[u8]) -> Result<()> {
        self.before.clear();
        match &self.lower {
            Some(l) if key::compare(target, &lookup_key(l, MAX_SEQNO)).is_lt() => {
                self.before.extend_from_slice(&lookup_key(l, MAX_SEQNO));
            }
            _ => self.before.extend_from_slice(target),
        }
        let t = std::mem::take(&mut self.before);
        let r = self.data.seek(&t);
        self.before = t;
        self.settle(r, true, Expect::AtOrAfter)
    }

    /// Moves to the last entry at or before `target`, or before the upper
    /// bound if earlier.
    pub fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        if let Some(u) = &self.upper {
            if key::compare(target, &lookup_key(u, MAX_SEQNO)).is_ge() {
                return self.last();
            }
        }
        if self.global_seqno.is_some() && target.len() >= key::TRAILER_LEN {
            let stored = SstIter::stored_target(target, false);
            self.seek_for_prev_stored(&stored)?;
            if self.positioned && key::compare(&self.presented, target).is_gt() {
                self.prev()?;
            }
            return Ok(());
        }
        self.seek_for_prev_stored(target)
    }

    fn seek_for_prev_stored(&mut self, target: &[u8]) -> Result<()> {
        self.before.clear();
        self.before.extend_from_slice(target);
        let r = self.data.seek_for_prev(target);
        self.settle(r, false, Expect::AtOrBefore)
    }

    /// Moves to the first entry (at or after the lower bound).
    pub fn first(&mut self) -> Result<()> {
        let r = match &self.lower {
            Some(l) => {
                let t = lookup_key(l, MAX_SEQNO);
                self.data.seek(&t)
            }
            None => self.data.first(),
        };
        self.settle(r, true, Expect::Any)
    }

    /// Moves to the last entry (before the upper bound).
    pub fn last(&mut self) -> Result<()> {
        let mut r = match &self.upper {
            Some(u) => {
                let t = lookup_key(u, MAX_SEQNO);
                self.data.seek_for_prev(&t)
            }
            None => self.data.last(),
        };
        // seek_for_prev may land on the upper bound's newest version itself.
        while r.is_ok()
            && self.data.valid()
            && self
                .upper
                .as_deref()
                .is_some_and(|u| self.user_key_raw() >= u)
        {
            r = self.data.prev();
        }
        self.settle(r, false, Expect::Any)
    }

    fn user_key_raw(&self) -> &[u8] {
        let k = self.data.key();
        &k[..k.len().saturating_sub(key::TRAILER_LEN)]
    }

    /// Moves to the next entry. Does nothing unless `valid()`.
    #[expect(
        clippy::should_implement_trait,
        reason = "a cursor that moves both ways and can fail, not an Iterator"
    )]
    pub fn next(&mut self) -> Result<()> {
        if !self.positioned {
            return Ok(());
        }
        self.before.clear();
        self.before.extend_from_slice(self.data.key());
        let r = self.data.next();
        self.settle(r, true, Expect::After)
    }

    /// Moves to the previous entry. Does nothing unless `valid()`.
    pub fn prev(&mut self) -> Result<()> {
        if !self.positioned {
            return Ok(());
        }
        self.before.clear();
        self.before.extend_from_slice(self.data.key());
        let r = self.data.prev();
        self.settle(r, false, Expect::Before)
    }
}

impl crate::iter::InternalIterator for SstIter {
    fn valid(&self) -> bool {
        SstIter::valid(self)
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.last()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        SstIter::seek(self, target)
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        SstIter::seek_for_prev(self, target)
    }
    fn next(&mut self) -> Result<()> {
        SstIter::next(self)
    }
    fn prev(&mut self) -> Result<()> {
        SstIter::prev(self)
    }
    fn key(&self) -> &[u8] {
        SstIter::key(self)
    }
    fn value(&self) -> &[u8] {
        SstIter::value(self)
    }
}
