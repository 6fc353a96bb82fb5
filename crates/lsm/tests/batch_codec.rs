//! WriteBatch: what is filled decodes to the same items, every invalid
//! argument is refused at fill time and stays refused until `clear`, and the
//! decoder survives arbitrary and mutated bytes with an error, never a panic.

use proptest::prelude::*;
use strata_lsm::batch::{BATCH_HEADER_LEN, KEY_BYTES_MAX, VALUE_BYTES_MAX};
use strata_lsm::{BatchItem, Error, ValueKind, WriteBatch, MAX_SEQNO};

#[derive(Debug, Clone)]
enum Op {
    Put(u32, Vec<u8>, Vec<u8>),
    Delete(u32, Vec<u8>),
    DeleteRange(u32, Vec<u8>, Vec<u8>),
    PutBlobIndex(u32, Vec<u8>, Vec<u8>),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 1..12)
}

fn op() -> impl Strategy<Value = Op> {
    let cf = prop_oneof![Just(0u32), Just(1), any::<u32>()];
    let value = prop::collection::vec(any::<u8>(), 0..40);
    prop_oneof![
        (cf.clone(), key(), value.clone()).prop_map(|(c, k, v)| Op::Put(c, k, v)),
        (cf.clone(), key()).prop_map(|(c, k)| Op::Delete(c, k)),
        (cf.clone(), key(), key())
            .prop_filter("a non-empty range", |(_, a, b)| a != b)
            .prop_map(|(c, a, b)| Op::DeleteRange(c, a.clone().min(b.clone()), a.max(b))),
        (cf, key(), blob_ref()).prop_map(|(c, k, v)| Op::PutBlobIndex(c, k, v)),
    ]
}

/// An encoded blob reference: the only value a blob index may carry.
fn blob_ref() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u64>(),
        any::<u64>(),
        5u32..1 << 20,
        0u32..1 << 20,
        0u32..1 << 20,
    )
        .prop_map(
            |(file_number, block_offset, block_size, record_offset, value_len)| {
                strata_lsm::blob::BlobRef {
                    file_number,
                    block_offset,
                    block_size,
                    record_offset,
                    value_len,
                }
                .encode()
            },
        )
}

fn fill(ops: &[Op]) -> WriteBatch {
    let mut b = WriteBatch::new();
    for op in ops {
        match op {
            Op::Put(c, k, v) => b.put(*c, k, v),
            Op::Delete(c, k) => b.delete(*c, k),
            Op::DeleteRange(c, s, e) => b.delete_range(*c, s, e),
            Op::PutBlobIndex(c, k, v) => b.put_blob_index(*c, k, v),
        }
    }
    b
}

fn expected(op: &Op) -> BatchItem<'_> {
    let (kind, cf, key, value): (_, _, &[u8], &[u8]) = match op {
        Op::Put(c, k, v) => (ValueKind::Put, *c, k, v),
        Op::Delete(c, k) => (ValueKind::Delete, *c, k, &[]),
        Op::DeleteRange(c, s, e) => (ValueKind::RangeDelete, *c, s, e),
        Op::PutBlobIndex(c, k, v) => (ValueKind::BlobIndex, *c, k, v),
    };
    BatchItem {
        kind,
        cf,
        key,
        value,
    }
}

proptest! {
    #[test]
    fn filled_batches_round_trip(ops in prop::collection::vec(op(), 0..20), first in 1..=MAX_SEQNO - 20) {
        let mut b = fill(&ops);
        b.validate().unwrap();
        prop_assert_eq!(b.count() as usize, ops.len());
        prop_assert_eq!(b.approximate_size(), b.payload().len());
        b.set_first_seqno(first).unwrap();
        let decoded = WriteBatch::decode(b.payload()).unwrap();
        prop_assert_eq!(decoded.first_seqno, first);
        let want: Vec<BatchItem<'_>> = ops.iter().map(expected).collect();
        prop_assert_eq!(&decoded.items, &want);
        let iterated: Vec<BatchItem<'_>> = b.iter().map(Result::unwrap).collect();
        prop_assert_eq!(&iterated, &want);
        let again = WriteBatch::from_payload(b.payload().to_vec()).unwrap();
        prop_assert_eq!(again.payload(), b.payload());
        prop_assert_eq!(again.count(), b.count());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(d) = WriteBatch::decode(&bytes) {
            prop_assert!(d.first_seqno <= MAX_SEQNO);
        }
    }

    #[test]
    fn mutated_batches_never_panic(
        ops in prop::collection::vec(op(), 1..8),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut b = fill(&ops);
        b.set_first_seqno(1).unwrap();
        let mut bytes = b.payload().to_vec();
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        // Whatever decodes obeys the limits a filled batch obeys.
        if let Ok(d) = WriteBatch::decode(&bytes) {
            for item in &d.items {
                prop_assert!(!item.key.is_empty() && item.key.len() <= KEY_BYTES_MAX);
                if item.kind == ValueKind::RangeDelete {
                    prop_assert!(item.key < item.value);
                }
            }
        }
        // Every strict prefix of a real batch is refused.
        let cut = cut.index(b.payload().len());
        prop_assert!(WriteBatch::decode(&b.payload()[..cut]).is_err());
    }
}

#[test]
fn every_invalid_argument_is_refused_until_clear() {
    let long_key = vec![b'k'; KEY_BYTES_MAX + 1];
    type Fill = Box<dyn Fn(&mut WriteBatch)>;
    let cases: Vec<Fill> = vec![
        Box::new(|b| b.put(0, b"", b"v")),
        Box::new(|b| b.delete(0, b"")),
        Box::new(|b| b.put_blob_index(3, b"", b"ref")),
        Box::new(|b| b.put_blob_index(3, b"k", b"not a blob reference")),
        Box::new(move |b| b.delete(0, &long_key)),
        Box::new(|b| b.delete_range(0, b"b", b"b")),
        Box::new(|b| b.delete_range(0, b"b", b"a")),
        Box::new(|b| b.delete_range(0, b"", b"a")),
        Box::new(|b| b.delete_range(0, b"a", &vec![b'z'; KEY_BYTES_MAX + 1])),
    ];
    for (i, case) in cases.iter().enumerate() {
        let mut b = WriteBatch::new();
        b.put(0, b"fine", b"v");
        case(&mut b);
        b.put(0, b"after", b"v");
        assert!(
            matches!(b.validate(), Err(Error::InvalidArgument(_))),
            "case {i}"
        );
        assert_eq!(b.count(), 1, "case {i}: nothing is added after the refusal");
        // What was encoded still decodes: the payload is never half-written.
        assert_eq!(WriteBatch::decode(b.payload()).unwrap().items.len(), 1);
        b.clear();
        b.validate().unwrap();
        assert!(b.is_empty());
        assert_eq!(b.approximate_size(), BATCH_HEADER_LEN);
    }
}

#[test]
fn the_largest_value_is_accepted_and_one_more_byte_refused() {
    let mut value = vec![0u8; VALUE_BYTES_MAX + 1];
    let mut b = WriteBatch::new();
    b.put(0, b"k", &value);
    assert!(b.validate().is_err());
    value.pop();
    let mut b = WriteBatch::new();
    b.put(0, b"k", &value);
    b.validate().unwrap();
    assert_eq!(
        WriteBatch::decode(b.payload()).unwrap().items[0]
            .value
            .len(),
        VALUE_BYTES_MAX
    );
}

#[test]
fn the_documented_example_encodes_byte_for_byte() {
    let mut b = WriteBatch::new();
    b.put(0, b"k", b"v1");
    b.delete_range(2, b"a", b"c");
    b.set_first_seqno(7).unwrap();
    let want: &[u8] = &[
        7, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, // header
        1, 0, 1, b'k', 2, b'v', b'1', // PUT
        2, 2, 1, b'a', 1, b'c', // RANGE_DELETE
    ];
    assert_eq!(b.payload(), want);
}

#[test]
fn header_lies_are_refused() {
    let mut b = WriteBatch::new();
    b.put(0, b"k", b"v");
    b.set_first_seqno(5).unwrap();
    let good = b.payload().to_vec();
    // More items counted than present, fewer counted than present.
    for count in [0u32, 2, u32::MAX] {
        let mut bad = good.clone();
        bad[8..12].copy_from_slice(&count.to_le_bytes());
        assert!(WriteBatch::decode(&bad).is_err(), "count {count}");
    }
    // A first seqno past the 56-bit space.
    let mut bad = good.clone();
    bad[..8].copy_from_slice(&MAX_SEQNO.to_le_bytes());
    WriteBatch::decode(&bad).unwrap();
    bad[..8].copy_from_slice(&(MAX_SEQNO + 1).to_le_bytes());
    assert!(WriteBatch::decode(&bad).is_err());
    // An unknown kind and a column family above u32.
    let mut bad = good.clone();
    bad[12] = 4;
    assert!(WriteBatch::decode(&bad).is_err());
    let mut bad = good[..13].to_vec();
    bad.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x1f, 1, b'k', 1, b'v']);
    assert!(WriteBatch::decode(&bad).is_err());
}
