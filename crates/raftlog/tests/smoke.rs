//! Basic write, read, reopen and purge on the in-memory file system.

use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};
use strata_raftlog::{Config, Engine, LogBatch};

fn small_config() -> Config {
    Config {
        target_file_size_bytes: 64 << 10,
        purge_threshold_bytes: 1 << 20,
        ..Config::default()
    }
}

#[test]
fn write_read_reopen_purge() {
    let fs = MemFs::new();
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let engine = Engine::open_with_fs("/db", small_config(), dyn_fs.clone()).unwrap();
    for i in 1..=500u64 {
        let mut b = LogBatch::new();
        for g in 1..=4u64 {
            b.add_entries(g, i, &[format!("g{g}-e{i}").repeat(20)]);
            b.put(g, b"state", format!("{i}").as_bytes());
        }
        engine.write(&mut b, i % 7 == 0).unwrap();
    }
    assert_eq!(engine.first_index(1), Some(1));
    assert_eq!(engine.last_index(3), Some(500));
    assert_eq!(
        engine.get_entry(2, 77).unwrap().unwrap(),
        "g2-e77".repeat(20).into_bytes()
    );
    let got = engine.fetch_entries(4, 10, 20, usize::MAX).unwrap();
    assert_eq!(got.len(), 10);
    assert_eq!(got[0], "g4-e10".repeat(20).into_bytes());
    engine.compact_to(1, 400).unwrap();
    engine.compact_to(2, 400).unwrap();
    engine.compact_to(3, 400).unwrap();
    let out = engine.purge().unwrap();
    assert_eq!(out.files_purged, 0, "group 4 holds the first file");
    engine.compact_to(4, 450).unwrap();
    let out = engine.purge().unwrap();
    assert!(out.files_purged > 0, "{out:?}");
    assert!(engine.get_entry(1, 399).unwrap().is_none());
    engine.close().unwrap();

    let engine = Engine::open_with_fs("/db", small_config(), dyn_fs).unwrap();
    assert_eq!(engine.first_index(1), Some(400));
    assert_eq!(engine.first_index(4), Some(450));
    assert_eq!(engine.last_index(4), Some(500));
    assert_eq!(engine.get(3, b"state").unwrap(), b"500");
    for g in 1..=4u64 {
        for i in engine.first_index(g).unwrap()..=500 {
            assert_eq!(
                engine.get_entry(g, i).unwrap().unwrap(),
                format!("g{g}-e{i}").repeat(20).into_bytes()
            );
        }
    }
}

#[test]
fn rewrite_moves_lagging_groups_and_survives_reopen() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let engine = Engine::open_with_fs("/db", small_config(), fs.clone()).unwrap();
    // Group 1 lags: a few entries, never compacted. Group 2 writes a lot.
    let mut b = LogBatch::new();
    b.add_entries(1, 1, &[b"old-1".as_slice(), b"old-2", b"old-3"]);
    b.put(1, b"k", b"v1");
    engine.write(&mut b, true).unwrap();
    for i in 1..=3000u64 {
        let mut b = LogBatch::new();
        b.add_entries(2, i, &[vec![(i % 251) as u8; 1000]]);
        engine.write(&mut b, false).unwrap();
        if i % 100 == 0 {
            engine.compact_to(2, i - 10).unwrap();
            engine.purge().unwrap();
        }
    }
    let m = engine.metrics();
    assert!(m.entries_rewritten >= 3, "{m:?}");
    assert!(engine.file_stats().rewrite_files >= 1);
    assert!(engine.file_stats().append_bytes < 2 << 20);
    // Compact the rewritten group: the next purge must compact the rewrite queue.
    engine.compact_to(1, 3).unwrap();
    let mut b = LogBatch::new();
    b.delete(1, b"k");
    engine.write(&mut b, true).unwrap();
    for i in 3001..=4000u64 {
        let mut b = LogBatch::new();
        b.add_entries(2, i, &[vec![(i % 251) as u8; 1000]]);
        engine.write(&mut b, false).unwrap();
        if i % 100 == 0 {
            engine.compact_to(2, i - 10).unwrap();
            engine.purge().unwrap();
        }
    }
    engine.close().unwrap();
    let engine = Engine::open_with_fs("/db", small_config(), fs).unwrap();
    assert_eq!(engine.first_index(1), Some(3));
    assert_eq!(engine.get_entry(1, 3).unwrap().unwrap(), b"old-3");
    assert_eq!(engine.get(1, b"k"), None);
    assert_eq!(engine.last_index(2), Some(4000));
}

/// `compact_to` shows at once and is logged ahead of the next group commit:
/// a crash before any later write may bring the entries back, but a synced
/// write after the compaction makes the compaction durable too, and so do
/// `sync`, `purge` and `close`.
#[test]
fn compactions_are_logged_with_the_next_write() {
    use strata_fs::CrashMode;
    let write = |engine: &Engine, group: u64, index: u64, sync: bool| {
        let mut b = LogBatch::new();
        b.add_entries(group, index, &[vec![index as u8; 100]]);
        engine.write(&mut b, sync).unwrap();
    };
    let fs = MemFs::new();
    let open =
        |fs: &MemFs| Engine::open_with_fs("/db", small_config(), Arc::new(fs.clone())).unwrap();
    let engine = open(&fs);
    for i in 1..=50 {
        write(&engine, 1, i, true);
        write(&engine, 2, i, true);
    }
    assert_eq!(engine.compact_to(1, 20).unwrap(), 19);
    assert_eq!(engine.first_index(1), Some(20));
    assert_eq!(engine.get_entry(1, 5).unwrap(), None);
    assert_eq!(engine.compact_to(1, 10).unwrap(), 0, "already compacted");
    // Only in the index so far: a crash now loses the compaction, nothing else.
    let lost = fs.deep_clone();
    lost.crash(CrashMode::DropUnsynced);
    assert_eq!(open(&lost).first_index(1), Some(1));
    // Another group's synced write carries it.
    write(&engine, 2, 51, true);
    let kept = fs.deep_clone();
    kept.crash(CrashMode::DropUnsynced);
    let reopened = open(&kept);
    assert_eq!(reopened.first_index(1), Some(20));
    assert_eq!(reopened.last_index(2), Some(51));
    drop(reopened);
    // `sync` logs pending compactions too.
    assert_eq!(engine.compact_to(2, 30).unwrap(), 29);
    engine.sync().unwrap();
    let synced = fs.deep_clone();
    synced.crash(CrashMode::DropUnsynced);
    assert_eq!(open(&synced).first_index(2), Some(30));
    // And `close`.
    assert_eq!(engine.compact_to(2, 40).unwrap(), 10);
    engine.close().unwrap();
    fs.crash(CrashMode::DropUnsynced);
    let engine = open(&fs);
    assert_eq!(
        (engine.first_index(1), engine.first_index(2)),
        (Some(20), Some(40))
    );
}
