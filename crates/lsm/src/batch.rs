//! `WriteBatch`: the changes a caller writes in one atomic step, across any
//! number of column families, and the codec of its bytes (the payload of one
//! write-ahead-log record; the spec is `docs/format/wal.md`).
//!
//! Payload grammar (all integers little-endian, varints LEB128):
//! ```text
//! payload = u64 first_seqno | u32 count | item{count}
//! item    = u8 kind | varint cf | varint key_len | key | value?
//! value   = varint value_len | value        (every kind but DELETE)
//! kind 0 DELETE        key
//! kind 1 PUT           key, value
//! kind 2 RANGE_DELETE  key = start, value = end (exclusive), start < end
//! kind 3 BLOB_INDEX    key, value = a blob reference
//! ```
//! The kind bytes are [`ValueKind`]'s frozen discriminants, so an item's kind
//! is the kind its internal key gets in the memtable.
//!
//! Invariants:
//! - The batch encodes as it is filled: `payload` always holds a complete,
//!   decodable payload of the items added so far, and `count` matches it.
//! - The first invalid argument is recorded and nothing is added after it;
//!   [`WriteBatch::validate`] reports it until [`WriteBatch::clear`]. The
//!   engine calls `validate` before any I/O, so an invalid batch never
//!   reaches the log.
//! - The decoder enforces the same limits as the filling methods, so replay
//!   of a damaged log can never insert what a caller could not.
//! - Item `i` is written at sequence number `first_seqno + i`; the engine
//!   stamps `first_seqno` once it has allocated the batch's sequence numbers.

use strata_codec::{put_varint, varint_len, DecodeError, Reader, MAX_VARINT_LEN};

use crate::column_family::ColumnFamilyId;
use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind, MAX_SEQNO};

/// The longest user key, in bytes. TiKV's encoded keys (a user key with its
/// memcomparable escaping and timestamp) stay far below it; a longer key is
/// almost always a caller's bug, and keys are copied into every index block.
pub const KEY_BYTES_MAX: usize = 8 << 10;

/// The longest value, in bytes. Large enough for any Raft-replicated value
/// (TiKV caps a Raft entry at 8 MiB by default), small enough that a batch
/// with several of them still fits one log record.
pub const VALUE_BYTES_MAX: usize = 256 << 20;

/// The largest payload of one batch: the payload limit of one record of the
/// log files (2^30 bytes, `docs/format/raftlog.md`), which the WAL shares.
pub const BATCH_BYTES_MAX: usize = 1 << 30;

/// Bytes of the payload header: `u64 first_seqno | u32 count`.
pub const BATCH_HEADER_LEN: usize = 12;

/// The most bytes an item takes besides its key and value bytes.
const ITEM_OVERHEAD_MAX: usize = 1 + 3 * MAX_VARINT_LEN;

// A batch can always hold one item of maximal size.
const _: () = assert!(
    BATCH_HEADER_LEN + ITEM_OVERHEAD_MAX + KEY_BYTES_MAX + VALUE_BYTES_MAX <= BATCH_BYTES_MAX
);
// Every item takes at least 4 bytes, so the count of a full batch fits a u32.
const _: () = assert!(BATCH_BYTES_MAX / 4 <= u32::MAX as usize);

/// One change of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchItem<'a> {
    /// What the change is; it becomes the kind of the item's internal key.
    pub kind: ValueKind,
    /// The column family it changes.
    pub cf: ColumnFamilyId,
    /// The user key; for [`ValueKind::RangeDelete`] the range's first key.
    pub key: &'a [u8],
    /// The value: inline bytes for `Put`, a blob reference for `BlobIndex`,
    /// the exclusive end key for `RangeDelete`, empty for `Delete`.
    pub value: &'a [u8],
}

/// A decoded payload: the first sequence number (0 while not stamped) and
/// the items in the order they were added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedBatch<'a> {
    /// The sequence number of the first item; 0 if the engine has not
    /// stamped the batch.
    pub first_seqno: SeqNo,
    /// The items; item `i` is written at `first_seqno + i`.
    pub items: Vec<BatchItem<'a>>,
}

/// A set of changes to any number of column families, applied atomically:
/// after a crash all of them or none are visible, and a reader sees all of
/// them or none (they are published together by the visible sequence number).
///
/// The batch encodes as it is filled, so logging it costs one copy.
#[derive(Debug, Clone)]
pub struct WriteBatch {
    /// `{u64 first_seqno | u32 count | item*}`, kept decodable at all times.
    payload: Vec<u8>,
    /// Items in `payload`, mirrored in its header.
    count: u32,
    /// The first argument that could not be added.
    invalid: Option<String>,
}

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch::new()
    }
}

impl WriteBatch {
    /// Returns an empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::with_capacity(0)
    }

    /// Returns an empty batch whose buffer holds `bytes` of items without
    /// growing.
    pub fn with_capacity(bytes: usize) -> WriteBatch {
        let mut payload = Vec::with_capacity(BATCH_HEADER_LEN + bytes.min(BATCH_BYTES_MAX));
        payload.resize(BATCH_HEADER_LEN, 0);
        WriteBatch {
            payload,
            count: 0,
            invalid: None,
        }
    }

    /// Takes a payload read back from the log, checking every item.
    pub fn from_payload(payload: Vec<u8>) -> std::result::Result<WriteBatch, DecodeError> {
        let count = WriteBatch::decode(&payload)?.items.len() as u32;
        Ok(WriteBatch {
            payload,
            count,
            invalid: None,
        })
    }

    /// Sets `key` of column family `cf` to `value`.
    pub fn put(&mut self, cf: ColumnFamilyId, key: &[u8], value: &[u8]) {
        self.add(ValueKind::Put, cf, key, Some(value));
    }

    /// Deletes `key` of column family `cf`.
    pub fn delete(&mut self, cf: ColumnFamilyId, key: &[u8]) {
        self.add(ValueKind::Delete, cf, key, None);
    }

    /// Deletes every key `k` of column family `cf` with `start <= k < end`.
    /// An empty range (`start >= end`) makes the batch invalid: it is almost
    /// always a caller's bug, and refusing it keeps empty tombstones out of
    /// every layer.
    pub fn delete_range(&mut self, cf: ColumnFamilyId, start: &[u8], end: &[u8]) {
        if self.invalid.is_none() && start >= end {
            self.refuse(format!(
                "cf {cf}: delete_range start {:?} is not below end {:?}",
                Abbrev(start),
                Abbrev(end)
            ));
            return;
        }
        self.add(ValueKind::RangeDelete, cf, start, Some(end));
    }

    /// Sets `key` of column family `cf` to a value that lives in a blob file;
    /// `blob_ref` is the reference to it (key-value separation). Its bytes
    /// are opaque here; the blob layer defines them.
    pub fn put_blob_index(&mut self, cf: ColumnFamilyId, key: &[u8], blob_ref: &[u8]) {
        self.add(ValueKind::BlobIndex, cf, key, Some(blob_ref));
    }

    /// Returns the number of items.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Returns true when nothing has been added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Returns the size of the encoded payload in bytes: what the log record
    /// will carry, and about what the items will take in the memtable.
    pub fn approximate_size(&self) -> usize {
        self.payload.len()
    }

    /// Returns the encoded payload (`docs/format/wal.md`).
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// Returns `Ok` if every argument so far was valid, else
    /// [`Error::InvalidArgument`] naming the first one that was not.
    pub fn validate(&self) -> Result<()> {
        match &self.invalid {
            None => Ok(()),
            Some(why) => Err(Error::InvalidArgument(why.clone())),
        }
    }

    /// Empties the batch and forgets any invalid argument, keeping the buffer.
    pub fn clear(&mut self) {
        self.payload.clear();
        self.payload.resize(BATCH_HEADER_LEN, 0);
        self.count = 0;
        self.invalid = None;
    }

    /// Returns the sequence number of the first item, 0 if not stamped yet.
    pub fn first_seqno(&self) -> SeqNo {
        u64::from_le_bytes(self.payload[..8].try_into().expect("header is 12 bytes"))
    }

    /// Stamps the sequence number of the first item; item `i` gets
    /// `first + i`. The engine calls it with what the sequence allocator
    /// returned for `count()` sequence numbers, before logging the batch.
    pub fn set_first_seqno(&mut self, first: SeqNo) -> Result<()> {
        let last = first.checked_add(u64::from(self.count.max(1)) - 1);
        if first == 0 || last.is_none_or(|last| last > MAX_SEQNO) {
            return Err(Error::InvalidArgument(format!(
                "first seqno {first} for {} items is outside 1..={MAX_SEQNO}",
                self.count
            )));
        }
        self.payload[..8].copy_from_slice(&first.to_le_bytes());
        Ok(())
    }

    /// Iterates over the items in the order they were added.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            reader: Reader::new(&self.payload[BATCH_HEADER_LEN..]),
            left: self.count,
        }
    }

    /// Decodes a payload from untrusted bytes: every item is checked against
    /// the limits the filling methods enforce, and the header's count must
    /// match the items exactly. Never panics.
    pub fn decode(payload: &[u8]) -> std::result::Result<DecodedBatch<'_>, DecodeError> {
        let mut r = Reader::new(payload);
        let first_seqno = r.u64()?;
        let count = r.u32()?;
        if first_seqno > MAX_SEQNO
            || (first_seqno != 0 && first_seqno + u64::from(count.max(1)) - 1 > MAX_SEQNO)
        {
            return Err(DecodeError::invalid(
                "first seqno",
                0,
                format!("{first_seqno} with {count} items passes {MAX_SEQNO}"),
            ));
        }
        // A hostile count must not size the allocation: each item takes at
        // least 4 bytes.
        let mut items = Vec::with_capacity((count as usize).min(r.remaining() / 4));
        let mut it = BatchIter {
            reader: r,
            left: count,
        };
        for item in &mut it {
            items.push(item?);
        }
        if !it.reader.is_empty() {
            return Err(DecodeError::invalid(
                "batch",
                it.reader.position() + BATCH_HEADER_LEN,
                format!("bytes after the {count} items the header counts"),
            ));
        }
        Ok(DecodedBatch { first_seqno, items })
    }
}

impl WriteBatch {
    /// Appends one item if the batch is still valid and the item is too.
    // { u8 kind | varint cf | varint key_len | key | [varint value_len | value] }
    fn add(&mut self, kind: ValueKind, cf: ColumnFamilyId, key: &[u8], value: Option<&[u8]>) {
        if self.invalid.is_some() {
            return;
        }
        if let Err(why) = check_item(kind, key, value.unwrap_or_default()) {
            self.refuse(format!("cf {cf}: {why}"));
            return;
        }
        let item_len = 1
            + varint_len(u64::from(cf))
            + varint_len(key.len() as u64)
            + key.len()
            + value.map_or(0, |v| varint_len(v.len() as u64) + v.len());
        if self.payload.len() + item_len > BATCH_BYTES_MAX {
            self.refuse(format!(
                "cf {cf}: the batch would pass {BATCH_BYTES_MAX} bytes"
            ));
            return;
        }
        self.payload.push(kind as u8);
        put_varint(&mut self.payload, u64::from(cf));
        put_varint(&mut self.payload, key.len() as u64);
        self.payload.extend_from_slice(key);
        if let Some(value) = value {
            put_varint(&mut self.payload, value.len() as u64);
            self.payload.extend_from_slice(value);
        }
        self.count += 1;
        self.payload[8..12].copy_from_slice(&self.count.to_le_bytes());
    }

    /// Keeps the first reason the batch cannot be written.
    fn refuse(&mut self, why: String) {
        self.invalid.get_or_insert(why);
    }
}

/// Checks one item against the limits; the message names what is wrong.
fn check_item(kind: ValueKind, key: &[u8], value: &[u8]) -> std::result::Result<(), String> {
    if key.is_empty() {
        return Err("empty key".to_owned());
    }
    if key.len() > KEY_BYTES_MAX {
        return Err(format!("key of {} bytes passes {KEY_BYTES_MAX}", key.len()));
    }
    match kind {
        ValueKind::Delete if !value.is_empty() => Err("a delete carries no value".to_owned()),
        ValueKind::RangeDelete if value.len() > KEY_BYTES_MAX => Err(format!(
            "range end of {} bytes passes {KEY_BYTES_MAX}",
            value.len()
        )),
        ValueKind::RangeDelete if key >= value => {
            Err("range start is not below its end".to_owned())
        }
        ValueKind::BlobIndex => crate::blob::BlobRef::decode(value)
            .map(|_| ())
            .map_err(|e| format!("a blob index whose reference does not decode: {e}")),
        _ if value.len() > VALUE_BYTES_MAX => Err(format!(
            "value of {} bytes passes {VALUE_BYTES_MAX}",
            value.len()
        )),
        _ => Ok(()),
    }
}

/// The items of a payload, each checked as [`WriteBatch::decode`] does.
/// Yields at most the header's count; an error ends it.
#[derive(Debug)]
pub struct BatchIter<'a> {
    /// Positioned after the header, at the next item.
    reader: Reader<'a>,
    /// Items the header still promises.
    left: u32,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = std::result::Result<BatchItem<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let item = self.decode_item();
        if item.is_err() {
            self.left = 0;
        }
        Some(item)
    }
}

impl<'a> BatchIter<'a> {
    fn decode_item(&mut self) -> std::result::Result<BatchItem<'a>, DecodeError> {
        let r = &mut self.reader;
        let at = r.position() + BATCH_HEADER_LEN;
        let byte = r.u8()?;
        let kind = ValueKind::from_u8(byte)
            .ok_or_else(|| DecodeError::invalid("item kind", at, format!("unknown kind {byte}")))?;
        let cf = r.varint()?;
        let cf = ColumnFamilyId::try_from(cf)
            .map_err(|_| DecodeError::invalid("column family", at, format!("{cf}")))?;
        let key = r.length_prefixed()?;
        let value = match kind {
            ValueKind::Delete => &[][..],
            _ => r.length_prefixed()?,
        };
        check_item(kind, key, value).map_err(|why| DecodeError::invalid("item", at, why))?;
        Ok(BatchItem {
            kind,
            cf,
            key,
            value,
        })
    }
}

/// Shows at most a few bytes of a key in an error message.
struct Abbrev<'a>(&'a [u8]);

impl std::fmt::Debug for Abbrev<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHOWN: usize = 32;
        let shown = &self.0[..self.0.len().min(SHOWN)];
        write!(f, "\"{}\"", shown.escape_ascii())?;
        if self.0.len() > SHOWN {
            write!(f, "..({} bytes)", self.0.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_batch_is_a_header() {
        let b = WriteBatch::new();
        assert_eq!(b.payload(), &[0u8; BATCH_HEADER_LEN]);
        let d = WriteBatch::decode(b.payload()).unwrap();
        assert_eq!((d.first_seqno, d.items.len()), (0, 0));
    }

    #[test]
    fn the_header_counts_and_stamps() {
        let mut b = WriteBatch::new();
        b.put(1, b"k", b"v");
        b.delete(2, b"k");
        assert_eq!(&b.payload()[8..12], &2u32.to_le_bytes());
        b.set_first_seqno(7).unwrap();
        assert_eq!(b.first_seqno(), 7);
        assert!(b.set_first_seqno(0).is_err());
        assert!(b.set_first_seqno(MAX_SEQNO).is_err());
        b.set_first_seqno(MAX_SEQNO - 1).unwrap();
    }

    #[test]
    fn oversized_items_are_refused_without_being_encoded() {
        let mut b = WriteBatch::new();
        b.put(0, &vec![b'k'; KEY_BYTES_MAX + 1], b"");
        assert!(matches!(b.validate(), Err(Error::InvalidArgument(_))));
        assert_eq!(b.approximate_size(), BATCH_HEADER_LEN);
        let mut b = WriteBatch::new();
        b.put(0, &vec![b'k'; KEY_BYTES_MAX], b"");
        b.validate().unwrap();
    }
}
