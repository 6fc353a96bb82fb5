//! Outputs are cut near the target size, never between two versions of one
//! user key; a flush writes one L0 file whatever the target; a range
//! tombstone that spans cuts is carried into every file it meets.

mod compaction_support;

use std::sync::Arc;

use compaction_support::*;
use strata_lsm::compaction::{flush_memtables, write_sorted_run};
use strata_lsm::{Memtable, MergingIterator, RangeTombstone, ValueKind, MAX_SEQNO};

#[test]
fn outputs_are_cut_at_the_target_between_user_keys() {
    let fs = mem_fs();
    let m = Memtable::new(1);
    let mut seqno = 0;
    // 40 keys of 5 versions each; every version stays (a snapshot each).
    for k in 0..40u32 {
        for _ in 0..5 {
            seqno += 1;
            m.insert(
                format!("key{k:03}").as_bytes(),
                seqno,
                ValueKind::Put,
                &[b'v'; 50],
            )
            .unwrap();
        }
    }
    let snapshots: Vec<u64> = (1..=seqno).collect();
    let n = Numbers::new(10);
    let next = || n.next();
    let target = 1000;
    let ctx = context(&*fs, &next, &snapshots, false, target);
    let mut it = MergingIterator::new(vec![m.iter()]);
    let out = write_sorted_run(&mut it, Vec::new(), &ctx).unwrap();
    assert!(out.len() >= 5, "{} files", out.len());
    let contents: Vec<_> = out.iter().map(|d| read_file(&*fs, d)).collect();
    check_ranges(&contents);
    let total: usize = contents.iter().map(|c| c.points.len()).sum();
    assert_eq!(total, 200);
    for c in &contents {
        // Every file holds whole keys: 5 versions of each.
        for (_, versions) in by_key(&c.points) {
            assert_eq!(versions.len(), 5);
        }
    }
    for d in &out[..out.len() - 1] {
        // Cut once past the target, within one key's versions of it.
        assert!(d.size >= target, "file {} of {} bytes", d.number, d.size);
        assert!(d.size < target * 3, "file {} of {} bytes", d.number, d.size);
    }
}

#[test]
fn a_tombstone_spanning_cuts_is_in_every_file_it_meets() {
    let fs = mem_fs();
    let m = Memtable::new(1);
    for k in 0..30u32 {
        m.insert(
            format!("key{k:03}").as_bytes(),
            100 + k as u64,
            ValueKind::Put,
            &[b'v'; 60],
        )
        .unwrap();
    }
    let t = RangeTombstone {
        start: b"key000".to_vec(),
        end: b"key999".to_vec(),
        seqno: 50,
    };
    let n = Numbers::new(10);
    let next = || n.next();
    let ctx = context(&*fs, &next, &[], false, 400);
    let mut it = MergingIterator::new(vec![m.iter()]);
    let out = write_sorted_run(&mut it, vec![t], &ctx).unwrap();
    assert!(out.len() >= 3);
    let contents: Vec<_> = out.iter().map(|d| read_file(&*fs, d)).collect();
    check_ranges(&contents);
    for c in &contents {
        assert_eq!(c.tombstones.len(), 1, "file {}", c.desc.number);
    }
    // The pieces tile the tombstone's range.
    assert_eq!(contents[0].tombstones[0].start, b"key000");
    assert_eq!(contents.last().unwrap().tombstones[0].end, b"key999");
    for w in contents.windows(2) {
        assert_eq!(w[0].tombstones[0].end, w[1].tombstones[0].start);
    }
    // A key of a lower level in a gap between files stays deleted.
    let below = read_file(
        &*fs,
        &write_sst(
            &*fs,
            1,
            &[(b"key015a".to_vec(), 10, ValueKind::Put, b"x".to_vec())],
            &[],
        ),
    );
    let mut files = contents.clone();
    files.push(below);
    assert_eq!(visible(&files, b"key015a", MAX_SEQNO), None);
}

#[test]
fn a_flush_writes_one_level0_file_from_several_memtables() {
    let fs = mem_fs();
    let older = Arc::new(Memtable::new(1));
    let newer = Arc::new(Memtable::new(2));
    for k in 0..50u32 {
        older
            .insert(
                format!("key{k:03}").as_bytes(),
                1 + k as u64,
                ValueKind::Put,
                b"old",
            )
            .unwrap();
    }
    newer
        .insert(b"key007", 100, ValueKind::Delete, b"")
        .unwrap();
    newer
        .insert(b"key010", 101, ValueKind::RangeDelete, b"key020")
        .unwrap();
    let n = Numbers::new(10);
    let next = || n.next();
    // A tiny target and bottommost: both ignored by a flush.
    let ctx = context(&*fs, &next, &[], true, 100);
    let (out, blobs) = flush_memtables(&[newer, older], &ctx).unwrap();
    assert!(
        blobs.is_empty(),
        "a run without separation wrote blob files"
    );
    assert_eq!(out.len(), 1);
    let c = read_file(&*fs, &out[0]);
    // The deletion stays (older files may hold the key); the versions it
    // and the tombstone hide are gone.
    assert!(c
        .points
        .iter()
        .any(|p| p.0 == b"key007" && p.2 == ValueKind::Delete));
    assert!(!c
        .points
        .iter()
        .any(|p| p.0 == b"key007" && p.2 == ValueKind::Put));
    assert!(!c
        .points
        .iter()
        .any(|p| p.0.as_slice() >= b"key010".as_slice() && p.0.as_slice() < b"key020".as_slice()));
    assert_eq!(c.tombstones.len(), 1);
    assert_eq!(
        visible(std::slice::from_ref(&c), b"key030", MAX_SEQNO),
        Some(b"old".to_vec())
    );
    assert_eq!(c.desc.largest_seqno, 101);
}
