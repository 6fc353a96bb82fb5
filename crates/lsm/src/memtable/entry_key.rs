//! The memtable's key type: an encoded internal key ordered by
//! [`key::compare`], and its borrowed form, so that a lookup compares the
//! caller's bytes in place instead of allocating an owned key per seek.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::cmp::Ordering;

use bytes::{Bytes, BytesMut};

use crate::key::{self, SeqNo, TRAILER_LEN};

/// An owned encoded internal key (`user_key | u64 trailer`) as stored in the
/// skiplist, with the entry's value after it, carved from a block shared
/// with other entries ([`carve`]). Equality and order are the key's alone.
#[derive(Debug, Clone)]
pub(crate) struct EntryKey {
    /// `user_key | trailer | value`.
    bytes: Bytes,
    /// Where the value starts: the encoded key's length.
    key_len: usize,
}

/// Entries are carved from blocks of this size, one block per inserting
/// thread, so that an insert allocates nothing but the skiplist node. With
/// an allocation per entry, the insert was the slowest step of most of the
/// slowest unsynced 1 KiB puts, and the time was glibc's `malloc` (over its
/// per-thread cache's limit: its arena lock, which the flush thread's frees
/// of whole memtables take too, and its consolidation of free chunks).
/// RocksDB's memtable arena exists for the same reason.
const BLOCK_BYTES: usize = 256 << 10;

/// Entries at least this large get an allocation of their own: carving
/// them would leave much of a block's tail unused.
const OWN_ALLOCATION_BYTES: usize = BLOCK_BYTES / 8;

thread_local! {
    /// The block this thread carves entries from. A block is freed when
    /// its last entry (of any memtable) and the thread have let go of it,
    /// so a thread holds at most one block beyond its memtables' entries.
    static BLOCK: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// The concatenation of `parts`, carved from this thread's block.
fn carve(parts: [&[u8]; 3]) -> Bytes {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len >= OWN_ALLOCATION_BYTES {
        return Bytes::from(parts.concat());
    }
    BLOCK.with(|block| {
        let mut block = block.borrow_mut();
        // `capacity` is what is left past the carved entries; a fresh
        // block rather than `reserve`, which would copy the live ones.
        if block.capacity() < len {
            *block = BytesMut::with_capacity(BLOCK_BYTES);
        }
        for part in parts {
            block.extend_from_slice(part);
        }
        block.split().freeze()
    })
}

impl EntryKey {
    /// The key of `user_key` with `trailer`, and no value.
    #[cfg(test)]
    pub(crate) fn new(user_key: &[u8], trailer: u64) -> EntryKey {
        EntryKey::with_value(user_key, trailer, &[])
    }

    /// The key of `user_key` with `trailer`, holding `value`.
    pub(crate) fn with_value(user_key: &[u8], trailer: u64, value: &[u8]) -> EntryKey {
        EntryKey {
            bytes: carve([user_key, &trailer.to_le_bytes(), value]),
            key_len: user_key.len() + TRAILER_LEN,
        }
    }

    /// The encoded bytes.
    pub(crate) fn encoded(&self) -> &[u8] {
        &self.bytes[..self.key_len]
    }

    /// The value stored with the key.
    pub(crate) fn value(&self) -> &[u8] {
        &self.bytes[self.key_len..]
    }

    /// The user key.
    pub(crate) fn user_key(&self) -> &[u8] {
        &self.bytes[..self.key_len - TRAILER_LEN]
    }

    /// The sequence number.
    pub(crate) fn seqno(&self) -> SeqNo {
        let t: [u8; 8] = self.bytes[self.key_len - TRAILER_LEN..self.key_len]
            .try_into()
            .expect("built with a trailer");
        u64::from_le_bytes(t) >> 8
    }
}

impl PartialEq for EntryKey {
    fn eq(&self, other: &Self) -> bool {
        self.encoded() == other.encoded()
    }
}

impl Eq for EntryKey {}

impl Ord for EntryKey {
    fn cmp(&self, other: &Self) -> Ordering {
        key::compare(self.encoded(), other.encoded())
    }
}

impl PartialOrd for EntryKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Borrowed encoded internal key bytes, ordered as [`EntryKey`] is. The
/// skiplist's lookups take `&Q` where the key type borrows as `Q`, so this is
/// an unsized view over `[u8]`, as `std::path::Path` is over `OsStr`.
#[derive(Debug, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct KeyRef([u8]);

impl KeyRef {
    /// Views `encoded` as an internal key.
    pub(crate) fn new(encoded: &[u8]) -> &KeyRef {
        // SAFETY: `KeyRef` is `repr(transparent)` over `[u8]`, so the two
        // references have the same layout and metadata (the length), and the
        // lifetime is carried over unchanged.
        unsafe { &*(encoded as *const [u8] as *const KeyRef) }
    }
}

impl Ord for KeyRef {
    fn cmp(&self, other: &Self) -> Ordering {
        key::compare(&self.0, &other.0)
    }
}

impl PartialOrd for KeyRef {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Borrow<KeyRef> for EntryKey {
    fn borrow(&self) -> &KeyRef {
        KeyRef::new(self.encoded())
    }
}

/// Builds into `buf` the encoded key `user_key | trailer`, for seeks.
pub(crate) fn encode_into(buf: &mut Vec<u8>, user_key: &[u8], trailer: u64) {
    buf.clear();
    // One allocation for a fresh buffer, not a grow per part: each call
    // into glibc's allocator may wait for its arena lock (see `docs/lsm.md`,
    // "Allocations on the read path").
    buf.reserve(user_key.len() + 8);
    buf.extend_from_slice(user_key);
    buf.extend_from_slice(&trailer.to_le_bytes());
}

/// The trailer that sorts before every version of a user key.
pub(crate) const TRAILER_FIRST: u64 = u64::MAX;
/// The trailer that sorts after every version of a user key.
pub(crate) const TRAILER_LAST: u64 = 0;

/// The trailer of a seek to the newest version at or below `snapshot`: the
/// largest trailer with that seqno (kind byte 0xff sorts before every kind).
pub(crate) fn seek_trailer(snapshot: SeqNo) -> u64 {
    (snapshot.min(key::MAX_SEQNO) << 8) | 0xff
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{trailer, ValueKind};

    #[test]
    fn owned_and_borrowed_keys_order_alike() {
        let a = EntryKey::new(b"a", trailer(5, ValueKind::Put));
        let b = EntryKey::new(b"a", trailer(3, ValueKind::Put));
        assert!(a < b);
        let (ra, rb): (&KeyRef, &KeyRef) = (a.borrow(), b.borrow());
        assert!(ra < rb);
        let mut seek = Vec::new();
        encode_into(&mut seek, b"a", seek_trailer(4));
        assert!(KeyRef::new(&seek) > ra && KeyRef::new(&seek) < rb);
        encode_into(&mut seek, b"a", TRAILER_FIRST);
        assert!(KeyRef::new(&seek) < ra);
        encode_into(&mut seek, b"a", TRAILER_LAST);
        assert!(KeyRef::new(&seek) > rb);
        assert_eq!(a.seqno(), 5);
        assert_eq!(a.user_key(), b"a");
        // The value rides along but takes no part in equality or order.
        let v = EntryKey::with_value(b"a", trailer(5, ValueKind::Put), b"value");
        assert_eq!(v, a);
        assert_eq!((v.encoded(), v.value()), (a.encoded(), &b"value"[..]));
        assert_eq!(v.user_key(), b"a");
        assert_eq!(v.seqno(), 5);
    }

    fn value_of(i: usize, len: usize) -> Vec<u8> {
        (0..len).map(|j| (i * 31 + j) as u8).collect()
    }

    /// Entries carved from shared blocks keep their bytes while the blocks
    /// fill up and are replaced, whichever entries are dropped first, on
    /// every thread; entries too large for a block get their own.
    #[test]
    fn carved_entries_keep_their_bytes_across_blocks_and_threads() {
        const SIZES: [usize; 8] = [
            0,
            1,
            100,
            1024,
            16 << 10,
            OWN_ALLOCATION_BYTES - 30,
            OWN_ALLOCATION_BYTES,
            100 << 10,
        ];
        let make = |t: usize| -> Vec<(usize, EntryKey)> {
            // Enough to fill several blocks.
            (0..600)
                .map(|i| {
                    let len = SIZES[(i + t) % SIZES.len()];
                    let key = format!("t{t}-key{i:05}");
                    let e = EntryKey::with_value(
                        key.as_bytes(),
                        trailer(i as u64 + 1, ValueKind::Put),
                        &value_of(i, len),
                    );
                    (len, e)
                })
                .collect()
        };
        let check = |t: usize, entries: &[(usize, EntryKey)]| {
            for (i, (len, e)) in entries.iter().enumerate() {
                if e.seqno() == 0 {
                    continue; // dropped below
                }
                assert_eq!(e.user_key(), format!("t{t}-key{i:05}").as_bytes());
                assert_eq!(e.seqno(), i as u64 + 1);
                assert_eq!(e.value(), &value_of(i, *len)[..]);
            }
        };
        let threads: Vec<_> = (0..3)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut entries = make(t);
                    // Drop every other entry: the blocks they share stay.
                    for (i, slot) in entries.iter_mut().enumerate() {
                        if i % 2 == 0 {
                            slot.1 = EntryKey::new(b"x", 0);
                        }
                    }
                    entries
                })
            })
            .collect();
        for (t, handle) in threads.into_iter().enumerate() {
            // The thread that carved them has exited.
            let entries = handle.join().expect("carving thread");
            check(t, &entries);
        }
        let local = make(7);
        check(7, &local);
    }
}
