//! The WAL switch at a memtable switch stays off the write path: the next
//! file is made ahead and the old one is closed durably by the WAL thread.
//! Writes without sync go on while the old file's sync is slow; a write
//! with sync waits for it (a durable write in the new file needs the old
//! one durable first); a power cut before the close recovers a prefix.

mod db_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use db_support::*;
use strata_fs::{CrashMode, FaultFs, FileSystem, MemFs, Op};
use strata_lsm::{Db, Hooks, ReadOptions, WriteOptions};

fn wal_files(mem: &MemFs) -> Vec<String> {
    let mut names: Vec<String> = mem
        .list(std::path::Path::new(DIR))
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".wal"))
        .collect();
    names.sort();
    names
}

fn open_faulty(ffs: &FaultFs) -> Arc<Db> {
    let db = Db::open_with(
        Arc::new(ffs.clone()),
        DIR,
        small_options(),
        Hooks::default(),
    )
    .expect("open");
    Arc::new(db)
}

fn put(db: &Db, i: u32, sync: bool) {
    let w = WriteOptions {
        sync,
        ..WriteOptions::default()
    };
    db.put(
        &w,
        &db.default_column_family(),
        &key(i),
        &value(u64::from(i), 100),
    )
    .expect("put");
}

/// Regression: the leader synced the old WAL file, created the next one and
/// synced the directory inside the memtable switch, holding every writer
/// (up to 33 ms behind compaction writes on a 2-core machine).
#[test]
fn a_slow_sync_of_the_old_wal_holds_no_unsynced_write() {
    let mem = MemFs::new();
    let ffs = FaultFs::new(Arc::new(mem.clone()));
    let db = open_faulty(&ffs);
    for i in 0..20 {
        put(&db, i, false);
    }
    // The file written now is the oldest; its sync waits from here on.
    let old = wal_files(&mem).into_iter().next().expect("a WAL file");
    let held = ffs.hold(Op::SyncData, &old);
    // A flush request switches the memtable (and the WAL file) in the
    // write queue, then leaves the flush to the background.
    let switching = {
        let db = db.clone();
        std::thread::spawn(move || db.flush(&db.default_column_family(), false))
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !switching.is_finished() {
        assert!(
            Instant::now() < deadline,
            "the memtable switch waited for the old WAL file's sync"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    switching.join().expect("flush thread").expect("flush");
    assert!(
        held.wait_until_held(Duration::from_secs(10)),
        "the WAL thread never synced the old file"
    );
    // Unsynced writes go on into the new file...
    for i in 20..40 {
        put(&db, i, false);
    }
    // ... and a synced one waits until the old file is durable.
    let syncing = {
        let db = db.clone();
        std::thread::spawn(move || put(&db, 40, true))
    };
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !syncing.is_finished(),
        "a synced write returned before the older WAL file was durable"
    );
    drop(held);
    syncing.join().expect("synced writer");
    let cf = db.default_column_family();
    for i in 0..=40 {
        assert_eq!(
            db.get(&ReadOptions::default(), &cf, &key(i)).expect("get"),
            Some(value(u64::from(i), 100))
        );
    }
}

/// A power cut while the old file's close is held: whatever pages the cut
/// keeps, the default mode opens and what it recovers is a prefix of the
/// writes that holds every write before the switch that was synced.
#[test]
fn a_power_cut_before_the_old_wal_is_closed_recovers_a_prefix() {
    for seed in 0..40u64 {
        let mem = MemFs::new();
        let ffs = FaultFs::new(Arc::new(mem.clone()));
        let db = open_faulty(&ffs);
        for i in 0..10 {
            put(&db, i, i == 9);
        }
        for i in 10..20 {
            put(&db, i, false);
        }
        let old = wal_files(&mem).into_iter().next().expect("a WAL file");
        let held = ffs.hold(Op::SyncData, &old);
        db.flush(&db.default_column_family(), false)
            .expect("switch");
        for i in 20..30 {
            put(&db, i, false);
        }
        assert!(held.wait_until_held(Duration::from_secs(10)));
        mem.crash(CrashMode::KeepRandomPages { seed });
        drop(held);
        drop(db);
        let db = open(&mem, small_options()).expect("the default mode opens");
        let cf = db.default_column_family();
        let present: Vec<bool> = (0..30)
            .map(|i| {
                db.get(&ReadOptions::default(), &cf, &key(i))
                    .expect("get")
                    .is_some()
            })
            .collect();
        let n = present.iter().take_while(|p| **p).count();
        assert!(n >= 10, "seed {seed}: synced writes lost ({n} recovered)");
        assert!(
            present[n..].iter().all(|p| !p),
            "seed {seed}: not a prefix: {present:?}"
        );
    }
}
