//! The engine against a model (`BTreeMap` per column family), driven by
//! proptest: puts, deletes and range deletes in atomic batches across two
//! families, snapshots taken and released, point reads and scans both ways
//! with bounds (at the latest state and at snapshots), flushes, manual
//! compactions, clean reopens and power cuts after a WAL sync, key-value
//! separation switched on and off online (and, in the second property, on
//! from the start, so values on both sides of the threshold). The options
//! are tiny, so memtable switches, background flushes and compactions run
//! all the time underneath.

mod db_support;

use db_support::*;
use proptest::prelude::*;
use strata_fs::{CrashMode, MemFs};
use strata_lsm::{DbIterator, Options, ReadOptions, Snapshot, ValueKind, WriteBatch, WriteOptions};

#[derive(Debug, Clone)]
enum Change {
    Put(usize, u32, u64, usize),
    Delete(usize, u32),
    DeleteRange(usize, u32, u32),
}

#[derive(Debug, Clone)]
enum Op {
    Write(Vec<Change>, bool),
    Get(usize, u32, Option<usize>),
    Scan {
        cf: usize,
        lower: Option<u32>,
        upper: Option<u32>,
        reverse: bool,
        snapshot: Option<usize>,
        /// `ReadOptions::lazy_values`, each value read with `prepare_value`.
        lazy: bool,
    },
    TakeSnapshot,
    ReleaseSnapshot(usize),
    Flush(usize),
    Compact(usize, Option<(u32, u32)>),
    Reopen,
    PowerCut(u64),
    /// Key-value separation switched online: `None` off, else the threshold.
    SetMinBlobSize(usize, Option<u64>),
}

const KEYS: u32 = 40;

fn change() -> impl Strategy<Value = Change> {
    let cf = 0..FAMILIES;
    prop_oneof![
        6 => (cf.clone(), 0..KEYS, any::<u64>(), 0usize..600).prop_map(|(c, k, s, l)| Change::Put(c, k, s, l)),
        2 => (cf.clone(), 0..KEYS).prop_map(|(c, k)| Change::Delete(c, k)),
        1 => (cf, 0..KEYS, 0..KEYS).prop_map(|(c, a, b)| Change::DeleteRange(c, a.min(b), a.max(b))),
    ]
}

/// Every key an iterator yields, first to last (or last to first when
/// `reverse`, returned in key order), with its value read by
/// `prepare_value`: a lazy iterator's moves leave separated values empty.
fn scan_prepared(it: &mut DbIterator, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    if reverse {
        it.seek_to_last().expect("seek_to_last");
    } else {
        it.seek_to_first().expect("seek_to_first");
    }
    while it.valid() {
        if it.kind() == ValueKind::BlobIndex {
            assert!(it.value().is_empty(), "a lazy iterator's move read a value");
        }
        it.prepare_value().expect("prepare_value");
        out.push((it.key().to_vec(), it.value().to_vec()));
        if reverse {
            it.prev().expect("prev");
        } else {
            it.next().expect("next");
        }
    }
    if reverse {
        out.reverse();
    }
    out
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (prop::collection::vec(change(), 1..6), any::<bool>()).prop_map(|(c, s)| Op::Write(c, s)),
        8 => (0..FAMILIES, 0..KEYS, prop::option::of(0usize..4)).prop_map(|(c, k, s)| Op::Get(c, k, s)),
        5 => (0..FAMILIES, prop::option::of(0..KEYS), prop::option::of(0..KEYS), any::<bool>(), prop::option::of(0usize..4), any::<bool>())
            .prop_map(|(cf, lower, upper, reverse, snapshot, lazy)| Op::Scan { cf, lower, upper, reverse, snapshot, lazy }),
        3 => Just(Op::TakeSnapshot),
        2 => (0usize..4).prop_map(Op::ReleaseSnapshot),
        2 => (0..FAMILIES).prop_map(Op::Flush),
        1 => (0..FAMILIES, prop::option::of((0..KEYS, 0..KEYS))).prop_map(|(c, r)| Op::Compact(c, r.map(|(a, b)| (a.min(b), a.max(b))))),
        1 => Just(Op::Reopen),
        1 => any::<u64>().prop_map(Op::PowerCut),
        1 => (0..FAMILIES, prop::option::of(1u64..700)).prop_map(|(c, m)| Op::SetMinBlobSize(c, m)),
    ]
}

fn all_keys() -> Vec<Vec<u8>> {
    (0..KEYS).map(key).collect()
}

/// `small_options`, with values of 100 bytes or more separated into blob
/// files of small blocks.
fn separated_options() -> Options {
    let mut o = small_options();
    o.default_column_family.blob.min_blob_size = Some(100);
    o.default_column_family.blob.block_size_bytes = 1024;
    o
}

fn run(ops: Vec<Op>, options: fn() -> Options) {
    let small_options = options;
    let mut fs = MemFs::new();
    let mut db = open(&fs, small_options()).expect("open");
    let mut cfs = families(&db);
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let latest = ReadOptions::default();
    for op in ops {
        match op {
            Op::Write(changes, sync) => {
                let mut batch = WriteBatch::new();
                for c in &changes {
                    match *c {
                        Change::Put(cf, k, seed, len) => {
                            let v = value(seed, len);
                            batch.put(cfs[cf].id(), &key(k), &v);
                            model.maps[cf].insert(key(k), v);
                        }
                        Change::Delete(cf, k) => {
                            batch.delete(cfs[cf].id(), &key(k));
                            model.maps[cf].remove(&key(k));
                        }
                        Change::DeleteRange(cf, a, b) => {
                            if a == b {
                                continue;
                            }
                            batch.delete_range(cfs[cf].id(), &key(a), &key(b));
                            model.delete_range(cf, &key(a), &key(b));
                        }
                    }
                }
                let options = WriteOptions {
                    sync,
                    ..WriteOptions::default()
                };
                db.write(&options, &batch).expect("write");
            }
            Op::Get(cf, k, snap) => {
                let (read, want) = match snap.and_then(|i| snapshots.get(i)) {
                    Some((s, m)) => (
                        ReadOptions {
                            snapshot: Some(s.clone()),
                            ..ReadOptions::default()
                        },
                        m.maps[cf].get(&key(k)).cloned(),
                    ),
                    None => (latest.clone(), model.maps[cf].get(&key(k)).cloned()),
                };
                assert_eq!(db.get(&read, &cfs[cf], &key(k)).expect("get"), want);
            }
            Op::Scan {
                cf,
                lower,
                upper,
                reverse,
                snapshot,
                lazy,
            } => {
                let (snap, map) = match snapshot.and_then(|i| snapshots.get(i)) {
                    Some((s, m)) => (Some(s.clone()), &m.maps[cf]),
                    None => (None, &model.maps[cf]),
                };
                let read = ReadOptions {
                    snapshot: snap,
                    lower_bound: lower.map(key),
                    upper_bound: upper.map(key),
                    prefix: None,
                    key_only: false,
                    lazy_values: lazy,
                };
                let bounds_inverted = matches!((lower, upper), (Some(l), Some(u)) if l > u);
                let it = db.iter(&read, &cfs[cf]);
                if bounds_inverted {
                    assert!(it.is_err(), "inverted bounds must be refused");
                    continue;
                }
                let mut it = it.expect("iter");
                let want: Vec<(Vec<u8>, Vec<u8>)> = map
                    .iter()
                    .filter(|(k, _)| lower.is_none_or(|l| **k >= key(l)))
                    .filter(|(k, _)| upper.is_none_or(|u| **k < key(u)))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let got = match (lazy, reverse) {
                    (true, _) => scan_prepared(&mut it, reverse),
                    (false, true) => scan_backward(&mut it),
                    (false, false) => scan_forward(&mut it),
                };
                assert_eq!(got, want);
            }
            Op::TakeSnapshot => {
                if snapshots.len() < 4 {
                    snapshots.push((db.snapshot(), model.clone()));
                }
            }
            Op::ReleaseSnapshot(i) => {
                if i < snapshots.len() {
                    snapshots.remove(i);
                }
            }
            Op::Flush(cf) => db.flush(&cfs[cf], true).expect("flush"),
            Op::Compact(cf, range) => {
                let (a, b) = match range {
                    Some((a, b)) => (Some(key(a)), Some(key(b))),
                    None => (None, None),
                };
                db.compact_range(&cfs[cf], a.as_deref(), b.as_deref())
                    .expect("compact_range");
            }
            Op::Reopen => {
                snapshots.clear();
                db.close().expect("close");
                db = open(&fs, small_options()).expect("reopen");
                cfs = families(&db);
            }
            Op::PowerCut(seed) => {
                snapshots.clear();
                db.sync_wal().expect("sync_wal");
                let cut = power_cut(&fs, CrashMode::KeepRandomPages { seed });
                drop(db);
                fs = cut;
                db = open(&fs, small_options()).expect("open after a power cut");
                cfs = families(&db);
            }
            Op::SetMinBlobSize(cf, min) => db.set_min_blob_size(&cfs[cf], min).expect("set"),
        }
    }
    check_db(&db, &model, &latest, &all_keys());
    for (s, m) in &snapshots {
        let read = ReadOptions {
            snapshot: Some(s.clone()),
            ..ReadOptions::default()
        };
        check_db(&db, m, &read, &all_keys());
    }
    snapshots.clear();
    db.close().expect("close");
    let db = open(&fs, small_options()).expect("final reopen");
    check_db(&db, &model, &latest, &all_keys());
}

/// `PROPTEST_CASES` runs more cases than CI's (a soak).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn the_engine_matches_the_model(ops in prop::collection::vec(op(), 1..120)) {
        run(ops, small_options);
    }

    #[test]
    fn the_engine_matches_the_model_with_separated_values(ops in prop::collection::vec(op(), 1..120)) {
        run(ops, separated_options);
    }
}
