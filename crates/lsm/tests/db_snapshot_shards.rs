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
