//! The index: for each data block, a separator key `s` with
//! `last key of the block <= s < first key of the next block` (internal-key
//! order), mapped to the block's handle. A seek for `t` takes the first
//! entry with `s >= t`: the only block that can hold the first key `>= t`,
//! or the block before the one that does.
//!
//! Once the entries outgrow one partition (`index_partition_bytes`), the index
//! is split into partitions of about that size and a top-level index maps
//! each partition's last separator to the partition's handle. A reader then
//! keeps only the top level in memory and reads partitions through the block
//! cache, so a large file costs a few KiB of pinned memory, not its whole
//! index.
//!
//! Index blocks use a restart interval of 1: every key is whole, so a seek is
//! a pure binary search (index blocks are small and read often).

use super::block_builder::BlockBuilder;
use super::format::BlockHandle;
use crate::key::{self, InternalKey, ValueKind, MAX_SEQNO};

/// Restart interval of index blocks.
pub const INDEX_RESTART_INTERVAL: usize = 1;

/// Collects index entries while data blocks are written.
#[derive(Debug)]
pub struct IndexBuilder {
    entries: Vec<(Vec<u8>, BlockHandle)>,
    partition_bytes: usize,
}

impl IndexBuilder {
    /// A builder cutting partitions at `partition_bytes`.
    pub fn new(partition_bytes: usize) -> IndexBuilder {
        IndexBuilder {
            entries: Vec::new(),
            partition_bytes: partition_bytes.max(1),
        }
    }

    /// Adds the entry of the next data block.
    pub fn add(&mut self, separator: Vec<u8>, handle: BlockHandle) {
        self.entries.push((separator, handle));
    }

    /// Splits the entries into partitions: each is `(its last separator, its
    /// raw block)`. One partition means the index fits in a single block.
    pub fn partitions(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        let mut b = BlockBuilder::new(INDEX_RESTART_INTERVAL);
        for (i, (sep, handle)) in self.entries.iter().enumerate() {
            b.add(sep, &handle.encode());
            let last = i + 1 == self.entries.len();
            if b.estimated_len() >= self.partition_bytes || last {
                out.push((sep.clone(), b.finish()));
            }
        }
        if out.is_empty() {
            out.push((Vec::new(), b.finish()));
        }
        out
    }
}

/// The raw bytes of a top-level index over partitions at `handles`.
pub fn top_level(entries: &[(Vec<u8>, BlockHandle)]) -> Vec<u8> {
    let mut b = BlockBuilder::new(INDEX_RESTART_INTERVAL);
    for (sep, handle) in entries {
        b.add(sep, &handle.encode());
    }
    b.finish()
}

/// A short key `s` with `last <= s < next` in internal-key order, where
/// `last` and `next` are encoded internal keys and `last < next`. When the
/// user keys differ at a byte that can be raised without reaching `next`'s,
/// `s` is the shared prefix plus that byte raised by one, with the largest
/// trailer; otherwise `s` is `last` itself.
pub fn separator(last: &[u8], next: &[u8]) -> Vec<u8> {
    let (Ok((lu, _, _)), Ok((nu, _, _))) = (key::parse(last), key::parse(next)) else {
        return last.to_vec();
    };
    let common = lu.iter().zip(nu).take_while(|(a, b)| a == b).count();
    if common < lu.len() && common < nu.len() {
        let byte = lu[common];
        if byte < 0xff && byte + 1 < nu[common] {
            let mut user = Vec::with_capacity(common + 1);
            user.extend_from_slice(&lu[..common]);
            user.push(byte + 1);
            // Any trailer works since lu < user < nu; the largest valid one
            // keeps index keys well-formed internal keys.
            let s = InternalKey::new(&user, MAX_SEQNO, ValueKind::BlobIndex)
                .encoded()
                .to_vec();
            debug_assert!(key::compare(last, &s).is_lt() && key::compare(&s, next).is_lt());
            return s;
        }
    }
    last.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::TRAILER_LEN;

    #[test]
    fn separators_are_short_and_between() {
        let k = |u: &[u8], s| InternalKey::new(u, s, ValueKind::Put).encoded().to_vec();
        let s = separator(&k(b"apple-pie", 5), &k(b"cherry", 9));
        assert_eq!(&s[..1], b"b");
        assert_eq!(s.len(), 1 + TRAILER_LEN);
        // Adjacent bytes: no shorter key fits.
        assert_eq!(separator(&k(b"ab", 5), &k(b"ac", 1)), k(b"ab", 5));
        // Same user key, different versions.
        assert_eq!(separator(&k(b"ab", 5), &k(b"ab", 4)), k(b"ab", 5));
        // A prefix of the next key.
        assert_eq!(separator(&k(b"ab", 5), &k(b"abc", 4)), k(b"ab", 5));
    }
}
