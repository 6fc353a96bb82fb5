//! The core correctness test of compaction: random puts, deletes and range
//! deletes at increasing seqnos, spread over several input files (or
//! memtables) with an older file below that the compaction does not touch,
//! random live snapshots, bottommost or not. After the sorted run is
//! written, a reader at every snapshot and at the latest seqno sees, for
//! every key (those written and the gaps between them), exactly what it saw
//! through the inputs; a deleted key never comes back. It also checks that
//! the garbage the snapshot stripes allow is gone, that at the bottom the
//! version older than every snapshot is stored at seqno 0, and that the outputs'
//! key ranges are disjoint, cover what they hold, and install in L1.

mod compaction_support;

use std::sync::Arc;

use compaction_support::*;
use proptest::prelude::*;
use strata_lsm::compaction::{
    run_compaction, write_sorted_run_with_stats, Compaction, CompactionReason,
};
use strata_lsm::{
    InternalIterator, Memtable, MergingIterator, ObsoleteFiles, RangeTombstone, SeqNo, SstReader,
    ValueKind, Version, VersionBuilder, VersionEdit, MAX_SEQNO,
};

#[derive(Debug, Clone)]
enum Op {
    Put(u8, usize),
    Delete(u8),
    RangeDelete(u8, u8),
}

fn key(k: u8) -> Vec<u8> {
    format!("k{k:02}").into_bytes()
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..10, 1usize..40).prop_map(|(k, n)| Op::Put(k, n)),
        2 => (0u8..10).prop_map(Op::Delete),
        1 => (0u8..10, 1u8..4).prop_map(|(k, n)| Op::RangeDelete(k, k + n)),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    ops: Vec<Op>,
    /// Source of each op: 0 is the file below (when not bottommost).
    sources: Vec<usize>,
    snapshots: Vec<SeqNo>,
    bottommost: bool,
    memtables: bool,
    target: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..60)
        .prop_flat_map(|n| {
            (
                proptest::collection::vec(op(), n),
                proptest::collection::vec(0usize..4, n),
                proptest::collection::vec(0..(n as SeqNo + 2), 0..4),
                any::<bool>(),
                any::<bool>(),
                prop_oneof![Just(150u64), Just(400), Just(1 << 20)],
            )
        })
        .prop_map(
            |(ops, sources, snapshots, bottommost, memtables, target)| Case {
                ops,
                sources,
                snapshots,
                bottommost,
                memtables,
                target,
            },
        )
}

/// The versions of each source; seqno i + 1 for op i.
fn split(case: &Case) -> Vec<(Vec<Point>, Vec<RangeTombstone>)> {
    let mut sources = vec![(Vec::new(), Vec::new()); 4];
    for (i, (op, &src)) in case.ops.iter().zip(&case.sources).enumerate() {
        let seqno = i as SeqNo + 1;
        // Bottommost: nothing below; source 0 joins the inputs.
        let (points, tombstones): &mut (Vec<Point>, Vec<RangeTombstone>) = &mut sources[src];
        match op {
            Op::Put(k, n) => points.push((
                key(*k),
                seqno,
                ValueKind::Put,
                vec![b'a' + (i % 26) as u8; *n],
            )),
            Op::Delete(k) => points.push((key(*k), seqno, ValueKind::Delete, Vec::new())),
            Op::RangeDelete(a, b) => tombstones.push(RangeTombstone {
                start: key(*a),
                end: key(*b),
                seqno,
            }),
        }
    }
    sources
}

fn check(case: Case) -> Result<(), TestCaseError> {
    let fs = mem_fs();
    let sources = split(&case);
    let all_points: Vec<Point> = sources.iter().flat_map(|s| s.0.clone()).collect();
    let all_tombstones: Vec<RangeTombstone> = sources.iter().flat_map(|s| s.1.clone()).collect();
    // The file below the compaction, untouched by it; its source joins the
    // inputs when the compaction is bottommost.
    let below_src = usize::from(!case.bottommost);
    let mut below = Vec::new();
    if !case.bottommost && (!sources[0].0.is_empty() || !sources[0].1.is_empty()) {
        below.push(read_file(
            &*fs,
            &write_sst(&*fs, 1, &sources[0].0, &sources[0].1),
        ));
    }
    let inputs = &sources[below_src..];
    let numbers = Numbers::new(100);
    let next = || numbers.next();
    let ctx = context(&*fs, &next, &case.snapshots, case.bottommost, case.target);

    let outputs = if case.memtables {
        let mems: Vec<Memtable> = inputs
            .iter()
            .enumerate()
            .map(|(i, (points, tombstones))| {
                let m = Memtable::new(i as u64 + 1);
                for (k, s, kind, v) in points {
                    m.insert(k, *s, *kind, v).unwrap();
                }
                for t in tombstones {
                    m.insert(&t.start, t.seqno, ValueKind::RangeDelete, &t.end)
                        .unwrap();
                }
                m
            })
            .collect();
        let mut merged = MergingIterator::new(mems.iter().map(|m| m.iter()).collect());
        let tombstones = mems
            .iter()
            .flat_map(|m| m.range_tombstones(MAX_SEQNO))
            .collect();
        let (files, stats) = write_sorted_run_with_stats(&mut merged, tombstones, &ctx).unwrap();
        prop_assert_eq!(stats.entries_in, stats.entries_out + stats.entries_dropped);
        files
    } else {
        let mut descs = Vec::new();
        for (i, (points, tombstones)) in inputs.iter().enumerate() {
            if !points.is_empty() || !tombstones.is_empty() {
                descs.push(write_sst(&*fs, 10 + i as u64, points, tombstones));
            }
        }
        // Inputs in L0 (they overlap), output to L1, the file below in L2.
        let (queue, _rx) = ObsoleteFiles::channel();
        let mut edit = VersionEdit {
            next_file_number: Some(100),
            ..VersionEdit::default()
        };
        for d in &descs {
            edit.add_file(0, d.clone());
        }
        for f in &below {
            edit.add_file(2, f.desc.clone());
        }
        let base = Arc::new(Version::new(0, 7, queue).unwrap());
        let mut b = VersionBuilder::new(&base);
        b.apply(&edit).unwrap();
        let v = b.build().version;
        let c = Compaction {
            column_family: 0,
            input_level: 0,
            output_level: 1,
            inputs: v.level(0).unwrap().iter().cloned().collect(),
            overlapping: Vec::new(),
            // The files below guide the cuts (outputs close at their bounds).
            grandparents: v
                .level(2)
                .map(|l| l.iter().cloned().collect())
                .unwrap_or_default(),
            bottommost: case.bottommost,
            reason: CompactionReason::Manual,
            score: 0.0,
            trivial_move: false,
        };
        let open = |f: &strata_lsm::FileMeta| {
            SstReader::open(&*fs, &path_of(f.number()), f.number(), None)
        };
        let (edit, stats) = run_compaction(&c, &open, &ctx).unwrap();
        prop_assert_eq!(stats.files_in as usize, descs.len());
        prop_assert_eq!(edit.deleted.len(), descs.len());
        // The outputs install in L1 beside the file below.
        let mut b = VersionBuilder::new(&v);
        b.apply(&edit).unwrap();
        let after = b.build().version;
        after.check().unwrap();
        prop_assert_eq!(after.level_len(0), 0);
        edit.added.iter().map(|(_, d)| d.clone()).collect()
    };

    let contents: Vec<_> = outputs.iter().map(|d| read_file(&*fs, d)).collect();
    check_ranges(&contents);
    let mut readable = contents.clone();
    readable.extend(below.iter().cloned());

    // Every snapshot and the latest view see what the inputs showed them.
    let mut views: Vec<SeqNo> = case.snapshots.clone();
    views.push(MAX_SEQNO);
    let mut keys: Vec<Vec<u8>> = (0u8..14).map(key).collect();
    // Keys in the gaps between the written keys.
    keys.extend((0u8..14).map(|k| {
        let mut g = key(k);
        g.push(b'~');
        g
    }));
    for &s in &views {
        for k in &keys {
            let want = model_visible(&all_points, &all_tombstones, k, s);
            let got = visible(&readable, k, s);
            prop_assert_eq!(
                &got,
                &want,
                "key {:?} at snapshot {}",
                String::from_utf8_lossy(k),
                s
            );
        }
    }

    // The garbage the stripes allow is gone: at most one version per
    // stripe; at bottommost no deletion or tombstone older than every
    // snapshot.
    let mut stripes: Vec<SeqNo> = case.snapshots.clone();
    stripes.sort();
    stripes.dedup();
    let stripe_of = |s: SeqNo| stripes.partition_point(|&u| u < s);
    let out_points: Vec<Point> = contents.iter().flat_map(|c| c.points.clone()).collect();
    for (k, versions) in by_key(&out_points) {
        let mut seen = std::collections::HashSet::new();
        for (s, kind) in versions {
            prop_assert!(
                seen.insert(stripe_of(s)),
                "two versions of {:?} in one stripe",
                k
            );
            if case.bottommost && stripe_of(s) == 0 {
                prop_assert_ne!(
                    kind,
                    ValueKind::Delete,
                    "a droppable deletion of {:?} kept",
                    k
                );
                // Every reader sees it: stored at seqno 0, which compresses.
                prop_assert_eq!(s, 0, "{:?} kept its seqno at the bottom", k);
            } else {
                prop_assert!(s > 0, "{:?} lost the seqno a snapshot needs", k);
            }
        }
    }
    if case.bottommost {
        for c in &contents {
            for t in &c.tombstones {
                prop_assert!(
                    stripe_of(t.seqno) > 0,
                    "a droppable tombstone kept: {:?}",
                    t
                );
            }
        }
    }
    // Outputs are cut at the target, never inside a user key's versions.
    if case.target < 1 << 20 {
        for w in contents.windows(2) {
            let (a, b) = (w[0].points.last(), w[1].points.first());
            if let (Some(a), Some(b)) = (a, b) {
                prop_assert_ne!(&a.0, &b.0);
            }
        }
    } else {
        prop_assert!(contents.len() <= 1);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn every_snapshot_reads_the_same_after_compaction(case in case()) {
        check(case)?;
    }
}

/// A deletion above a put in another input, both older than every
/// snapshot, at bottommost: both go, and the key stays deleted.
#[test]
fn a_deleted_key_never_comes_back() {
    let case = Case {
        ops: vec![
            Op::Put(1, 10),
            Op::Put(2, 5),
            Op::Delete(1),
            Op::RangeDelete(2, 3),
        ],
        sources: vec![1, 2, 3, 1],
        snapshots: vec![],
        bottommost: true,
        memtables: false,
        target: 150,
    };
    check(case).unwrap();
}

#[test]
fn memtable_iterators_feed_a_run() {
    // A smoke check that the merging iterator over memtables is an input.
    let m = Memtable::new(1);
    m.insert(b"a", 1, ValueKind::Put, b"x").unwrap();
    let mut it = MergingIterator::new(vec![m.iter()]);
    it.seek_to_first().unwrap();
    assert!(it.valid());
}
