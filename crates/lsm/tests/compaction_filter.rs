//! The compaction filter sees only a key's newest version, and only when it
//! is a Put newer than every snapshot: Remove and ChangeValue then apply,
//! while every snapshot still reads the values it saw. Remove writes a
//! deletion unless the deletion itself may be dropped (bottommost, no
//! snapshot), and a deletion hides the file below.

mod compaction_support;

use std::sync::Mutex;

use compaction_support::*;
use strata_lsm::compaction::{write_sorted_run, CompactionFilter, FilterDecision};
use strata_lsm::{Memtable, MergingIterator, SeqNo, ValueKind, MAX_SEQNO};

/// Removes keys ending in `r`, rewrites keys ending in `c`, keeps the
/// rest; records what it was shown.
#[derive(Default)]
struct TestFilter {
    shown: Mutex<Vec<(Vec<u8>, Vec<u8>)>>,
}

impl CompactionFilter for TestFilter {
    fn name(&self) -> &str {
        "test"
    }
    fn filter(&self, _level: u8, user_key: &[u8], value: &[u8]) -> FilterDecision {
        self.shown
            .lock()
            .unwrap()
            .push((user_key.to_vec(), value.to_vec()));
        match user_key.last() {
            Some(b'r') => FilterDecision::Remove,
            Some(b'c') => FilterDecision::ChangeValue(b"changed".to_vec()),
            _ => FilterDecision::Keep,
        }
    }
}

fn run(
    points: &[Point],
    snapshots: &[SeqNo],
    bottommost: bool,
    filter: &TestFilter,
) -> Vec<Contents> {
    let fs = mem_fs();
    let m = Memtable::new(1);
    for (k, s, kind, v) in points {
        m.insert(k, *s, *kind, v).unwrap();
    }
    let n = Numbers::new(10);
    let next = || n.next();
    let mut ctx = context(&*fs, &next, snapshots, bottommost, 1 << 20);
    ctx.filter = Some(filter);
    let mut it = MergingIterator::new(vec![m.iter()]);
    let out = write_sorted_run(&mut it, m.range_tombstones(MAX_SEQNO), &ctx).unwrap();
    out.iter().map(|d| read_file(&*fs, d)).collect()
}

fn put(k: &str, s: SeqNo, v: &str) -> Point {
    (
        k.as_bytes().to_vec(),
        s,
        ValueKind::Put,
        v.as_bytes().to_vec(),
    )
}

#[test]
fn without_snapshots_the_newest_versions_are_filtered() {
    let f = TestFilter::default();
    let points = [
        put("ar", 1, "old"),
        put("ar", 2, "new"),
        put("bc", 3, "v"),
        put("dk", 4, "v"),
    ];
    let out = run(&points, &[], true, &f);
    // Only the newest version of each key was shown.
    let shown = f.shown.lock().unwrap().clone();
    assert_eq!(
        shown,
        vec![
            (b"ar".to_vec(), b"new".to_vec()),
            (b"bc".to_vec(), b"v".to_vec()),
            (b"dk".to_vec(), b"v".to_vec()),
        ]
    );
    assert_eq!(visible(&out, b"ar", MAX_SEQNO), None);
    assert_eq!(visible(&out, b"bc", MAX_SEQNO), Some(b"changed".to_vec()));
    assert_eq!(visible(&out, b"dk", MAX_SEQNO), Some(b"v".to_vec()));
    // At bottommost the removal leaves nothing at all behind.
    let all: Vec<_> = out.iter().flat_map(|c| c.points.clone()).collect();
    assert!(all.iter().all(|p| p.0 != b"ar"), "{all:?}");
}

#[test]
fn snapshots_still_read_the_values_they_saw() {
    let f = TestFilter::default();
    // Snapshot 5 sees ar=old and bc=old; the latest view sees the new ones.
    let points = [
        put("ar", 1, "old"),
        put("bc", 2, "old"),
        put("ar", 7, "new"),
        put("bc", 8, "new"),
        put("er", 3, "only-old"),
    ];
    let out = run(&points, &[5], true, &f);
    assert_eq!(visible(&out, b"ar", 5), Some(b"old".to_vec()));
    assert_eq!(visible(&out, b"bc", 5), Some(b"old".to_vec()));
    assert_eq!(visible(&out, b"er", 5), Some(b"only-old".to_vec()));
    // Versions newer than every snapshot were filtered.
    assert_eq!(visible(&out, b"ar", MAX_SEQNO), None, "removed");
    assert_eq!(visible(&out, b"bc", MAX_SEQNO), Some(b"changed".to_vec()));
    // A version a snapshot sees is never shown to the filter.
    let shown = f.shown.lock().unwrap().clone();
    assert!(shown.iter().all(|(_, v)| v == b"new"), "{shown:?}");
    // The removal of ar is a deletion: snapshot 5 still has ar=old below it.
    let ar: Vec<_> = out
        .iter()
        .flat_map(|c| c.points.clone())
        .filter(|p| p.0 == b"ar")
        .collect();
    assert_eq!(ar.len(), 2);
    assert_eq!(ar[0].2, ValueKind::Delete);
}

#[test]
fn a_removal_above_a_lower_level_writes_a_deletion() {
    let f = TestFilter::default();
    let out = run(&[put("ar", 4, "v")], &[], false, &f);
    let all: Vec<_> = out.iter().flat_map(|c| c.points.clone()).collect();
    assert_eq!(
        all,
        vec![(b"ar".to_vec(), 4, ValueKind::Delete, Vec::new())]
    );
    // The file below holds an older version: it stays hidden.
    let fs = mem_fs();
    let below = read_file(&*fs, &write_sst(&*fs, 1, &[put("ar", 1, "older")], &[]));
    let mut files = out.clone();
    files.push(below);
    assert_eq!(visible(&files, b"ar", MAX_SEQNO), None);
}
