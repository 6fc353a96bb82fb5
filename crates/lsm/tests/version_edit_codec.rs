//! The version edit codec: round trips of arbitrary edits, the worked
//! example of `docs/format/manifest.md` byte for byte, and hostile bytes
//! (arbitrary, mutated, truncated, unknown tags, repeated fields) that give
//! typed errors and never a panic.

mod version_support;

use proptest::prelude::*;
use strata_lsm::version::BlobFileDesc;
use strata_lsm::{FileDesc, InternalKey, ValueKind, VersionEdit, MAX_SEQNO};
use version_support::*;

fn file_desc() -> impl Strategy<Value = FileDesc> {
    (
        any::<u64>(),
        any::<u64>(),
        prop::collection::vec(any::<u8>(), 0..12),
        prop::collection::vec(any::<u8>(), 0..12),
        0..=MAX_SEQNO,
        0..=MAX_SEQNO,
        prop::collection::btree_map(any::<u64>(), any::<u64>(), 0..4),
        any::<bool>(),
    )
        .prop_map(|(number, size, a, b, s1, s2, refs, range_tombstones)| {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let (slo, shi) = (s1.min(s2), s1.max(s2));
            FileDesc {
                number,
                size,
                smallest: InternalKey::new(&lo, shi, ValueKind::Put),
                largest: InternalKey::new(&hi, slo, ValueKind::Delete),
                smallest_seqno: slo,
                largest_seqno: shi,
                blob_refs: refs.into_iter().collect(),
                range_tombstones,
            }
        })
}

fn version_edit() -> impl Strategy<Value = VersionEdit> {
    (
        any::<u32>(),
        any::<Option<u64>>(),
        any::<Option<u64>>(),
        prop::option::of(0..=MAX_SEQNO),
        prop::collection::vec((any::<u8>(), any::<u64>()), 0..5),
        prop::collection::vec((any::<u8>(), file_desc()), 0..5),
        prop::collection::vec(any::<u64>(), 0..3),
        prop::collection::vec(blob_file_desc(), 0..3),
    )
        .prop_map(
            |(cf, log, next, last, deleted, added, deleted_blob_files, added_blob_files)| {
                VersionEdit {
                    column_family: cf,
                    log_number: log,
                    next_file_number: next,
                    last_seqno: last,
                    deleted,
                    added,
                    deleted_blob_files,
                    added_blob_files,
                }
            },
        )
}

fn blob_file_desc() -> impl Strategy<Value = BlobFileDesc> {
    (any::<u64>(), 76..u64::MAX, any::<u64>(), any::<u64>()).prop_map(
        |(number, size, record_count, value_bytes)| BlobFileDesc {
            number,
            size,
            record_count,
            value_bytes,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn round_trip(e in version_edit()) {
        let bytes = e.encode();
        prop_assert_eq!(VersionEdit::decode(&bytes).unwrap(), e);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(e) = VersionEdit::decode(&bytes) {
            // Whatever decodes re-encodes to something that decodes the same.
            prop_assert_eq!(VersionEdit::decode(&e.encode()).unwrap(), e);
        }
    }

    #[test]
    fn mutated_edits_never_panic(e in version_edit(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4), cut in any::<prop::sample::Index>()) {
        let mut bytes = e.encode();
        if bytes.is_empty() {
            return Ok(());
        }
        for (at, x) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        let _ = VersionEdit::decode(&bytes);
        let _ = VersionEdit::decode(&bytes[..cut.index(bytes.len())]);
    }
}

#[test]
fn worked_example_of_the_spec() {
    // docs/format/manifest.md: a compaction moves data from file 7 (L0) and
    // file 5 (L1) into file 9 (L1).
    let mut e = VersionEdit {
        next_file_number: Some(10),
        last_seqno: Some(300),
        ..VersionEdit::new()
    };
    e.delete_file(0, 7).delete_file(1, 5).add_file(
        1,
        FileDesc {
            number: 9,
            size: 4096,
            smallest: InternalKey::new(b"a", 300, ValueKind::Put),
            largest: InternalKey::new(b"b", 1, ValueKind::Put),
            smallest_seqno: 1,
            largest_seqno: 300,
            blob_refs: Vec::new(),
            range_tombstones: false,
        },
    );
    let bytes = e.encode();
    #[rustfmt::skip]
    let expect: Vec<u8> = vec![
        0x03, 0x0a,                          // NEXT_FILE_NUMBER 10
        0x04, 0xac, 0x02,                    // LAST_SEQNO 300
        0x05, 0x00, 0x07,                    // DELETED_FILE L0 #7
        0x05, 0x01, 0x05,                    // DELETED_FILE L1 #5
        0x0a, 0x01, 0x09, 0x80, 0x20,        // ADDED_FILE_FLAGS L1 #9 4096 bytes
        0x09, b'a', 0x01, 0x2c, 0x01, 0, 0, 0, 0, 0, // smallest "a" @300 PUT
        0x09, b'b', 0x01, 0x01, 0, 0, 0, 0, 0, 0,    // largest "b" @1 PUT
        0x01, 0xac, 0x02,                    // seqnos 1..=300
        0x00,                                // flags: no range tombstones
    ];
    assert_eq!(bytes, expect);
    assert_eq!(VersionEdit::decode(&expect).unwrap(), e);
    // The same file as a manifest written before the flags recorded it:
    // it may hold range tombstones, so iterators open it at creation.
    let mut old = expect.clone();
    old[11] = 0x06;
    old.pop();
    let decoded = VersionEdit::decode(&old).unwrap();
    assert!(decoded.added[0].1.range_tombstones);
    // A flag this build does not know is refused.
    let mut unknown = expect;
    *unknown.last_mut().unwrap() = 0x02;
    assert!(VersionEdit::decode(&unknown).is_err());
}

#[test]
fn hostile_fields_are_typed_errors() {
    let cases: &[(&str, Vec<u8>)] = &[
        ("reserved tag 0", vec![0x00]),
        ("unknown tag", vec![0x07, 0x01]),
        ("truncated varint", vec![0x02, 0x80]),
        ("repeated scalar", vec![0x02, 0x01, 0x02, 0x02]),
        ("repeated cf", vec![0x01, 0x01, 0x01, 0x01]),
        ("cf above u32", vec![0x01, 0x80, 0x80, 0x80, 0x80, 0x10]),
        ("level above 255", vec![0x05, 0x80, 0x02, 0x01]),
        ("seqno above max", {
            let mut b = vec![0x04];
            strata_codec::put_varint(&mut b, MAX_SEQNO + 1);
            b
        }),
        (
            "key without trailer",
            vec![0x06, 0x01, 0x09, 0x00, 0x01, b'a'],
        ),
        (
            "huge key length",
            vec![0x06, 0x01, 0x09, 0x00, 0xff, 0xff, 0xff, 0xff, 0x0f],
        ),
    ];
    for (what, bytes) in cases {
        assert!(VersionEdit::decode(bytes).is_err(), "{what}");
    }
    // An inverted file range in otherwise well-formed bytes.
    let mut e = edit(&[(1, desc(3, 0, 9, 1, 1))], &[]);
    e.added[0].1.smallest = InternalKey::new(&key(20), 1, ValueKind::Put);
    assert!(VersionEdit::decode(&e.encode()).is_err());
    assert_eq!(VersionEdit::decode(&[]).unwrap(), VersionEdit::new());
}
