//! A parsed keyed block and its iterator. The layout is in `block_builder.rs`
//! and `docs/format/sst.md`.
//!
//! Invariants:
//! - A [`Block`] exists only after [`Block::decode`] has walked every entry:
//!   every length lies inside the entry region, every `shared` fits the
//!   previous key, the restart array names exactly the entries with
//!   `shared == 0` at run starts (the first at offset 0), and keys never
//!   descend in the block's [`KeyOrder`]. So the iterator cannot meet a bad
//!   byte, and a seek's binary search over restarts is sound.
//! - Decoding costs one pass and one key comparison per entry; a block is
//!   decoded once when it is read from the file, then shared through the cache.
//!
//! Concurrency: a `Block` is immutable and shared as `Arc<Block>`; each
//! [`BlockIter`] is owned by one thread.

use std::cmp::Ordering;
use std::sync::Arc;

use smallvec::SmallVec;
use strata_codec::{DecodeError, Reader};

use crate::key;

/// How a block's keys are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyOrder {
    /// Internal keys ([`crate::key::compare`]): data, index and range-deletion blocks.
    Internal,
    /// Plain bytes: meta-index and properties blocks.
    Bytewise,
}

impl KeyOrder {
    /// Compares two keys in this order.
    pub fn compare(self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            KeyOrder::Internal => key::compare(a, b),
            KeyOrder::Bytewise => a.cmp(b),
        }
    }
}

/// A decoded, validated block.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    /// Offset of the restart array; entries fill `data[..restarts_at]`.
    restarts_at: usize,
    num_restarts: usize,
    entries: usize,
    order: KeyOrder,
}

/// A key being rebuilt from its shared prefix: inline up to the size of
/// most internal keys, so positioning an iterator or decoding a block does
/// not allocate (a point read makes two iterators).
type KeyBuf = SmallVec<[u8; 64]>;

/// One decoded entry header: `(shared, unshared, value_len, header_len)`.
type EntryHeader = (usize, usize, usize, usize);

fn entry_header(entries: &[u8], at: usize) -> Result<EntryHeader, DecodeError> {
    let mut r = Reader::new(entries.get(at..).unwrap_or(&[]));
    let shared = r.varint()?;
    let unshared = r.varint()?;
    let value_len = r.varint()?;
    let rest = r.remaining() as u64;
    if unshared > rest || value_len > rest - unshared {
        return Err(DecodeError::Truncated {
            offset: at + r.position(),
            needed: (unshared.saturating_add(value_len) - rest) as usize,
        });
    }
    let shared = usize::try_from(shared)
        .map_err(|_| DecodeError::invalid("shared length", at, "too large"))?;
    Ok((shared, unshared as usize, value_len as usize, r.position()))
}

impl Block {
    /// Validates `data` as a block of keys in `order` (see the module's
    /// invariants). Never panics, whatever the bytes.
    pub fn decode(data: Vec<u8>, order: KeyOrder) -> Result<Block, DecodeError> {
        let len = data.len();
        if len < 4 {
            return Err(DecodeError::Truncated {
                offset: 0,
                needed: 4 - len,
            });
        }
        let num_restarts = u32::from_le_bytes(data[len - 4..].try_into().expect("4 bytes")) as u64;
        let restarts_len = num_restarts
            .checked_mul(4)
            .filter(|n| *n <= (len - 4) as u64)
            .ok_or_else(|| {
                DecodeError::invalid("restart count", len - 4, format!("{num_restarts}"))
            })? as usize;
        let restarts_at = len - 4 - restarts_len;
        let num_restarts = num_restarts as usize;
        let restart = |i: usize| {
            let at = restarts_at + 4 * i;
            u32::from_le_bytes(data[at..at + 4].try_into().expect("4 bytes")) as usize
        };
        let entries_region = &data[..restarts_at];
        if entries_region.is_empty() {
            if num_restarts == 1 && restart(0) == 0 {
                return Ok(Block {
                    data,
                    restarts_at,
                    num_restarts,
                    entries: 0,
                    order,
                });
            }
            return Err(DecodeError::invalid(
                "empty block",
                0,
                "restart array must be [0]",
            ));
        }
        if num_restarts == 0 || restart(0) != 0 {
            return Err(DecodeError::invalid(
                "restart array",
                restarts_at,
                "must start at 0",
            ));
        }
        let mut pos = 0;
        let mut next_restart = 0;
        let mut key = KeyBuf::new();
        let mut prev = KeyBuf::new();
        let mut entries = 0;
        while pos < restarts_at {
            let (shared, unshared, value_len, header) = entry_header(entries_region, pos)?;
            let at_restart = next_restart < num_restarts && restart(next_restart) == pos;
            if next_restart < num_restarts && restart(next_restart) < pos {
                return Err(DecodeError::invalid(
                    "restart point",
                    restarts_at + 4 * next_restart,
                    "not at an entry",
                ));
            }
            if at_restart {
                next_restart += 1;
                if shared != 0 {
                    return Err(DecodeError::invalid(
                        "entry",
                        pos,
                        "shared bytes at a restart",
                    ));
                }
            }
            if shared > key.len() {
                return Err(DecodeError::invalid(
                    "entry",
                    pos,
                    format!("shares {shared} bytes of a {}-byte key", key.len()),
                ));
            }
            std::mem::swap(&mut key, &mut prev);
            key.clear();
            key.extend_from_slice(&prev[..shared]);
            let body = pos + header;
            key.extend_from_slice(&entries_region[body..body + unshared]);
            if entries > 0 && order.compare(&prev, &key) == Ordering::Greater {
                return Err(DecodeError::invalid("entry", pos, "keys out of order"));
            }
            entries += 1;
            pos = body + unshared + value_len;
        }
        if next_restart != num_restarts {
            return Err(DecodeError::invalid(
                "restart point",
                restarts_at + 4 * next_restart,
                "not at an entry",
            ));
        }
        Ok(Block {
            data,
            restarts_at,
            num_restarts,
            entries,
            order,
        })
    }

    /// The block's decoded bytes (what the cache weighs).
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when the block holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Entries in the block.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// The order of the block's keys.
    pub fn order(&self) -> KeyOrder {
        self.order
    }

    fn restart(&self, i: usize) -> usize {
        let at = self.restarts_at + 4 * i;
        u32::from_le_bytes(self.data[at..at + 4].try_into().expect("4 bytes")) as usize
    }

    /// An iterator over the block, positioned nowhere.
    pub fn iter(self: &Arc<Self>) -> BlockIter {
        self.iter_over(Arc::clone(self))
    }

    /// A cursor over this block for as long as it is borrowed: no
    /// reference count taken (the count is shared by every reader of a
    /// cached block).
    pub fn iter_ref(&self) -> BlockIter<&Block> {
        self.iter_over(self)
    }

    /// A cursor over this block that takes no reference count and no
    /// borrow, for a cursor stored beside the block's owner.
    ///
    /// # Safety
    /// The block must outlive the cursor (and every copy of its
    /// `BorrowedBlock`): the caller keeps an owner of the block beside it.
    pub(crate) unsafe fn iter_borrowed(&self) -> BlockIter<BorrowedBlock> {
        self.iter_over(BorrowedBlock(std::ptr::NonNull::from(self)))
    }

    fn iter_over<B: std::ops::Deref<Target = Block>>(&self, block: B) -> BlockIter<B> {
        BlockIter {
            block,
            current: self.restarts_at,
            next: self.restarts_at,
            restart_index: self.num_restarts,
            key: KeyBuf::new(),
            value: (0, 0),
        }
    }
}

/// A block that a cursor reads without a reference count of its own,
/// because an owner it travels with keeps the block alive: an SST
/// iterator's index block, which the reader the iterator holds owns. The
/// count it spares is shared by every iterator over the file, so each
/// creation took its cache line from the other cores.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BorrowedBlock(std::ptr::NonNull<Block>);

// SAFETY: a `Block` is immutable and `Sync`; the pointer is only read.
unsafe impl Send for BorrowedBlock {}
// SAFETY: as above.
unsafe impl Sync for BorrowedBlock {}

impl std::ops::Deref for BorrowedBlock {
    type Target = Block;
    fn deref(&self) -> &Block {
        // SAFETY: `Block::iter_borrowed`'s contract: the block outlives
        // every cursor made over it.
        unsafe { self.0.as_ref() }
    }
}

/// A cursor over one block's entries, both ways, holding the block by `B`:
/// an `Arc`, a borrow (`Block::iter_ref`) or a [`BorrowedBlock`].
#[derive(Debug)]
pub struct BlockIter<B: std::ops::Deref<Target = Block> = Arc<Block>> {
    block: B,
    /// Offset of the current entry; `restarts_at` when not valid.
    current: usize,
    /// Offset of the entry after the current one.
    next: usize,
    /// The restart run holding `current`.
    restart_index: usize,
    key: KeyBuf,
    value: (usize, usize),
}

impl<B: std::ops::Deref<Target = Block>> BlockIter<B> {
    /// True when positioned at an entry.
    pub fn valid(&self) -> bool {
        self.current < self.block.restarts_at
    }

    /// The current key. Only meaningful when `valid()`.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current value. Only meaningful when `valid()`.
    pub fn value(&self) -> &[u8] {
        &self.block.data[self.value.0..self.value.1]
    }

    fn invalidate(&mut self) {
        self.current = self.block.restarts_at;
        self.next = self.block.restarts_at;
        self.restart_index = self.block.num_restarts;
        self.key.clear();
    }

    fn seek_to_restart(&mut self, i: usize) {
        self.key.clear();
        self.restart_index = i;
        self.next = self.block.restart(i);
    }

    /// Moves to the entry at `self.next`; false at the end.
    fn parse_next(&mut self) -> bool {
        if self.step() {
            true
        } else {
            self.invalidate();
            false
        }
    }

    /// `parse_next` without the invalidation: false at the end or on an
    /// entry that does not decode. Borrows the block through its field (no
    /// `Arc` clone per entry: a seek parses up to a restart run of them).
    fn step(&mut self) -> bool {
        let BlockIter {
            block,
            current,
            next,
            restart_index,
            key,
            value,
        } = self;
        *current = *next;
        if *current >= block.restarts_at {
            return false;
        }
        let region = &block.data[..block.restarts_at];
        // Decode validated every entry, so this cannot fail; stay panic-free
        // regardless.
        let Ok((shared, unshared, value_len, header)) = entry_header(region, *current) else {
            return false;
        };
        if shared > key.len() {
            return false;
        }
        let body = *current + header;
        key.truncate(shared);
        key.extend_from_slice(&region[body..body + unshared]);
        *value = (body + unshared, body + unshared + value_len);
        *next = value.1;
        while *restart_index + 1 < block.num_restarts
            && block.restart(*restart_index + 1) <= *current
        {
            *restart_index += 1;
        }
        true
    }

    /// The key of the entry at restart `i`, read in place (a restart entry
    /// shares nothing with the one before); `None` if it does not decode.
    fn restart_key(&self, i: usize) -> Option<&[u8]> {
        let region = &self.block.data[..self.block.restarts_at];
        let at = self.block.restart(i);
        let (shared, unshared, _, header) = entry_header(region, at).ok()?;
        if shared != 0 {
            return None;
        }
        region.get(at + header..at + header + unshared)
    }

    /// Moves to the first entry.
    pub fn first(&mut self) {
        if self.block.entries == 0 {
            return self.invalidate();
        }
        self.seek_to_restart(0);
        self.parse_next();
    }

    /// Moves to the last entry.
    pub fn last(&mut self) {
        if self.block.entries == 0 {
            return self.invalidate();
        }
        self.seek_to_restart(self.block.num_restarts - 1);
        while self.parse_next() && self.next < self.block.restarts_at {}
    }

    /// Moves to the next entry (invalid past the last).
    pub fn next(&mut self) {
        if self.valid() {
            self.parse_next();
        }
    }

    /// Moves to the previous entry (invalid before the first).
    pub fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        let original = self.current;
        let mut ri = self.restart_index.min(self.block.num_restarts - 1);
        while self.block.restart(ri) >= original {
            if ri == 0 {
                return self.invalidate();
            }
            ri -= 1;
        }
        self.seek_to_restart(ri);
        while self.parse_next() && self.next < original {}
    }

    /// Moves to the first entry whose key is at or after `target`.
    pub fn seek(&mut self, target: &[u8]) {
        if self.block.entries == 0 {
            return self.invalidate();
        }
        let order = self.block.order;
        // The last restart whose key is before the target: the target, if
        // present, is in its run or at the start of the next.
        // The probes compare restart keys in place; only the final run is
        // parsed into `key`.
        let (mut left, mut right) = (0, self.block.num_restarts - 1);
        while left < right {
            let mid = (left + right).div_ceil(2);
            let Some(restart_key) = self.restart_key(mid) else {
                return self.invalidate();
            };
            if order.compare(restart_key, target) == Ordering::Less {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        self.seek_to_restart(left);
        while self.parse_next() {
            if order.compare(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    /// Moves to the last entry whose key is at or before `target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if !self.valid() {
            self.last();
        } else if self.block.order.compare(&self.key, target) == Ordering::Greater {
            self.prev();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::block_builder::BlockBuilder;

    fn build(keys: &[&[u8]], interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for k in keys {
            b.add(k, &[k.len() as u8]);
        }
        Arc::new(Block::decode(b.finish(), KeyOrder::Bytewise).unwrap())
    }

    #[test]
    fn seeks_and_both_directions() {
        let keys: Vec<Vec<u8>> = (0..50u32)
            .map(|i| format!("k{:03}", i * 2).into_bytes())
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        for interval in [1, 3, 16] {
            let block = build(&refs, interval);
            let mut it = block.iter();
            it.first();
            let mut seen = Vec::new();
            while it.valid() {
                seen.push(it.key().to_vec());
                it.next();
            }
            assert_eq!(seen, keys);
            it.last();
            let mut back = Vec::new();
            while it.valid() {
                back.push(it.key().to_vec());
                it.prev();
            }
            back.reverse();
            assert_eq!(back, keys);
            it.seek(b"k011");
            assert_eq!(it.key(), b"k012");
            it.seek_for_prev(b"k011");
            assert_eq!(it.key(), b"k010");
            it.seek_for_prev(b"k010");
            assert_eq!(it.key(), b"k010");
            it.seek(b"z");
            assert!(!it.valid());
            it.seek_for_prev(b"a");
            assert!(!it.valid());
            it.seek_for_prev(b"z");
            assert_eq!(it.key(), b"k098");
        }
    }

    /// Found by the `block` fuzz target: an empty key and eight 0xff bytes
    /// (an empty user key with the all-ones trailer) compared equal, so a
    /// seek to the second landed on the first.
    #[test]
    fn a_short_key_and_its_all_ones_twin_are_distinct_seek_targets() {
        let twin = [0xffu8; 8];
        let mut b = BlockBuilder::new(16);
        b.add(b"", b"short");
        b.add(&twin, b"twin");
        let block = Arc::new(Block::decode(b.finish(), KeyOrder::Internal).unwrap());
        let mut it = block.iter();
        it.seek(&twin);
        assert!(it.valid());
        assert_eq!((it.key(), it.value()), (&twin[..], &b"twin"[..]));
        it.seek_for_prev(b"");
        assert_eq!((it.key(), it.value()), (&b""[..], &b"short"[..]));
    }

    #[test]
    fn empty_block_and_bad_bytes() {
        let block = build(&[], 16);
        let mut it = block.iter();
        it.first();
        assert!(!it.valid());
        it.seek(b"x");
        assert!(!it.valid());
        assert!(Block::decode(vec![], KeyOrder::Bytewise).is_err());
        assert!(Block::decode(vec![0xff; 8], KeyOrder::Bytewise).is_err());
        // Keys out of order are refused.
        let mut b = BlockBuilder::new(1);
        b.add(b"b", b"");
        b.add(b"a", b"");
        assert!(Block::decode(b.finish(), KeyOrder::Bytewise).is_err());
    }
}
