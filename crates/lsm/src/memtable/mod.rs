//! The memtable: the newest writes of a column family, in memory, sorted by
//! internal key, until a flush turns them into an SST file.
//!
//! Built on `crossbeam-skiplist`'s lock-free `SkipMap` (epoch-based memory
//! reclamation; an arena skiplist as RocksDB's `InlineSkipList` would save
//! the node's allocation too, but would need `unsafe` code of our own for
//! what a well-kept crate already does). Each entry's key and value are
//! carved from a per-thread block (`entry_key.rs`), so an insert allocates
//! only the skiplist node. Point versions
//! (puts, deletes, blob indexes) live in one map; range tombstones in a
//! second, small one, keyed by `(start, seqno)` with the end as the value,
//! because a tombstone hides keys of older sources too and the read path
//! collects them apart from the point stream.
//!
//! Invariants:
//! - An entry, once inserted, never changes and is never removed: a reader
//!   that found it keeps seeing the same bytes. Inserting an internal key
//!   that is present is refused unless the value is identical (replay).
//! - Every sequence number is in `1..=MAX_SEQNO`; `smallest_seqno` and
//!   `largest_seqno` bound the seqnos of all entries.
//! - `approximate_bytes` only grows.
//!
//! Concurrency contract:
//! - `insert` may be called from many threads at once; readers (`get`,
//!   iterators) take no lock and never block writers.
//! - A reader sees an insert as soon as it returns, but a *consistent* view
//!   needs a snapshot seqno at or below the allocator's visible watermark:
//!   entries above it may be part of a batch still being inserted.
//! - The engine stops inserting into a memtable once it is switched to the
//!   immutable list; nothing here enforces it.

mod entry_key;
mod iter;
mod list;

pub use iter::MemtableIter;
pub use list::MemtableList;

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_skiplist::SkipMap;

use self::entry_key::{encode_into, seek_trailer, EntryKey, KeyRef, TRAILER_LAST};
use crate::error::{Error, Result};
use crate::iter::RangeTombstone;
use crate::key::{self, trailer, SeqNo, ValueKind, MAX_SEQNO};

/// Identifies a memtable within its column family; later memtables have
/// larger ids.
pub type MemtableId = u64;

/// What an entry costs besides its key and value bytes: the skiplist node
/// (tower of about two links on average, refcount, height), the handle on
/// the key and value's bytes, and the allocator's rounding. An estimate: it only
/// decides when to flush.
const ENTRY_OVERHEAD_BYTES: usize = 80;

/// A concurrent sorted map of internal keys to values.
#[derive(Debug)]
pub struct Memtable {
    id: MemtableId,
    /// The WAL file that was current when the memtable became active: its
    /// writes are in that file or later ones.
    log_number: u64,
    /// Puts, deletes and blob indexes by internal key.
    points: SkipMap<EntryKey, ()>,
    /// Range tombstones: `(start, seqno, RangeDelete)` to the exclusive end.
    range_tombstones: SkipMap<EntryKey, ()>,
    bytes: AtomicUsize,
    /// `u64::MAX` while empty.
    smallest_seqno: AtomicU64,
    /// 0 while empty.
    largest_seqno: AtomicU64,
    /// Set when the memtable stops being the active one: the last seqno
    /// allocated then. Writers that took seqnos up to it may still be
    /// inserting; once it is visible, they are done. 0 while active.
    sealed: AtomicU64,
}

impl Memtable {
    /// Returns an empty memtable.
    pub fn new(id: MemtableId) -> Memtable {
        Memtable::with_log_number(id, 0)
    }

    /// Returns an empty memtable whose writes go to WAL file `log_number`
    /// or later ones.
    pub fn with_log_number(id: MemtableId, log_number: u64) -> Memtable {
        Memtable {
            id,
            log_number,
            points: SkipMap::new(),
            range_tombstones: SkipMap::new(),
            bytes: AtomicUsize::new(0),
            smallest_seqno: AtomicU64::new(u64::MAX),
            largest_seqno: AtomicU64::new(0),
            sealed: AtomicU64::new(0),
        }
    }

    /// Returns the number of the WAL file that was current when the
    /// memtable became active.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Returns the memtable's id.
    pub fn id(&self) -> MemtableId {
        self.id
    }

    /// Inserts the version of `user_key` written at `seqno` as `kind`. For
    /// [`ValueKind::RangeDelete`], `user_key` is the range's start and
    /// `value` its exclusive end; for [`ValueKind::Delete`], `value` is
    /// empty. Fails with [`Error::InvalidArgument`], changing nothing, on a
    /// seqno outside `1..=MAX_SEQNO`, an empty key, an empty range, a delete
    /// with a value, or an internal key already present with another value.
    pub fn insert(
        &self,
        user_key: &[u8],
        seqno: SeqNo,
        kind: ValueKind,
        value: &[u8],
    ) -> Result<()> {
        let refuse = |why: &str| {
            Err(Error::InvalidArgument(format!(
                "memtable {}: {why} (seqno {seqno}, {kind:?})",
                self.id
            )))
        };
        if seqno == 0 || seqno > MAX_SEQNO {
            return refuse("seqno outside 1..=MAX_SEQNO");
        }
        if user_key.is_empty() {
            return refuse("empty key");
        }
        match kind {
            ValueKind::RangeDelete if user_key >= value => return refuse("empty range"),
            ValueKind::Delete if !value.is_empty() => return refuse("a delete with a value"),
            _ => {}
        }
        let map = match kind {
            ValueKind::RangeDelete => &self.range_tombstones,
            _ => &self.points,
        };
        let mut inserted = false;
        let entry = map.get_or_insert_with(
            EntryKey::with_value(user_key, trailer(seqno, kind), value),
            || inserted = true,
        );
        if !inserted {
            if entry.key().value() == value {
                return Ok(());
            }
            return refuse("internal key present with another value");
        }
        let bytes = user_key.len() + key::TRAILER_LEN + value.len() + ENTRY_OVERHEAD_BYTES;
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.smallest_seqno.fetch_min(seqno, Ordering::Relaxed);
        self.largest_seqno.fetch_max(seqno, Ordering::Relaxed);
        Ok(())
    }

    /// Looks up `user_key` as a reader at `snapshot` sees it in this
    /// memtable alone:
    /// - `Some((Put | BlobIndex, value))`: the newest version at or below
    ///   the snapshot, not covered by a newer range tombstone;
    /// - `Some((Delete, []))`: that version is a point deletion;
    /// - `Some((RangeDelete, []))`: a range tombstone of this memtable at or
    ///   below the snapshot covers the key and is newer than any version
    ///   here; older sources must not be consulted either, since they hold
    ///   only older versions;
    /// - `None`: the memtable knows nothing of the key; ask older sources.
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<(ValueKind, Vec<u8>)> {
        let mut seek = Vec::with_capacity(user_key.len() + key::TRAILER_LEN);
        encode_into(&mut seek, user_key, seek_trailer(snapshot));
        let version = self
            .points
            .lower_bound(Bound::Included(KeyRef::new(&seek)))
            .filter(|e| e.key().user_key() == user_key);
        let tombstone = self.max_covering_tombstone(user_key, snapshot);
        match version {
            Some(e) if tombstone.is_none_or(|t| t < e.key().seqno()) => {
                let (_, _, kind) = key::parse(e.key().encoded()).ok()?;
                Some((kind, e.key().value().to_vec()))
            }
            _ => tombstone.map(|_| (ValueKind::RangeDelete, Vec::new())),
        }
    }

    /// Returns the largest seqno at or below `snapshot` of this memtable's
    /// range tombstones that cover `user_key`.
    ///
    /// Scans the tombstones starting at or before the key: range deletions
    /// are rare in a memtable (TiKV issues them when a region moves away),
    /// and the iterators fragment them instead (`RangeTombstoneSet`).
    pub fn max_covering_tombstone(&self, user_key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        if self.range_tombstones.is_empty() {
            return None;
        }
        let mut upto = Vec::with_capacity(user_key.len() + key::TRAILER_LEN);
        encode_into(&mut upto, user_key, TRAILER_LAST);
        self.range_tombstones
            .range::<KeyRef, _>((Bound::Unbounded, Bound::Included(KeyRef::new(&upto))))
            .filter(|e| {
                let seqno = e.key().seqno();
                seqno <= snapshot && user_key < e.key().value()
            })
            .map(|e| e.key().seqno())
            .max()
    }

    /// Returns the range tombstones with seqno at or below `snapshot`, for
    /// the merging iterator.
    pub fn range_tombstones(&self, snapshot: SeqNo) -> Vec<RangeTombstone> {
        self.range_tombstones
            .iter()
            .filter(|e| e.key().seqno() <= snapshot)
            .map(|e| RangeTombstone {
                start: e.key().user_key().to_vec(),
                end: e.key().value().to_vec(),
                seqno: e.key().seqno(),
            })
            .collect()
    }

    /// Returns an iterator over the point entries (every version, range
    /// tombstones excepted) in internal-key order.
    pub fn iter(&self) -> MemtableIter<'_> {
        MemtableIter::new(&self.points, None, None)
    }

    /// Returns an iterator over the point entries whose user keys are at or
    /// above `lower` and below `upper`.
    pub fn iter_with_bounds(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> MemtableIter<'_> {
        MemtableIter::new(
            &self.points,
            lower.map(std::sync::Arc::from),
            upper.map(std::sync::Arc::from),
        )
    }

    /// [`Self::iter_with_bounds`] with bounds shared with other holders
    /// (no copy of them).
    pub fn iter_with_shared_bounds(
        &self,
        lower: Option<std::sync::Arc<[u8]>>,
        upper: Option<std::sync::Arc<[u8]>>,
    ) -> MemtableIter<'_> {
        MemtableIter::new(&self.points, lower, upper)
    }

    /// Returns the approximate memory the entries take, in bytes: what the
    /// engine compares with the write buffer size to switch memtables.
    pub fn approximate_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Returns true when nothing has been inserted.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty() && self.range_tombstones.is_empty()
    }

    /// Returns the number of entries, range tombstones included (exact when
    /// no insert is under way).
    pub fn len(&self) -> usize {
        self.points.len() + self.range_tombstones.len()
    }

    /// Returns the smallest seqno of any entry, `None` while empty.
    pub fn smallest_seqno(&self) -> Option<SeqNo> {
        let s = self.smallest_seqno.load(Ordering::Relaxed);
        (s != u64::MAX).then_some(s)
    }

    /// Records that the memtable stopped being the active one when `seqno`
    /// was the last seqno allocated (see `sealed`).
    pub fn seal(&self, seqno: SeqNo) {
        self.sealed.store(seqno, Ordering::Release);
    }

    /// The seqno below which every write to the memtable was allocated, once
    /// it stopped being active (0 before): a flush waits until it is visible.
    pub fn sealed(&self) -> SeqNo {
        self.sealed.load(Ordering::Acquire)
    }

    /// Returns the largest seqno of any entry, `None` while empty.
    pub fn largest_seqno(&self) -> Option<SeqNo> {
        let s = self.largest_seqno.load(Ordering::Relaxed);
        (s != 0).then_some(s)
    }
}

#[cfg(test)]
mod tests;
