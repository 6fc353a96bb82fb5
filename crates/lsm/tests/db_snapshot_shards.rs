//! Snapshots are kept in shards, one per thread round-robin
//! (`db/snapshot.rs`). Snapshots taken on many threads, each at its own
//! seqno, are all counted, all kept by compaction (each still reads the
//! version it saw after a full compaction), and all released when dropped,
//! whichever thread drops them.

mod db_support;

use std::sync::mpsc;
use std::thread;

use db_support::*;
use strata_fs::MemFs;
use strata_lsm::{ReadOptions, Snapshot, WriteOptions};

#[test]
fn snapshots_of_many_threads_are_counted_kept_and_released() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cf = db.default_column_family();
    let threads = 20u32;
    let mut snapshots: Vec<(u32, Snapshot)> = Vec::new();
    thread::scope(|s| {
        for i in 0..threads {
            db.put(
                &WriteOptions::default(),
                &cf,
                b"k",
                &value(u64::from(i), 50),
            )
            .expect("put");
            let (tx, rx) = mpsc::channel();
            let db = &db;
            s.spawn(move || tx.send(db.snapshot()).expect("send"));
            snapshots.push((i, rx.recv().expect("snapshot")));
        }
    });
    assert_eq!(db.statistics().snapshots, u64::from(threads));
    db.put(&WriteOptions::default(), &cf, b"k", b"last")
        .expect("put");
    db.compact_range(&cf, None, None).expect("compact");
    for (i, snapshot) in &snapshots {
        let read = ReadOptions {
            snapshot: Some(snapshot.clone()),
            ..ReadOptions::default()
        };
        assert_eq!(
            db.get(&read, &cf, b"k").expect("get"),
            Some(value(u64::from(*i), 50)),
            "snapshot {i}, taken on its own thread"
        );
    }
    // Dropped on this thread, not the ones that took them.
    drop(snapshots);
    assert_eq!(db.statistics().snapshots, 0);
    db.close().expect("close");
}

/// A clone holds the seqno on its own: dropping the original (or the
/// clone) leaves the other reading what it saw through a full compaction,
/// and a clone of an old snapshot taken after newer ones is counted too.
#[test]
fn clones_hold_their_seqno_until_the_last_drops() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cf = db.default_column_family();
    let w = WriteOptions::default();
    db.put(&w, &cf, b"k", b"old").expect("put");
    let old = db.snapshot();
    db.put(&w, &cf, b"k", b"mid").expect("put");
    let mid = db.snapshot();
    db.put(&w, &cf, b"k", b"new").expect("put");
    // Older than the newest seqno held on this thread.
    let old_clone = old.clone();
    assert_eq!(old_clone.seqno(), old.seqno());
    assert_eq!(db.statistics().snapshots, 3);
    drop(old);
    drop(mid);
    assert_eq!(db.statistics().snapshots, 1);
    db.compact_range(&cf, None, None).expect("compact");
    let read = ReadOptions {
        snapshot: Some(old_clone.clone()),
        ..ReadOptions::default()
    };
    assert_eq!(
        db.get(&read, &cf, b"k").expect("get"),
        Some(b"old".to_vec())
    );
    drop(read);
    drop(old_clone);
    assert_eq!(db.statistics().snapshots, 0);
    db.compact_range(&cf, None, None).expect("compact");
    assert_eq!(
        db.get(&ReadOptions::default(), &cf, b"k").expect("get"),
        Some(b"new".to_vec())
    );
    db.close().expect("close");
}
