//! Power cuts on `MemFs`: a crash keeps any subset of the unsynced pages
//! (or a prefix of the unsynced writes, or none of them). After each, the
//! default recovery mode opens; every write acknowledged with `sync` (and
//! every write before it) is there; and what is there is exactly a prefix
//! of the writes: a batch is whole or absent, and no write survives one
//! that was lost. Small options keep flushes and compactions running while
//! the writes go on, so the cut lands in WAL, SST and manifest writes alike.

mod db_support;

use db_support::*;
use strata_fs::{CrashMode, MemFs};
use strata_lsm::{Error, Options, ReadOptions, RecoveryMode, WriteBatch};

const RING: u32 = 40;

/// Write `i` puts its value under `key(i % RING)` in both families and
/// records `i` under "last" in the default family, all in one batch.
fn write(db: &strata_lsm::Db, i: u64, sync: bool) {
    let cfs = families(db);
    let mut b = WriteBatch::new();
    let v = value(i, 100 + (i % 300) as usize);
    b.put(cfs[0].id(), &key((i % u64::from(RING)) as u32), &v);
    b.put(cfs[1].id(), &key((i % u64::from(RING)) as u32), &v);
    if i % 17 == 5 {
        let a = key(((i * 7) % u64::from(RING)) as u32);
        let z = key(((i * 7) % u64::from(RING) + 3).min(u64::from(RING)) as u32);
        b.delete_range(cfs[1].id(), &a, &z);
    }
    write_counted(db, b, i, sync);
}

/// The model after writes `0..n`.
fn model_after(n: u64) -> Model {
    let mut m = Model::new();
    for i in 0..n {
        let v = value(i, 100 + (i % 300) as usize);
        let k = key((i % u64::from(RING)) as u32);
        m.maps[0].insert(k.clone(), v.clone());
        m.maps[1].insert(k, v);
        if i % 17 == 5 {
            let a = key(((i * 7) % u64::from(RING)) as u32);
            let z = key(((i * 7) % u64::from(RING) + 3).min(u64::from(RING)) as u32);
            m.delete_range(1, &a, &z);
        }
        m.maps[0].insert(b"last".to_vec(), i.to_le_bytes().to_vec());
    }
    m
}

/// Runs `rounds` of writes and crashes on one directory.
fn crash_rounds(seed: u64, rounds: u64, mode: impl Fn(u64) -> CrashMode) {
    let mut fs = MemFs::new();
    let mut written = 0u64;
    for round in 0..rounds {
        let db = open(&fs, small_options()).expect("open after a power cut");
        let have = recovered_count(&db);
        assert!(have <= written, "more writes recovered than made");
        check_db(
            &db,
            &model_after(have),
            &ReadOptions::default(),
            &keys_and_last(RING),
        );
        written = have;
        let mut synced = have;
        let n = 40 + (seed * 31 + round * 7) % 80;
        for _ in 0..n {
            let sync = (written + seed).is_multiple_of(9);
            write(&db, written, sync);
            written += 1;
            if sync {
                synced = written;
            }
        }
        let cut = power_cut(&fs, mode(seed * 1000 + round));
        drop(db);
        fs = cut;
        let db = open(&fs, small_options()).expect("open after a power cut");
        let have = recovered_count(&db);
        assert!(
            have >= synced,
            "seed {seed} round {round}: {have} writes recovered, {synced} were synced"
        );
        assert!(have <= written);
        check_db(
            &db,
            &model_after(have),
            &ReadOptions::default(),
            &keys_and_last(RING),
        );
        written = have;
        db.close().expect("close");
    }
}

#[test]
fn a_cut_keeping_random_pages_recovers_a_prefix_with_every_synced_write() {
    for seed in 0..12 {
        crash_rounds(seed, 3, |s| CrashMode::KeepRandomPages { seed: s });
    }
}

#[test]
fn a_cut_keeping_a_random_prefix_recovers_a_prefix_with_every_synced_write() {
    for seed in 0..8 {
        crash_rounds(seed, 3, |s| CrashMode::KeepRandomPrefix { seed: s });
    }
}

#[test]
fn a_cut_dropping_everything_unsynced_recovers_every_synced_write() {
    for seed in 0..4 {
        crash_rounds(seed, 3, |_| CrashMode::DropUnsynced);
    }
}

#[test]
fn absolute_consistency_opens_after_a_clean_cut_and_refuses_only_with_corruption() {
    let absolute = || Options {
        recovery_mode: RecoveryMode::AbsoluteConsistency,
        ..small_options()
    };
    // Nothing torn: every mode opens.
    let fs = MemFs::new();
    let db = open(&fs, absolute()).expect("open");
    for i in 0..50 {
        write(&db, i, i == 30);
    }
    let fs = power_cut(&fs, CrashMode::DropUnsynced);
    drop(db);
    let db = open(&fs, absolute()).expect("absolute open after dropping unsynced writes");
    assert!(recovered_count(&db) >= 31);
    drop(db);
    // Torn tails: open with the right prefix, or refuse with Corruption.
    for seed in 0..10 {
        let fs = MemFs::new();
        let db = open(&fs, absolute()).expect("open");
        for i in 0..60 {
            write(&db, i, i == 20);
        }
        let fs = power_cut(&fs, CrashMode::KeepRandomPages { seed });
        drop(db);
        match open(&fs, absolute()) {
            Ok(db) => {
                let have = recovered_count(&db);
                assert!(have >= 21);
                check_db(
                    &db,
                    &model_after(have),
                    &ReadOptions::default(),
                    &keys_and_last(RING),
                );
            }
            Err(Error::Corruption { .. }) => {
                // The default mode recovers it.
                let db = open(&fs, small_options()).expect("default mode opens");
                assert!(recovered_count(&db) >= 21);
            }
            Err(e) => panic!("absolute mode failed with {e}"),
        }
    }
}
