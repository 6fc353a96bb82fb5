//! Internal keys: a user key with the sequence number and kind of the change
//! that wrote it. Every layer (memtable, SST, WAL replay, compaction) orders
//! and encodes keys this way; the spec is `docs/format/sst.md`.
//!
//! Encoding: `user_key | u64 trailer` with `trailer = seqno << 8 | kind`,
//! little-endian, as LevelDB does. Order: user keys ascending (bytewise),
//! then trailers descending, so the newest version of a key comes first and a
//! seek to `(key, snapshot_seqno)` lands on the newest version visible at
//! that snapshot.
//!
//! Invariants:
//! - A sequence number fits in 56 bits ([`MAX_SEQNO`]); seqno 0 is never
//!   allocated to a write, so `(key, 0)` sorts after every version of `key`.
//! - Kind bytes are frozen: a retired kind stays listed as a tombstone.

use std::cmp::Ordering;

use strata_codec::DecodeError;

/// A sequence number: the order of writes, and what a snapshot sees.
pub type SeqNo = u64;

/// The largest sequence number (56 bits).
pub const MAX_SEQNO: SeqNo = (1 << 56) - 1;

/// Bytes after the user key.
pub const TRAILER_LEN: usize = 8;

/// What a version of a key is. Discriminants are on disk: never reuse one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ValueKind {
    /// The key was deleted (a point tombstone).
    Delete = 0,
    /// The key was set; the value is inline.
    Put = 1,
    /// A range tombstone: the user key is the range's start, the value its
    /// exclusive end; it deletes every older version in the range.
    RangeDelete = 2,
    /// The key was set and the value lives in a blob file; the value is a
    /// blob reference (key-value separation).
    BlobIndex = 3,
}

impl ValueKind {
    /// The kind of a trailer's low byte, if it is one.
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            2 => Some(ValueKind::RangeDelete),
            3 => Some(ValueKind::BlobIndex),
            _ => None,
        }
    }
}

/// Packs a sequence number and a kind into a trailer.
pub fn trailer(seqno: SeqNo, kind: ValueKind) -> u64 {
    debug_assert!(seqno <= MAX_SEQNO);
    (seqno << 8) | kind as u64
}

/// An owned internal key.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct InternalKey {
    /// `user_key | trailer`.
    encoded: Vec<u8>,
}

impl std::fmt::Debug for InternalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?}@{}:{:?}",
            String::from_utf8_lossy(self.user_key()),
            self.seqno(),
            self.kind()
        )
    }
}

impl InternalKey {
    /// The internal key of `user_key` written at `seqno` as `kind`.
    pub fn new(user_key: &[u8], seqno: SeqNo, kind: ValueKind) -> InternalKey {
        let mut encoded = Vec::with_capacity(user_key.len() + TRAILER_LEN);
        encoded.extend_from_slice(user_key);
        encoded.extend_from_slice(&trailer(seqno, kind).to_le_bytes());
        InternalKey { encoded }
    }

    /// Takes encoded bytes, checking the trailer.
    pub fn decode(encoded: &[u8]) -> Result<InternalKey, DecodeError> {
        parse(encoded)?;
        Ok(InternalKey {
            encoded: encoded.to_vec(),
        })
    }

    /// The encoded bytes.
    pub fn encoded(&self) -> &[u8] {
        &self.encoded
    }

    /// The user key.
    pub fn user_key(&self) -> &[u8] {
        &self.encoded[..self.encoded.len() - TRAILER_LEN]
    }

    /// The sequence number.
    pub fn seqno(&self) -> SeqNo {
        self.trailer() >> 8
    }

    /// The kind.
    pub fn kind(&self) -> ValueKind {
        ValueKind::from_u8(self.trailer() as u8).expect("checked when built")
    }

    fn trailer(&self) -> u64 {
        let t: [u8; 8] = self.encoded[self.encoded.len() - TRAILER_LEN..]
            .try_into()
            .expect("length checked when built");
        u64::from_le_bytes(t)
    }
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(&self.encoded, &other.encoded)
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Splits encoded internal key bytes into user key, sequence number and kind.
pub fn parse(encoded: &[u8]) -> Result<(&[u8], SeqNo, ValueKind), DecodeError> {
    let Some(split) = encoded.len().checked_sub(TRAILER_LEN) else {
        return Err(DecodeError::Truncated {
            offset: 0,
            needed: TRAILER_LEN - encoded.len(),
        });
    };
    let t = u64::from_le_bytes(encoded[split..].try_into().expect("8 bytes"));
    let kind = ValueKind::from_u8(t as u8)
        .ok_or_else(|| DecodeError::invalid("value kind", split, format!("{}", t as u8)))?;
    Ok((&encoded[..split], t >> 8, kind))
}

/// Compares two encoded internal keys: user keys ascending, then trailers
/// descending. Bytes too short to hold a trailer sort as a bare user key
/// before any longer key with the same prefix (never a panic on bad input).
/// Only equal bytes compare equal: a short key and an empty user key with
/// the all-ones trailer split alike, and the shorter sorts first.
pub fn compare(a: &[u8], b: &[u8]) -> Ordering {
    let (ua, ta) = split(a);
    let (ub, tb) = split(b);
    ua.cmp(ub)
        .then_with(|| tb.cmp(&ta))
        .then_with(|| a.len().cmp(&b.len()))
}

/// The user key of encoded internal key bytes, split as [`compare`] splits
/// them (bytes too short for a trailer are a bare user key).
pub(crate) fn user_key_of(encoded: &[u8]) -> &[u8] {
    split(encoded).0
}

fn split(encoded: &[u8]) -> (&[u8], u64) {
    match encoded.len().checked_sub(TRAILER_LEN) {
        Some(at) => (
            &encoded[..at],
            u64::from_le_bytes(encoded[at..].try_into().expect("8 bytes")),
        ),
        None => (encoded, u64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_version_first_then_next_key() {
        let a5 = InternalKey::new(b"a", 5, ValueKind::Put);
        let a3 = InternalKey::new(b"a", 3, ValueKind::Delete);
        let b9 = InternalKey::new(b"b", 9, ValueKind::Put);
        let ab1 = InternalKey::new(b"ab", 1, ValueKind::Put);
        let mut keys = vec![b9.clone(), a3.clone(), ab1.clone(), a5.clone()];
        keys.sort();
        assert_eq!(keys, vec![a5, a3, ab1, b9]);
    }

    #[test]
    fn round_trip_and_bad_trailers() {
        let k = InternalKey::new(b"key", MAX_SEQNO, ValueKind::BlobIndex);
        assert_eq!(InternalKey::decode(k.encoded()).unwrap(), k);
        assert_eq!(k.seqno(), MAX_SEQNO);
        assert_eq!(k.kind(), ValueKind::BlobIndex);
        assert!(parse(b"short").is_err());
        let mut bad = k.encoded().to_vec();
        let n = bad.len();
        bad[n - 8] = 0x7f;
        assert!(parse(&bad).is_err());
        // Never a panic on short input.
        assert_eq!(compare(b"", &[0xff; 8]), Ordering::Less);
        assert_eq!(
            compare(b"k", b"k\xff\xff\xff\xff\xff\xff\xff\xff"),
            Ordering::Less
        );
        assert_eq!(compare(b"ab", b"abc"), Ordering::Less);
    }
}
