//! Iterators over one column family at one sequence number: the memtables
//! and every SST file that may hold keys within the bounds, merged, and
//! seen through the range tombstones. An iterator holds its read state, so
//! the memtables and files it reads stay alive (and undeleted) until it is
//! dropped.

use std::sync::Arc;

use super::blob::BlobValues;
use super::cf::ColumnFamily;
use super::options::ReadOptions;
use super::scan_ahead::ScanAhead;
use super::Db;
use crate::error::{Error, Result};
use crate::iter::{
    FileOpener, InternalIterator, LevelIterator, MergingIterator, RangeTombstone,
    RangeTombstoneSet, SnapshotIterator,
};
use crate::key::{SeqNo, ValueKind};
use crate::memtable::{Memtable, MemtableIter};
use crate::read_state::ReadState;
use crate::version::{FileMeta, Level};

/// One source of a [`DbIterator`], stored in the source list itself: a
/// box per source was an allocation apiece at every creation, and each
/// allocation may wait for glibc's arena lock (`docs/lsm.md`, "Allocations
/// on the read path").
enum Source {
    Memtable(StateMemtableIter),
    Table(crate::sst::SstIter),
    Level(LevelIterator<Arc<TableOpener>, StateLevel>),
}

/// A level of the iterator's read state, borrowed: the state's version
/// owns it for as long as the iterator holds the state. Cloning the level
/// took two reference counts that every iterator shares, so each creation
/// took their cache lines from the other cores.
struct StateLevel(std::ptr::NonNull<Level>);

// SAFETY: a `Level` is immutable and `Sync`; only read through the pointer.
unsafe impl Send for StateLevel {}

impl StateLevel {
    /// # Safety
    /// `level` must outlive the `StateLevel`: it belongs to the read state
    /// the iterator holds.
    unsafe fn new(level: &Level) -> StateLevel {
        StateLevel(std::ptr::NonNull::from(level))
    }
}

impl std::borrow::Borrow<Level> for StateLevel {
    fn borrow(&self) -> &Level {
        // SAFETY: `StateLevel::new`'s contract.
        unsafe { self.0.as_ref() }
    }
}

/// Runs `$e` on whichever iterator `$source` holds, bound to `$it`.
macro_rules! on_source {
    ($source:expr, $it:ident => $e:expr) => {
        match $source {
            Source::Memtable($it) => $e,
            Source::Table($it) => $e,
            Source::Level($it) => $e,
        }
    };
}

impl InternalIterator for Source {
    fn valid(&self) -> bool {
        on_source!(self, it => it.valid())
    }
    fn seek_to_first(&mut self) -> Result<()> {
        on_source!(self, it => it.seek_to_first())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        on_source!(self, it => it.seek_to_last())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        on_source!(self, it => it.seek(target))
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        on_source!(self, it => it.seek_for_prev(target))
    }
    fn next(&mut self) -> Result<()> {
        on_source!(self, it => it.next())
    }
    fn prev(&mut self) -> Result<()> {
        on_source!(self, it => it.prev())
    }
    fn key(&self) -> &[u8] {
        on_source!(self, it => it.key())
    }
    fn value(&self) -> &[u8] {
        on_source!(self, it => it.value())
    }
}

/// An iterator over a memtable of the iterator's read state, which keeps
/// the memtable alive (no count of its own: see [`StateLevel`]).
struct StateMemtableIter {
    iter: MemtableIter<'static>,
}

impl StateMemtableIter {
    /// # Safety
    /// `memtable` must outlive the iterator: it belongs to the read state
    /// the database iterator holds, and drops after its sources.
    unsafe fn new(memtable: &Memtable, lower: Option<Arc<[u8]>>, upper: Option<Arc<[u8]>>) -> Self {
        let iter = memtable.iter_with_shared_bounds(lower, upper);
        // SAFETY: the caller's contract; the bounds are owned by the
        // iterator, so only the memtable is borrowed.
        let iter: MemtableIter<'static> = unsafe { std::mem::transmute(iter) };
        StateMemtableIter { iter }
    }
}

impl InternalIterator for StateMemtableIter {
    fn valid(&self) -> bool {
        self.iter.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.iter.seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.iter.seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.iter.seek(target)
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.iter.seek_for_prev(target)
    }
    fn next(&mut self) -> Result<()> {
        self.iter.next()
    }
    fn prev(&mut self) -> Result<()> {
        self.iter.prev()
    }
    fn key(&self) -> &[u8] {
        self.iter.key()
    }
    fn value(&self) -> &[u8] {
        self.iter.value()
    }
}

/// A cursor over the live keys of one column family, in order, both ways.
/// Not positioned until a seek. Every move returns `Result`: a corrupt block
/// is `Error::Corruption` naming the file, and the iterator is then not
/// valid until the next seek.
///
/// A scan that keeps moving forward over separated values fetches them
/// ahead, in batches read in (file, offset) order, and asks the OS to read
/// ahead as far as the scan and its upper bound say (`docs/lsm.md`, "Scans
/// over separated values"); an error met ahead is returned by the move onto
/// the entry it belongs to.
pub struct DbIterator {
    // Declared first: dropped before the state that owns what it reads.
    // Its sources borrow from `state` (memtables, levels, L0's kept
    // readers) without counts of their own; `state` is never replaced.
    inner: SnapshotIterator<MergingIterator<Source>>,
    /// Follows the references of separated values; made at the first one,
    /// so that an iterator over inline values never builds it.
    blobs: Option<BlobValues>,
    /// Opens the iterator's files (the blob files too).
    opener: Arc<TableOpener>,
    /// The current separated value, fetched when the cursor reached it.
    blob_value: Vec<u8>,
    /// A forward scan's entries and values taken ahead of the cursor; while
    /// it is active, the cursor is its current entry, not `inner`'s.
    ahead: ScanAhead,
    /// A move failed: not valid until the next seek.
    failed: bool,
    /// `ReadOptions::key_only`: separated values are not fetched.
    key_only: bool,
    /// `ReadOptions::lazy_values`: moves leave separated values unread.
    lazy: bool,
    /// The current entry's separated value is not read yet (`lazy`).
    value_pending: bool,
    state: Arc<ReadState>,
    _snapshot: Option<super::Snapshot>,
}

impl std::fmt::Debug for DbIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIterator")
            .field("valid", &self.valid())
            .field("fetching_ahead", &self.ahead.active())
            .field("inner_seqno", &self.inner_seqno())
            .finish()
    }
}

impl DbIterator {
    fn inner_seqno(&self) -> Option<SeqNo> {
        self.inner.valid().then(|| self.inner.seqno())
    }

    /// True when positioned at a key.
    pub fn valid(&self) -> bool {
        self.ahead.active() || (!self.failed && self.inner.valid())
    }

    /// The current key; empty when not valid.
    pub fn key(&self) -> &[u8] {
        if self.ahead.active() {
            self.ahead.key()
        } else if self.failed {
            &[]
        } else {
            self.inner.key()
        }
    }

    /// The current value (a separated one read from its blob file); empty
    /// when not valid.
    pub fn value(&self) -> &[u8] {
        if self.ahead.active() {
            self.ahead.value()
        } else if self.failed {
            &[]
        } else if self.inner.valid() && self.inner.kind() == ValueKind::BlobIndex {
            &self.blob_value
        } else {
            self.inner.value()
        }
    }

    /// Whether the value is stored inline (`Put`) or separated into a blob
    /// file (`BlobIndex`); [`Self::value`] is the value either way.
    pub fn kind(&self) -> ValueKind {
        if self.ahead.active() {
            self.ahead.kind()
        } else {
            self.inner.kind()
        }
    }

    /// Reads the current separated value if a move left it unread
    /// (`ReadOptions::lazy_values`); does nothing otherwise (an inline
    /// value, one already read, `key_only`, or not valid). A failed read
    /// leaves the iterator not valid until the next seek, as a failed move
    /// does.
    pub fn prepare_value(&mut self) -> Result<()> {
        if !self.value_pending || !self.valid() {
            return Ok(());
        }
        let read = self.read_blob_value();
        if read.is_ok() {
            self.value_pending = false;
        }
        self.mark(read)
    }

    /// Positions at the first key (within the bounds).
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.reposition(|it| it.seek_to_first())
    }

    /// Positions at the last key (within the bounds).
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.reposition(|it| it.seek_to_last())
    }

    /// Positions at the first key at or after `key`.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.reposition(|it| it.seek(key))
    }

    /// Positions at the last key at or before `key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        self.reposition(|it| it.seek_for_prev(key))
    }

    /// Moves to the next key; does nothing when not valid.
    #[expect(
        clippy::should_implement_trait,
        reason = "a cursor that moves both ways and can fail"
    )]
    pub fn next(&mut self) -> Result<()> {
        if !self.valid() {
            return Ok(());
        }
        let moved = self.step_forward();
        self.mark(moved)
    }

    /// Moves to the previous key; does nothing when not valid.
    pub fn prev(&mut self) -> Result<()> {
        if !self.valid() {
            return Ok(());
        }
        let moved = self.step_backward();
        self.mark(moved)
    }

    /// A seek: whatever was taken ahead is dropped, and the scan's run
    /// starts over.
    fn reposition(
        &mut self,
        seek: impl FnOnce(&mut SnapshotIterator<MergingIterator<Source>>) -> Result<()>,
    ) -> Result<()> {
        self.ahead.reset();
        self.failed = false;
        self.value_pending = false;
        let moved = seek(&mut self.inner).and_then(|()| self.arrive_forward());
        self.mark(moved)
    }

    /// Remembers a failed move: the iterator is then not valid.
    fn mark(&mut self, moved: Result<()>) -> Result<()> {
        if moved.is_err() {
            self.ahead.reset();
            self.failed = true;
        }
        moved
    }

    fn step_forward(&mut self) -> Result<()> {
        if self.ahead.active() {
            let blobs = self.blobs.as_mut().expect("made before fetching ahead");
            if self
                .ahead
                .next(&mut self.inner, blobs, &self.state.version)?
            {
                return Ok(());
            }
            // The inner iterator already stands at the next entry.
        } else {
            self.inner.next()?;
        }
        self.arrive_forward()
    }

    fn step_backward(&mut self) -> Result<()> {
        // While fetching ahead, the inner iterator is ahead of the cursor:
        // it is brought back to the current key (visible at this fixed
        // sequence number, so the seek lands on it) before stepping back.
        let back_to = self.ahead.active().then(|| self.ahead.key().to_vec());
        self.ahead.reset();
        if let Some(key) = back_to {
            self.inner.seek(&key)?;
            debug_assert!(self.inner.valid() && self.inner.key() == key);
        }
        self.inner.prev()?;
        self.load_value()
    }

    /// The cursor reached the inner iterator's entry going forward: fetches
    /// its value, or starts fetching ahead once a scan is under way.
    fn arrive_forward(&mut self) -> Result<()> {
        // A lazy iterator never fetches ahead: it reads only what it is
        // asked for.
        let fetched = !self.key_only
            && !self.lazy
            && self.inner.valid()
            && self.inner.kind() == ValueKind::BlobIndex;
        if !self.ahead.arrived(fetched) {
            return self.load_value();
        }
        self.blob_value.clear();
        let blobs = blob_values(&mut self.blobs, &self.opener.files);
        self.ahead
            .start(&mut self.inner, blobs, &self.state.version)
    }

    /// Reads the current value from its blob file when it is separated
    /// (a lazy iterator only notes that it is unread).
    fn load_value(&mut self) -> Result<()> {
        self.blob_value.clear();
        self.value_pending = false;
        if !self.key_only && self.inner.valid() && self.inner.kind() == ValueKind::BlobIndex {
            if self.lazy {
                self.value_pending = true;
                return Ok(());
            }
            self.read_blob_value()?;
        }
        Ok(())
    }

    /// Reads the separated value of the inner iterator's entry into
    /// `blob_value`.
    fn read_blob_value(&mut self) -> Result<()> {
        let blobs = blob_values(&mut self.blobs, &self.opener.files);
        let r = blobs.decode_ref(self.inner.key(), self.inner.value())?;
        blobs.fetch(
            &self.state.version,
            self.inner.key(),
            &r,
            &mut self.blob_value,
        )
    }
}

impl Db {
    /// An iterator over `cf` at the snapshot of `options` (or the latest
    /// writes), within its bounds and prefix.
    pub fn iter(&self, options: &ReadOptions, cf: &ColumnFamily) -> Result<DbIterator> {
        let inner = self.inner();
        inner.check_open()?;
        let state = cf.live()?;
        for bound in [&options.lower_bound, &options.upper_bound, &options.prefix]
            .into_iter()
            .flatten()
        {
            super::read::check_key(bound)?;
        }
        if let (Some(l), Some(u)) = (&options.lower_bound, &options.upper_bound) {
            if l > u {
                return Err(Error::InvalidArgument(
                    "iterator lower bound is above its upper bound".into(),
                ));
            }
        }
        let (rs, seqno) = inner.read_view(&state.installer, options);
        let rs = arc_swap::Guard::into_inner(rs);
        // The bounds are shared by every source (no copy per memtable,
        // level or file): each allocation of a creation may wait for
        // glibc's arena lock behind a background thread.
        let (lower, upper) = effective_bounds(options);
        // Sized up front: every source is known here, and a growing vector's
        // reallocations took the allocator's arena lock, which a reader
        // then waited for behind background threads (the 1 ms tail of
        // iterator creation, traced with perf sched_switch).
        let l0_files = rs.version.level(0).map_or(0, |l| l.len());
        let mut sources: Vec<Source> =
            Vec::with_capacity(1 + rs.immutables.len() + l0_files + rs.version.num_levels());
        let mut tombstones: Vec<RangeTombstone> = Vec::new();
        for mem in std::iter::once(&rs.active).chain(rs.immutables.iter()) {
            tombstones.extend(mem.range_tombstones(seqno));
            // SAFETY: `mem` belongs to `rs`, which the iterator holds and
            // drops after its sources.
            sources.push(Source::Memtable(unsafe {
                StateMemtableIter::new(mem, lower.clone(), upper.clone())
            }));
        }
        // The file selections take an inclusive end; the exclusive upper
        // bound over-selects by at most the file starting at it, which is
        // harmless. L0's files overlap: one source each. Each sorted level is one
        // source that opens its files as the cursor reaches them; only its
        // files that may hold range tombstones are opened here, for those.
        // One opener for every level: no copy of the bounds per level, and
        // the handles files are opened with behind one count.
        let opener = Arc::new(TableOpener {
            files: inner.table_access.clone(),
            lower: lower.clone(),
            upper: upper.clone(),
            prefix: options.prefix.clone(),
        });
        if let Some(l0) = rs.version.level(0) {
            l0.try_for_each_overlapping_l0(lower.as_deref(), upper.as_deref(), |file| {
                let table = inner.table_access.open_l0(file)?;
                tombstones.extend(table.range_tombstones().iter().cloned());
                // SAFETY: `table` is the reader kept by `file`, an L0 entry
                // of `rs.version` (`FileMeta::pin_reader`: set once, dropped
                // only with the entry). The iterator holds `rs` and drops
                // its sources before it.
                unsafe { opener.push_borrowed(table, &mut sources) };
                Ok::<(), Error>(())
            })?;
        }
        let mut flagged = Vec::new();
        for level in 1..rs.version.num_levels() {
            let Some(files) = rs.version.level(level).filter(|l| !l.is_empty()) else {
                continue;
            };
            flagged.clear();
            files.files_with_range_tombstones(lower.as_deref(), upper.as_deref(), &mut flagged);
            for file in &flagged {
                // Its tombstones may cover keys of other sources even
                // where its prefix filter rules its own keys out.
                let table = inner.open_table(file)?;
                tombstones.extend(table.range_tombstones().iter().cloned());
            }
            // SAFETY: `files` belongs to `rs.version`, as above.
            sources.push(Source::Level(LevelIterator::new(
                unsafe { StateLevel::new(files) },
                lower.clone(),
                upper.clone(),
                opener.clone(),
            )));
        }
        let set = RangeTombstoneSet::new(tombstones.iter(), seqno);
        Ok(DbIterator {
            inner: SnapshotIterator::with_bounds(
                MergingIterator::new(sources),
                seqno,
                set,
                lower,
                upper,
            ),
            blobs: None,
            opener,
            blob_value: Vec::new(),
            ahead: ScanAhead::default(),
            failed: false,
            key_only: options.key_only,
            lazy: options.lazy_values,
            value_pending: false,
            state: rs,
            _snapshot: options.snapshot.clone(),
        })
    }
}

/// The iterator's blob reader, made at its first separated value, so that
/// an iterator over inline values never builds it.
fn blob_values<'a>(
    slot: &'a mut Option<BlobValues>,
    files: &super::read::TableAccess,
) -> &'a mut BlobValues {
    slot.get_or_insert_with(|| {
        BlobValues::for_iterator(files.fs.clone(), &files.dir, files.cache.clone())
    })
}

/// Opens the SST files of an iterator, within its bounds and prefix.
struct TableOpener {
    files: Arc<super::read::TableAccess>,
    lower: Option<Arc<[u8]>>,
    upper: Option<Arc<[u8]>>,
    prefix: Option<Vec<u8>>,
}

impl TableOpener {
    /// The table's iterator, or `None` when its prefix filter rules the
    /// iterator's prefix out.
    fn iter(&self, table: crate::sst::SstReader) -> Option<crate::sst::SstIter> {
        if let Some(prefix) = &self.prefix {
            if !table.may_contain_prefix(prefix) {
                return None;
            }
        }
        Some(table.into_iter_bounded(self.lower.clone(), self.upper.clone()))
    }
}

impl TableOpener {
    /// Adds to `sources` the iterator [`Self::iter`] would make, borrowing
    /// `table` (`SstReader::iter_borrowed`), built in place.
    ///
    /// # Safety
    /// `table` must outlive the iterator.
    unsafe fn push_borrowed(&self, table: &crate::sst::SstReader, sources: &mut Vec<Source>) {
        if let Some(prefix) = &self.prefix {
            if !table.may_contain_prefix(prefix) {
                return;
            }
        }
        // SAFETY: the caller's contract.
        sources.push(Source::Table(unsafe {
            table.iter_borrowed(self.lower.clone(), self.upper.clone())
        }));
    }
}

impl FileOpener for TableOpener {
    type Iter = crate::sst::SstIter;

    fn open(&self, file: &Arc<FileMeta>) -> Result<Option<crate::sst::SstIter>> {
        let table = self.files.open(file)?;
        Ok(self.iter(table))
    }
}

/// A user-key bound shared by an iterator's sources.
type Bound = Option<Arc<[u8]>>;

/// The bounds with the prefix folded in, for choosing sources; shared by
/// every source of the iterator.
fn effective_bounds(options: &ReadOptions) -> (Bound, Bound) {
    let mut lower = options.lower_bound.as_deref();
    let mut upper: Option<std::borrow::Cow<'_, [u8]>> = options
        .upper_bound
        .as_deref()
        .map(std::borrow::Cow::Borrowed);
    if let Some(p) = &options.prefix {
        if lower.is_none_or(|l| l < p.as_slice()) {
            lower = Some(p);
        }
        if let Some(end) = crate::iter::prefix_successor(p) {
            if upper.as_deref().is_none_or(|u| *u > *end) {
                upper = Some(std::borrow::Cow::Owned(end));
            }
        }
    }
    (lower.map(Arc::from), upper.as_deref().map(Arc::from))
}
