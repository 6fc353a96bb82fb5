use super::*;
use crate::iter::InternalIterator;

fn keys(it: &mut MemtableIter<'_>) -> Vec<(Vec<u8>, SeqNo)> {
    let mut out = Vec::new();
    while it.valid() {
        let (k, s, _) = key::parse(it.key()).unwrap();
        out.push((k.to_vec(), s));
        it.next().unwrap();
    }
    out
}

#[test]
fn get_sees_the_newest_version_at_the_snapshot() {
    let m = Memtable::new(1);
    m.insert(b"k", 3, ValueKind::Put, b"v3").unwrap();
    m.insert(b"k", 5, ValueKind::Delete, b"").unwrap();
    m.insert(b"k", 7, ValueKind::BlobIndex, b"ref").unwrap();
    assert_eq!(m.get(b"k", 2), None);
    assert_eq!(m.get(b"k", 4), Some((ValueKind::Put, b"v3".to_vec())));
    assert_eq!(m.get(b"k", 5), Some((ValueKind::Delete, vec![])));
    assert_eq!(
        m.get(b"k", MAX_SEQNO),
        Some((ValueKind::BlobIndex, b"ref".to_vec()))
    );
    assert_eq!(m.get(b"j", MAX_SEQNO), None);
    assert_eq!(m.get(b"kk", MAX_SEQNO), None);
    assert_eq!((m.smallest_seqno(), m.largest_seqno()), (Some(3), Some(7)));
}

#[test]
fn range_tombstones_hide_older_versions_only() {
    let m = Memtable::new(1);
    m.insert(b"b", 2, ValueKind::Put, b"old").unwrap();
    m.insert(b"a", 4, ValueKind::RangeDelete, b"c").unwrap();
    m.insert(b"b", 6, ValueKind::Put, b"new").unwrap();
    assert_eq!(m.get(b"b", 3), Some((ValueKind::Put, b"old".to_vec())));
    assert_eq!(m.get(b"b", 5), Some((ValueKind::RangeDelete, vec![])));
    assert_eq!(m.get(b"b", 6), Some((ValueKind::Put, b"new".to_vec())));
    // Covered without a version here: older sources must not be asked.
    assert_eq!(m.get(b"a", 9), Some((ValueKind::RangeDelete, vec![])));
    assert_eq!(m.get(b"c", 9), None, "the end is exclusive");
    assert_eq!(m.range_tombstones(3), vec![]);
    assert_eq!(m.range_tombstones(4).len(), 1);
    // Range tombstones stay out of the point stream.
    assert_eq!(
        keys(&mut {
            let mut it = m.iter();
            it.seek_to_first().unwrap();
            it
        })
        .len(),
        2
    );
}

#[test]
fn bad_inserts_are_refused_and_change_nothing() {
    let m = Memtable::new(1);
    let bad = [
        (&b"k"[..], 0, ValueKind::Put, &b""[..]),
        (b"k", MAX_SEQNO + 1, ValueKind::Put, b""),
        (b"", 1, ValueKind::Put, b""),
        (b"b", 1, ValueKind::RangeDelete, b"a"),
        (b"b", 1, ValueKind::RangeDelete, b"b"),
        (b"k", 1, ValueKind::Delete, b"v"),
    ];
    for (k, s, kind, v) in bad {
        assert!(matches!(
            m.insert(k, s, kind, v),
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(m.is_empty());
    assert_eq!(m.approximate_bytes(), 0);
    m.insert(b"k", 1, ValueKind::Put, b"v").unwrap();
    let bytes = m.approximate_bytes();
    // Replaying the same entry is harmless; another value is refused.
    m.insert(b"k", 1, ValueKind::Put, b"v").unwrap();
    assert!(m.insert(b"k", 1, ValueKind::Put, b"w").is_err());
    assert_eq!(m.approximate_bytes(), bytes);
    assert_eq!(m.get(b"k", 1), Some((ValueKind::Put, b"v".to_vec())));
}

#[test]
fn iterator_seeks_both_ways_within_bounds() {
    let m = Memtable::new(1);
    for (i, k) in [b"a", b"b", b"c", b"d"].iter().enumerate() {
        m.insert(*k, 10 + i as u64, ValueKind::Put, b"").unwrap();
        m.insert(*k, 1 + i as u64, ValueKind::Put, b"").unwrap();
    }
    let mut it = m.iter_with_bounds(Some(b"b"), Some(b"d"));
    it.seek_to_first().unwrap();
    let all = keys(&mut it);
    assert_eq!(
        all,
        vec![
            (b"b".to_vec(), 11),
            (b"b".to_vec(), 2),
            (b"c".to_vec(), 12),
            (b"c".to_vec(), 3)
        ]
    );
    it.seek_to_last().unwrap();
    assert_eq!(key::parse(it.key()).unwrap().1, 3);
    it.prev().unwrap();
    assert_eq!(key::parse(it.key()).unwrap().1, 12);
    it.seek(InternalKey::new(b"a", 99, ValueKind::Put).encoded())
        .unwrap();
    assert_eq!(
        key::parse(it.key()).unwrap().1,
        11,
        "clamped to the lower bound"
    );
    it.prev().unwrap();
    assert!(!it.valid());
    it.seek_for_prev(InternalKey::new(b"z", 1, ValueKind::Put).encoded())
        .unwrap();
    assert_eq!(
        key::parse(it.key()).unwrap().1,
        3,
        "clamped to the upper bound"
    );
    it.next().unwrap();
    assert!(!it.valid());
    it.seek_for_prev(InternalKey::new(b"c", 5, ValueKind::Put).encoded())
        .unwrap();
    assert_eq!(key::parse(it.key()).unwrap().1, 12);
    assert!(m.approximate_bytes() >= 8 * (1 + key::TRAILER_LEN));
}

use crate::key::InternalKey;
