//! Column family ids across drops and crashes.

mod db_support;

use db_support::{open, power_cut, small_options};
use strata_fs::{CrashMode, MemFs};
use strata_lsm::{ReadOptions, WriteOptions};

/// A family dropped with writes still in the WAL, then a new family: after
/// a crash, the new family must not hold the dropped one's writes (an id
/// taken again would let WAL replay hand them over).
#[test]
fn a_new_family_never_inherits_a_dropped_familys_writes() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).unwrap();
    let sync = WriteOptions {
        sync: true,
        ..WriteOptions::default()
    };
    let old = db.create_column_family("old").unwrap();
    db.put(&sync, &old, b"k", b"dropped").unwrap();
    db.drop_column_family(&old).unwrap();
    let new = db.create_column_family("new").unwrap();
    let new_id = new.id();
    assert_eq!(db.get(&ReadOptions::default(), &new, b"k").unwrap(), None);
    db.put(&sync, &new, b"other", b"x").unwrap();
    let fs2 = power_cut(&fs, CrashMode::DropUnsynced);
    drop(db);
    let db = open(&fs2, small_options()).unwrap();
    let new = db.column_family("new").unwrap();
    assert_eq!(new.id(), new_id);
    assert_eq!(db.get(&ReadOptions::default(), &new, b"k").unwrap(), None);
    assert_eq!(
        db.get(&ReadOptions::default(), &new, b"other").unwrap(),
        Some(b"x".to_vec())
    );
    assert!(db.column_family("old").is_none());
}

/// Families created and dropped among writes, flushes, compactions, clean
/// reopens and power cuts, against a model: the live families are exactly
/// the model's, each holds exactly what was written to it since it was
/// created (synced writes, so a power cut keeps them all), and a name
/// dropped and created again starts empty.
mod families_model {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use strata_fs::{CrashMode, MemFs};
    use strata_lsm::{Db, ReadOptions, WriteOptions};

    use super::db_support::{key, open, power_cut, scan_forward, small_options, value};

    const NAMES: [&str; 3] = ["a", "b", "c"];
    const KEYS: u32 = 24;

    #[derive(Debug, Clone)]
    enum Op {
        Create(usize),
        Drop(usize),
        Put(usize, u32, u64),
        Delete(usize, u32),
        Flush(usize),
        Compact(usize),
        Reopen,
        /// A power cut keeping every unsynced page, or a random subset of
        /// them (seeded): every write was synced, so nothing may go.
        PowerCut(Option<u64>),
    }

    fn op() -> impl Strategy<Value = Op> {
        let name = 0..NAMES.len();
        prop_oneof![
            3 => name.clone().prop_map(Op::Create),
            2 => name.clone().prop_map(Op::Drop),
            10 => (name.clone(), 0..KEYS, any::<u64>()).prop_map(|(n, k, s)| Op::Put(n, k, s)),
            2 => (name.clone(), 0..KEYS).prop_map(|(n, k)| Op::Delete(n, k)),
            2 => name.clone().prop_map(Op::Flush),
            1 => name.prop_map(Op::Compact),
            1 => Just(Op::Reopen),
            1 => proptest::option::of(any::<u64>()).prop_map(Op::PowerCut),
        ]
    }

    type Map = BTreeMap<Vec<u8>, Vec<u8>>;

    fn check(db: &Db, model: &BTreeMap<usize, Map>) {
        let mut live = db.column_families();
        live.retain(|n| n != "default");
        live.sort();
        let want: Vec<String> = model.keys().map(|&i| NAMES[i].to_string()).collect();
        assert_eq!(live, want, "live families");
        for (&i, map) in model {
            let cf = db.column_family(NAMES[i]).expect("a live family");
            let mut it = db.iter(&ReadOptions::default(), &cf).expect("iter");
            let got: Map = scan_forward(&mut it).into_iter().collect();
            assert_eq!(&got, map, "family {}", NAMES[i]);
        }
    }

    /// `PROPTEST_CASES` runs more cases than CI's (a soak).
    fn cases(default: u32) -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    }

    fn run(ops: Vec<Op>) {
        let sync = WriteOptions {
            sync: true,
            ..WriteOptions::default()
        };
        let mut fs = MemFs::new();
        let mut db = open(&fs, small_options()).expect("open");
        let mut model: BTreeMap<usize, Map> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Create(i) => {
                    let made = db.create_column_family(NAMES[i]);
                    assert_eq!(made.is_ok(), !model.contains_key(&i), "{made:?}");
                    model.entry(i).or_default();
                }
                Op::Drop(i) => match db.column_family(NAMES[i]) {
                    Some(cf) => {
                        db.drop_column_family(&cf).expect("drop");
                        assert!(model.remove(&i).is_some());
                        // A dropped handle refuses writes.
                        assert!(db.put(&sync, &cf, b"k", b"v").is_err());
                    }
                    None => assert!(!model.contains_key(&i)),
                },
                Op::Put(i, ..) | Op::Delete(i, _) if !model.contains_key(&i) => {}
                Op::Put(i, k, seed) => {
                    let cf = db.column_family(NAMES[i]).expect("live");
                    let v = value(seed, 40);
                    db.put(&sync, &cf, &key(k), &v).expect("put");
                    model.get_mut(&i).unwrap().insert(key(k), v);
                }
                Op::Delete(i, k) => {
                    let cf = db.column_family(NAMES[i]).expect("live");
                    db.delete(&sync, &cf, &key(k)).expect("delete");
                    model.get_mut(&i).unwrap().remove(&key(k));
                }
                Op::Flush(i) | Op::Compact(i) if !model.contains_key(&i) => {}
                Op::Flush(i) => {
                    let cf = db.column_family(NAMES[i]).expect("live");
                    db.flush(&cf, true).expect("flush");
                }
                Op::Compact(i) => {
                    let cf = db.column_family(NAMES[i]).expect("live");
                    db.compact_range(&cf, None, None).expect("compact");
                }
                Op::Reopen => {
                    db.close().expect("close");
                    db = open(&fs, small_options()).expect("reopen");
                }
                Op::PowerCut(seed) => {
                    let mode = match seed {
                        None => CrashMode::DropUnsynced,
                        Some(seed) => CrashMode::KeepRandomPages { seed },
                    };
                    let survivor = power_cut(&fs, mode);
                    drop(db);
                    fs = survivor;
                    db = open(&fs, small_options()).expect("open after a power cut");
                }
            }
            check(&db, &model);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: cases(32), ..ProptestConfig::default() })]

        #[test]
        fn families_created_and_dropped_match_the_model(ops in prop::collection::vec(op(), 1..60)) {
            run(ops);
        }
    }
}

/// Families created, written, flushed and dropped in a loop on one thread
/// while another writes, flushes and compacts the default family: every
/// write to the default family reads back, before and after a reopen and a
/// power cut, and only the families that were not dropped remain.
#[test]
fn families_come_and_go_while_another_family_is_written() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let fs = MemFs::new();
    let db = open(&fs, small_options()).unwrap();
    let sync = WriteOptions {
        sync: true,
        ..WriteOptions::default()
    };
    let done = Arc::new(AtomicBool::new(false));
    let churn = {
        let (db, done) = (db.clone(), done.clone());
        std::thread::spawn(move || {
            let mut round = 0u32;
            while !done.load(Ordering::Relaxed) {
                let name = format!("tmp{}", round % 3);
                let cf = db.create_column_family(&name).unwrap();
                for i in 0..20u32 {
                    db.put(&sync, &cf, &db_support::key(i), b"tmp").unwrap();
                }
                if round.is_multiple_of(2) {
                    db.flush(&cf, true).unwrap();
                }
                db.drop_column_family(&cf).unwrap();
                round += 1;
            }
            // One left alive, to find after the reopen.
            let keep = db.create_column_family("kept").unwrap();
            db.put(&sync, &keep, b"k", b"kept").unwrap();
            round
        })
    };
    let cf = db.default_column_family();
    for i in 0..600u32 {
        db.put(
            &sync,
            &cf,
            &db_support::key(i),
            &db_support::value(u64::from(i), 64),
        )
        .unwrap();
        if i % 150 == 149 {
            db.flush(&cf, true).unwrap();
            db.compact_range(&cf, None, None).unwrap();
        }
    }
    done.store(true, Ordering::Relaxed);
    let rounds = churn.join().unwrap();
    assert!(rounds > 0);
    let check = |db: &strata_lsm::Db| {
        let cf = db.default_column_family();
        for i in 0..600u32 {
            assert_eq!(
                db.get(&ReadOptions::default(), &cf, &db_support::key(i))
                    .unwrap(),
                Some(db_support::value(u64::from(i), 64)),
                "key {i}"
            );
        }
        let mut names = db.column_families();
        names.sort();
        assert_eq!(names, ["default", "kept"]);
        let kept = db.column_family("kept").unwrap();
        assert_eq!(
            db.get(&ReadOptions::default(), &kept, b"k").unwrap(),
            Some(b"kept".to_vec())
        );
        assert_eq!(
            db.get(&ReadOptions::default(), &kept, &db_support::key(0))
                .unwrap(),
            None
        );
    };
    check(&db);
    let cut = power_cut(
        &fs,
        CrashMode::KeepRandomPages {
            seed: u64::from(rounds),
        },
    );
    db.close().unwrap();
    let db = open(&fs, small_options()).unwrap();
    check(&db);
    drop(db);
    let db = open(&cut, small_options()).unwrap();
    check(&db);
}
