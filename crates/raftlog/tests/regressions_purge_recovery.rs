//! Regression tests for five bugs found by the kill -9 and fail-point tests:
//! split runs lost by a second rewrite, sealed recycled files read as damage,
//! the rewrite queue replayed after the append queue, lagging groups holding
//! files forever, and a failed removal of an old rewrite file.

use std::sync::Arc;
use strata_fs::{FileSystem, MemFs};
use strata_raftlog::{Config, Engine, LogBatch};

#[test]
fn rewrite_queue_compaction_loses_split_runs() {
    let config = Config {
        target_file_size_bytes: 64 << 10,
        purge_threshold_bytes: 1 << 20,
        ..Config::default()
    };
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let engine = Engine::open_with_fs("/db", config, fs).unwrap();
    // Group 1: two entries in two batches, so the index holds two runs.
    for i in 1..=2u64 {
        let mut b = LogBatch::new();
        b.add_entries(1, i, &[format!("lag-{i}")]);
        engine.write(&mut b, true).unwrap();
    }
    // Group 3: a key that will be rewritten too, and later overwritten.
    let mut b = LogBatch::new();
    b.put(3, b"k", b"old");
    engine.write(&mut b, true).unwrap();
    // Group 2 writes a lot and is compacted, so purge rewrites groups 1 and 3.
    let mut i = 0u64;
    while engine.metrics().entries_rewritten < 2 {
        i += 1;
        let mut b = LogBatch::new();
        b.add_entries(2, i, &[vec![i as u8; 1000]]);
        engine.write(&mut b, false).unwrap();
        if i.is_multiple_of(100) {
            engine.compact_to(2, i - 10).unwrap();
            engine.purge().unwrap();
        }
        assert!(i < 100_000);
    }
    // Overwriting the rewritten key makes the next purge rewrite the rewrite queue.
    let mut b = LogBatch::new();
    b.put(3, b"k", b"new");
    engine.write(&mut b, true).unwrap();
    let out = engine.purge().unwrap();
    eprintln!("{out:?}");
    assert!(out.rewrite_queue_compacted);
    assert_eq!(engine.get_entry(1, 1).unwrap().unwrap(), b"lag-1");
    assert_eq!(engine.get_entry(1, 2).unwrap().unwrap(), b"lag-2");
}

#[test]
fn sealed_recycled_file_fails_recovery() {
    let config = Config {
        target_file_size_bytes: 64 << 10,
        purge_threshold_bytes: 1 << 20,
        ..Config::default()
    };
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let engine = Engine::open_with_fs("/db", config.clone(), fs.clone()).unwrap();
    // Fill and free files with records of one size, then write records of another
    // size into the recycled files, so new records end inside an old record.
    let mut i = 0u64;
    let mut write = |len: usize, n: u64, purge: bool| {
        for _ in 0..n {
            i += 1;
            let mut b = LogBatch::new();
            b.add_entries(1, i, &[vec![(i % 251) as u8; len]]);
            engine.write(&mut b, false).unwrap();
        }
        if purge {
            engine.compact_to(1, i).unwrap();
            engine.purge().unwrap();
        }
        i
    };
    write(1000, 300, true);
    let recycled_before = engine.file_stats().recycled_files;
    assert!(recycled_before > 0);
    write(777, 300, false);
    assert!(
        engine.metrics().files_recycled > 0,
        "{:?}",
        engine.metrics()
    );
    let stats = engine.file_stats();
    eprintln!("{stats:?}");
    engine.close().unwrap();
    let engine = Engine::open_with_fs("/db", config, fs).unwrap();
    eprintln!("{:?} {:?}", engine.recovery_report(), engine.metrics());
    assert_eq!(engine.last_index(1), Some(i));
}

#[test]
fn reopen_replays_rewrite_queue_after_append_queue() {
    let config = Config {
        target_file_size_bytes: 64 << 10,
        purge_threshold_bytes: 1 << 20,
        ..Config::default()
    };
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let engine = Engine::open_with_fs("/db", config.clone(), fs.clone()).unwrap();
    let mut b = LogBatch::new();
    b.add_entries(1, 1, &[b"lag-1"]);
    b.put(1, b"k", b"old");
    engine.write(&mut b, true).unwrap();
    let mut i = 0u64;
    while engine.metrics().entries_rewritten < 1 {
        i += 1;
        let mut b = LogBatch::new();
        b.add_entries(2, i, &[vec![i as u8; 1000]]);
        engine.write(&mut b, false).unwrap();
        if i.is_multiple_of(100) {
            engine.compact_to(2, i - 10).unwrap();
            engine.purge().unwrap();
        }
    }
    // Group 1's entry 1 and key are now in the rewrite queue; write over them.
    let mut b = LogBatch::new();
    b.add_entries(1, 2, &[b"lag-2"]);
    b.put(1, b"k", b"new");
    engine.write(&mut b, true).unwrap();
    engine.close().unwrap();
    let engine = Engine::open_with_fs("/db", config, fs).unwrap();
    assert_eq!(engine.get(1, b"k").as_deref(), Some(&b"new"[..]));
    assert_eq!(engine.last_index(1), Some(2));
}

#[test]
fn entry_after_rewrite_pins_append_files_forever() {
    let config = Config {
        target_file_size_bytes: 64 << 10,
        purge_threshold_bytes: 1 << 20,
        ..Config::default()
    };
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let engine = Engine::open_with_fs("/db", config, fs).unwrap();
    let mut b = LogBatch::new();
    b.add_entries(1, 1, &[b"lag-1"]);
    engine.write(&mut b, true).unwrap();
    let mut i = 0u64;
    let mut busy = |engine: &Engine, n: u64| {
        for _ in 0..n {
            i += 1;
            let mut b = LogBatch::new();
            b.add_entries(2, i, &[vec![i as u8; 1000]]);
            engine.write(&mut b, false).unwrap();
            if i.is_multiple_of(100) {
                engine.compact_to(2, i - 10).unwrap();
                engine.purge().unwrap();
            }
        }
    };
    busy(&engine, 2000);
    assert!(engine.metrics().entries_rewritten >= 1);
    // The lagging group gets one more entry after its first rewrite.
    let mut b = LogBatch::new();
    b.add_entries(1, 2, &[b"lag-2"]);
    engine.write(&mut b, true).unwrap();
    busy(&engine, 20_000);
    let stats = engine.file_stats();
    assert!(
        stats.append_bytes < 4 << 20,
        "append queue grew to {stats:?}"
    );
}

#[test]
fn failed_rewrite_file_removal_resurrects_deleted_key() {
    use strata_fs::{FaultFs, Op};
    let config = Config {
        target_file_size_bytes: 64 << 10,
        purge_threshold_bytes: 1 << 20,
        ..Config::default()
    };
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let fs: Arc<dyn FileSystem> = Arc::new(fault.clone());
    let engine = Engine::open_with_fs("/db", config.clone(), fs.clone()).unwrap();
    let mut b = LogBatch::new();
    b.add_entries(1, 1, &[b"lag-1".as_slice(), b"lag-2"]);
    b.put(1, b"k", b"v1");
    engine.write(&mut b, true).unwrap();
    let mut i = 0u64;
    let mut busy = |engine: &Engine, n: u64| {
        for _ in 0..n {
            i += 1;
            let mut b = LogBatch::new();
            b.add_entries(2, i, &[vec![i as u8; 1000]]);
            engine.write(&mut b, false).unwrap();
            if i.is_multiple_of(100) {
                engine.compact_to(2, i - 10).unwrap();
                let _ = engine.purge();
            }
        }
    };
    busy(&engine, 1500);
    assert!(engine.file_stats().rewrite_files == 1);
    // Delete the rewritten key; the purge that rewrites the rewrite queue fails
    // to remove the old rewrite file.
    let mut b = LogBatch::new();
    b.delete(1, b"k");
    engine.write(&mut b, true).unwrap();
    fault.fail_once_after(Op::Remove, 0, 5);
    let err = engine.purge().unwrap_err();
    eprintln!("purge: {err}");
    busy(&engine, 3000);
    assert_eq!(engine.get(1, b"k"), None);
    engine.close().unwrap();
    eprintln!("{:?}", mem.list(std::path::Path::new("/db")).unwrap());
    let engine = Engine::open_with_fs("/db", config, fs).unwrap();
    assert_eq!(engine.get(1, b"k"), None, "the deleted key came back");
}
