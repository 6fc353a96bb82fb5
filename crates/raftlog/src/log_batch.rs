//! `LogBatch`: what a caller writes in one atomic step, and the codec of a
//! batch's payload.
//!
//! Payload grammar (see `docs/format/raftlog.md`):
//! ```text
//! payload = item*
//! item    = u8 tag | varint group | body
//! ENTRIES     (1): varint first_index | varint count | u32 len[count] | bytes[sum len]
//! PUT         (2): varint key_len | key | varint value_len | value
//! DELETE      (3): varint key_len | key
//! COMPACT_TO  (4): varint index
//! REMOVE_GROUP(5): (empty)
//! PURGED_BELOW(6): varint seq          (engine-wide: group is 0; purge writes it)
//! ```

use strata_codec::{put_varint, DecodeError, Reader};

use crate::format::{
    TAG_COMPACT_TO, TAG_DELETE, TAG_ENTRIES, TAG_PURGED_BELOW, TAG_PUT, TAG_REMOVE_GROUP,
};

/// One change to one group, in the order it was added to the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item<'a> {
    /// `count` entries with consecutive indexes from `first_index`. `body_offset`
    /// is the offset in the payload of this item's length table, which is what
    /// the index remembers to find the entries again.
    Entries {
        /// The group.
        group: u64,
        /// Index of the first entry.
        first_index: u64,
        /// Number of entries.
        count: u32,
        /// Offset of the `u32 len[count]` table in the payload.
        body_offset: u32,
    },
    /// Sets a key of the group.
    Put {
        /// The group.
        group: u64,
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// Deletes a key of the group.
    Delete {
        /// The group.
        group: u64,
        /// The key.
        key: &'a [u8],
    },
    /// Drops the group's entries with index below `index`.
    CompactTo {
        /// The group.
        group: u64,
        /// The new first index.
        index: u64,
    },
    /// Removes the group: its entries and keys.
    RemoveGroup {
        /// The group.
        group: u64,
    },
    /// Not a change to a group: every append file with a sequence number
    /// below `seq` was purged. Purge logs it, durably, before it removes
    /// them, so that recovery can tell the hole a lost removal leaves from
    /// lost data (`docs/format/raftlog.md`).
    PurgedBelow {
        /// The first append file that was kept.
        seq: u64,
    },
}

impl Item<'_> {
    /// Returns the group the item changes.
    pub fn group(&self) -> u64 {
        match *self {
            Item::Entries { group, .. }
            | Item::Put { group, .. }
            | Item::Delete { group, .. }
            | Item::CompactTo { group, .. }
            | Item::RemoveGroup { group } => group,
            Item::PurgedBelow { .. } => 0,
        }
    }

    /// Whether the item is about the engine's files rather than a group.
    pub fn is_engine_wide(&self) -> bool {
        matches!(self, Item::PurgedBelow { .. })
    }
}

/// Spare payload buffers of this thread: a new batch takes one and a dropped
/// batch gives its buffer back, and the engine compresses into one, so a caller
/// that builds a fresh batch per write does not regrow a buffer from empty (a
/// chain of reallocations and copies) on every write.
pub(crate) mod spare {
    use std::cell::RefCell;

    /// A batch's payload and a compressed copy of it.
    const KEEP: usize = 2;
    /// Larger buffers are rare; holding them per thread would cost memory.
    const MAX_CAPACITY: usize = 1 << 20;

    thread_local! {
        static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    }

    /// Returns an empty buffer, with capacity when this thread has one spare.
    pub(crate) fn take() -> Vec<u8> {
        // `try_with` fails only while the thread is being torn down.
        SPARE
            .try_with(|s| s.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// Keeps `buf` for a later [`take`] on this thread, if it is worth keeping.
    pub(crate) fn give(mut buf: Vec<u8>) {
        if buf.capacity() == 0 || buf.capacity() > MAX_CAPACITY {
            return;
        }
        buf.clear();
        let _ = SPARE.try_with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < KEEP {
                s.push(buf);
            }
        });
    }
}

/// A set of changes to any number of groups, written atomically by
/// [`crate::Engine::write`]: after any crash all of it or none of it is visible.
///
/// The batch encodes as it is filled, so writing it costs one copy.
#[derive(Debug, Clone, Default)]
pub struct LogBatch {
    pub(crate) payload: Vec<u8>,
    /// (group, first_index, count, body_offset) of each entries item, so the
    /// engine can check and index them without decoding the payload.
    pub(crate) entry_runs: Vec<(u64, u64, u32, u32)>,
    /// (entry runs before it, group, index) of each `compact_to`, and of each
    /// `remove_group` as a compaction to `u64::MAX`: the continuity check
    /// replays them between the runs, so a batch may reset a group to a
    /// snapshot and append the entries after it.
    pub(crate) resets: Vec<(usize, u64, u64)>,
    /// The first argument that cannot be written, found while filling:
    /// `Engine::write` refuses the batch with it before anything reaches disk.
    pub(crate) invalid: Option<String>,
    pub(crate) item_count: usize,
}

impl LogBatch {
    /// Returns an empty batch.
    pub fn new() -> Self {
        LogBatch {
            payload: spare::take(),
            entry_runs: Vec::new(),
            resets: Vec::new(),
            invalid: None,
            item_count: 0,
        }
    }

    /// Returns true when nothing has been added.
    pub fn is_empty(&self) -> bool {
        self.item_count == 0
    }

    /// Returns the encoded size of the batch's payload in bytes.
    pub fn approximate_size(&self) -> usize {
        self.payload.len()
    }

    /// Empties the batch, keeping its buffers.
    pub fn clear(&mut self) {
        self.payload.clear();
        self.entry_runs.clear();
        self.resets.clear();
        self.invalid = None;
        self.item_count = 0;
    }

    /// Adds entries `first_index, first_index + 1, ...` of `group`.
    ///
    /// Raft semantics apply at write time: an index at or below the group's
    /// last index replaces that entry and everything after it.
    ///
    /// Entries whose last index would pass `u64::MAX - 1`, or an entry of 4 GiB
    /// or more, make the batch invalid: `write` refuses it with
    /// [`crate::Error::InvalidArgument`] until it is cleared.
    pub fn add_entries<E: AsRef<[u8]>>(&mut self, group: u64, first_index: u64, entries: &[E]) {
        if entries.is_empty() {
            return;
        }
        if first_index.checked_add(entries.len() as u64).is_none() {
            self.refuse(format!(
                "group {group}: {} entries from index {first_index} overflow u64",
                entries.len()
            ));
            return;
        }
        if entries.len() > u32::MAX as usize
            || entries.iter().any(|e| e.as_ref().len() > u32::MAX as usize)
        {
            self.refuse(format!(
                "group {group}: an entry or the entry count exceeds u32"
            ));
            return;
        }
        self.payload.push(TAG_ENTRIES);
        put_varint(&mut self.payload, group);
        put_varint(&mut self.payload, first_index);
        put_varint(&mut self.payload, entries.len() as u64);
        let body_offset = self.payload.len() as u32;
        for e in entries {
            self.payload
                .extend_from_slice(&(e.as_ref().len() as u32).to_le_bytes());
        }
        for e in entries {
            self.payload.extend_from_slice(e.as_ref());
        }
        self.entry_runs
            .push((group, first_index, entries.len() as u32, body_offset));
        self.item_count += 1;
    }

    /// Adds entries `first_index, first_index + 1, ...` of `group`, given as
    /// their lengths and their bytes back to back: purge's copies of entries
    /// that were checked when first written. Returns the offset of the item's
    /// length table in the payload.
    pub(crate) fn add_packed_entries(
        &mut self,
        group: u64,
        first_index: u64,
        lens: &[u32],
        data: &[u8],
    ) -> u32 {
        debug_assert!(!lens.is_empty());
        debug_assert_eq!(lens.iter().map(|l| *l as usize).sum::<usize>(), data.len());
        self.payload.push(TAG_ENTRIES);
        put_varint(&mut self.payload, group);
        put_varint(&mut self.payload, first_index);
        put_varint(&mut self.payload, lens.len() as u64);
        let body_offset = self.payload.len() as u32;
        for len in lens {
            self.payload.extend_from_slice(&len.to_le_bytes());
        }
        self.payload.extend_from_slice(data);
        self.entry_runs
            .push((group, first_index, lens.len() as u32, body_offset));
        self.item_count += 1;
        body_offset
    }

    /// Sets `key` of `group` to `value`. An empty key makes the batch invalid.
    pub fn put(&mut self, group: u64, key: &[u8], value: &[u8]) {
        if key.is_empty() {
            self.refuse(format!("group {group}: empty key"));
            return;
        }
        self.payload.push(TAG_PUT);
        put_varint(&mut self.payload, group);
        put_varint(&mut self.payload, key.len() as u64);
        self.payload.extend_from_slice(key);
        put_varint(&mut self.payload, value.len() as u64);
        self.payload.extend_from_slice(value);
        self.item_count += 1;
    }

    /// Deletes `key` of `group`. An empty key makes the batch invalid.
    pub fn delete(&mut self, group: u64, key: &[u8]) {
        if key.is_empty() {
            self.refuse(format!("group {group}: empty key"));
            return;
        }
        self.payload.push(TAG_DELETE);
        put_varint(&mut self.payload, group);
        put_varint(&mut self.payload, key.len() as u64);
        self.payload.extend_from_slice(key);
        self.item_count += 1;
    }

    /// Drops the entries of `group` below `index`. Entries added after it in
    /// the same batch may start anywhere once it empties the group, so one
    /// batch can reset a group to a snapshot and append what follows it.
    pub fn compact_to(&mut self, group: u64, index: u64) {
        self.resets.push((self.entry_runs.len(), group, index));
        self.payload.push(TAG_COMPACT_TO);
        put_varint(&mut self.payload, group);
        put_varint(&mut self.payload, index);
        self.item_count += 1;
    }

    /// Removes `group`: all its entries and keys. Entries added after it in
    /// the same batch start the group anew.
    pub fn remove_group(&mut self, group: u64) {
        self.resets.push((self.entry_runs.len(), group, u64::MAX));
        self.payload.push(TAG_REMOVE_GROUP);
        put_varint(&mut self.payload, group);
        self.item_count += 1;
    }

    /// Records that every append file below `seq` was purged (purge only).
    pub(crate) fn purged_below(&mut self, seq: u64) {
        self.payload.push(TAG_PURGED_BELOW);
        put_varint(&mut self.payload, 0);
        put_varint(&mut self.payload, seq);
        self.item_count += 1;
    }
}

impl LogBatch {
    /// Keeps the first reason the batch cannot be written.
    fn refuse(&mut self, why: String) {
        self.invalid.get_or_insert(why);
    }
}

impl Drop for LogBatch {
    fn drop(&mut self) {
        spare::give(std::mem::take(&mut self.payload));
    }
}

/// Decodes every item of a batch payload. Fails on the first malformed item.
pub fn decode_items(payload: &[u8]) -> Result<Vec<Item<'_>>, DecodeError> {
    decode_items_with_capacity(payload, 0)
}

/// [`decode_items`] into a vector sized for `expected` items up front.
pub(crate) fn decode_items_with_capacity(
    payload: &[u8],
    expected: usize,
) -> Result<Vec<Item<'_>>, DecodeError> {
    // The hint comes from our own batch, but cap it all the same.
    let mut items = Vec::with_capacity(expected.min(payload.len()));
    let mut r = Reader::new(payload);
    while !r.is_empty() {
        let at = r.position();
        let tag = r.u8()?;
        let group = r.varint()?;
        let item = match tag {
            TAG_ENTRIES => {
                let first_index = r.varint()?;
                let count = r.varint()?;
                if count == 0 || count > u32::MAX as u64 {
                    return Err(DecodeError::invalid("entry count", at, format!("{count}")));
                }
                if first_index.checked_add(count).is_none() {
                    return Err(DecodeError::invalid("entry index", at, "overflows u64"));
                }
                let body_offset = r.position() as u32;
                let mut total: u64 = 0;
                for _ in 0..count {
                    total += r.u32()? as u64;
                }
                let total = usize::try_from(total)
                    .map_err(|_| DecodeError::invalid("entry lengths", at, "too large"))?;
                r.bytes(total)?;
                Item::Entries {
                    group,
                    first_index,
                    count: count as u32,
                    body_offset,
                }
            }
            TAG_PUT => {
                let key = r.length_prefixed()?;
                let value = r.length_prefixed()?;
                Item::Put { group, key, value }
            }
            TAG_DELETE => Item::Delete {
                group,
                key: r.length_prefixed()?,
            },
            TAG_COMPACT_TO => Item::CompactTo {
                group,
                index: r.varint()?,
            },
            TAG_REMOVE_GROUP => Item::RemoveGroup { group },
            TAG_PURGED_BELOW if group == 0 => Item::PurgedBelow { seq: r.varint()? },
            other => {
                return Err(DecodeError::invalid(
                    "item tag",
                    at,
                    format!("unknown tag {other}"),
                ))
            }
        };
        items.push(item);
    }
    Ok(items)
}

/// Returns entry `position` (0-based) of the entries item whose length table
/// starts at `body_offset`, with `count` entries.
pub fn entry_at(
    payload: &[u8],
    body_offset: u32,
    count: u32,
    position: u32,
) -> Result<&[u8], DecodeError> {
    if position >= count {
        return Err(DecodeError::invalid(
            "entry position",
            body_offset as usize,
            "past the item",
        ));
    }
    let table_len = count as usize * 4;
    let start = body_offset as usize;
    let table = payload
        .get(start..start + table_len)
        .ok_or(DecodeError::Truncated {
            offset: start,
            needed: table_len,
        })?;
    let len_at = |i: usize| {
        u32::from_le_bytes([
            table[i * 4],
            table[i * 4 + 1],
            table[i * 4 + 2],
            table[i * 4 + 3],
        ]) as usize
    };
    let mut off = start + table_len;
    for i in 0..position as usize {
        off += len_at(i);
    }
    let len = len_at(position as usize);
    payload.get(off..off + len).ok_or(DecodeError::Truncated {
        offset: off,
        needed: len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_every_item() {
        let mut b = LogBatch::new();
        b.add_entries(7, 10, &[b"a".as_slice(), b"bb", b""]);
        b.put(7, b"k", b"v");
        b.delete(8, b"gone");
        b.compact_to(7, 5);
        b.remove_group(9);
        let items = decode_items(&b.payload).unwrap();
        assert_eq!(items.len(), 5);
        let Item::Entries {
            group,
            first_index,
            count,
            body_offset,
        } = items[0]
        else {
            panic!("not entries: {:?}", items[0]);
        };
        assert_eq!((group, first_index, count), (7, 10, 3));
        assert_eq!(entry_at(&b.payload, body_offset, count, 0).unwrap(), b"a");
        assert_eq!(entry_at(&b.payload, body_offset, count, 1).unwrap(), b"bb");
        assert_eq!(entry_at(&b.payload, body_offset, count, 2).unwrap(), b"");
        assert!(entry_at(&b.payload, body_offset, count, 3).is_err());
        assert_eq!(
            items[1],
            Item::Put {
                group: 7,
                key: b"k",
                value: b"v"
            }
        );
        assert_eq!(
            items[2],
            Item::Delete {
                group: 8,
                key: b"gone"
            }
        );
        assert_eq!(items[3], Item::CompactTo { group: 7, index: 5 });
        assert_eq!(items[4], Item::RemoveGroup { group: 9 });
        assert_eq!(b.entry_runs, vec![(7, 10, 3, body_offset)]);
    }

    #[test]
    fn truncations_are_errors() {
        let mut b = LogBatch::new();
        b.add_entries(1, 1, &[vec![3u8; 100]]);
        b.put(1, b"key", b"value");
        for cut in 0..b.payload.len() {
            // Every strict prefix either decodes fewer items or fails; never panics.
            if let Ok(items) = decode_items(&b.payload[..cut]) {
                assert!(items.len() < 2);
            }
        }
    }

    #[test]
    fn a_dropped_batch_lends_its_buffer_to_the_next_one_on_the_thread() {
        while spare::take().capacity() > 0 {}
        let mut b = LogBatch::new();
        b.add_entries(1, 1, &[vec![0u8; 5000]]);
        let cap = b.payload.capacity();
        drop(b);
        let b = LogBatch::new();
        assert!(b.is_empty());
        assert_eq!((b.payload.len(), b.payload.capacity()), (0, cap));
        drop(b);

        // Only a few buffers are kept, and never huge ones.
        for _ in 0..10 {
            spare::give(Vec::with_capacity(100));
        }
        spare::give(Vec::with_capacity(64 << 20));
        let taken: Vec<Vec<u8>> = (0..10).map(|_| spare::take()).collect();
        assert!(taken.iter().filter(|v| v.capacity() > 0).count() <= 2);
        assert!(taken
            .iter()
            .all(|v| v.is_empty() && v.capacity() < 64 << 20));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_payloads_never_panic(bytes: Vec<u8>) {
            if let Ok(items) = decode_items(&bytes) {
                for item in items {
                    if let Item::Entries { body_offset, count, .. } = item {
                        for p in 0..count.min(8) {
                            entry_at(&bytes, body_offset, count, p).unwrap();
                        }
                    }
                }
            }
        }
    }
}
