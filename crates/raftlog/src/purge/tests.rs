//! Purge unit tests: copies written early, to bound memory, for a group that
//! then turns out over the limit (never installed, never back), and the idle
//! purge that must cost nothing.

use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};

use super::copy::PENDING_BYTES_MAX_FOR_TESTS;
use crate::{Config, Engine, LogBatch};

const LAGGING: u64 = 1;
const BUSY: u64 = 2;

fn entry(group: u64, index: u64) -> Vec<u8> {
    let mut x = group.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index;
    let mut v = Vec::with_capacity(8 << 10);
    while v.len() < 8 << 10 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

fn append(engine: &Engine, group: u64, index: u64) {
    let mut b = LogBatch::new();
    b.add_entries(group, index, &[entry(group, index)]);
    engine.write(&mut b, false).unwrap();
}

fn check(engine: &Engine, group: u64, first: u64, last: u64, ctx: &str) {
    assert_eq!(engine.first_index(group), Some(first), "{ctx}");
    assert_eq!(engine.last_index(group), Some(last), "{ctx}");
    for i in first..=last {
        let got = engine.get_entry(group, i).unwrap();
        assert!(got == Some(entry(group, i)), "{ctx}: entry {i}");
    }
}

#[test]
fn copies_written_early_of_a_group_over_the_limit_never_come_back() {
    PENDING_BYTES_MAX_FOR_TESTS.set(Some(32 << 10));
    let config = Config {
        target_file_size_bytes: 64 << 10,
        purge_threshold_bytes: 1 << 20,
        purge_rewrite_group_bytes_max: 256 << 10,
        preallocate: false,
        ..Config::default()
    };
    let fs = MemFs::new();
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let engine = Engine::open_with_fs("/db", config.clone(), dyn_fs.clone()).unwrap();
    // 400 KiB of the lagging group, one entry per record among the busy
    // group's, which is compacted as it goes.
    let mut busy = 0;
    for i in 1..=50 {
        append(&engine, LAGGING, i);
        for _ in 0..8 {
            busy += 1;
            append(&engine, BUSY, busy);
        }
        engine.compact_to(BUSY, busy - 2).unwrap();
    }
    for _ in 0..200 {
        busy += 1;
        append(&engine, BUSY, busy);
    }
    engine.compact_to(BUSY, busy - 2).unwrap();
    let out = engine.purge().unwrap();
    // Written early, then found over the limit: reported, not installed.
    assert_eq!(out.groups_to_compact, vec![LAGGING], "{out:?}");
    assert!(out.entries_rewritten >= 4, "{out:?}");
    // The copies written are dead: the rewrite queue must be compacted
    // before the files holding the group's later compaction may go.
    assert!(engine.min_dirty.load(std::sync::atomic::Ordering::SeqCst) < u64::MAX);
    check(&engine, LAGGING, 1, 50, "after the purge");
    let held = engine.file_stats().first_append_seq;

    // The caller compacts the group; purges free the files that held it,
    // and the file that holds the compaction, and nothing comes back.
    engine.compact_to(LAGGING, 48).unwrap();
    let compaction_seq = engine.file_stats().active_append_seq;
    for round in 0..20 {
        if engine.file_stats().first_append_seq > compaction_seq {
            break;
        }
        for _ in 0..150 {
            busy += 1;
            append(&engine, BUSY, busy);
        }
        engine.compact_to(BUSY, busy - 2).unwrap();
        let out = engine.purge().unwrap();
        assert!(out.groups_to_compact.is_empty(), "round {round}: {out:?}");
        check(&engine, LAGGING, 48, 50, &format!("round {round}"));
    }
    let stats = engine.file_stats();
    assert!(stats.first_append_seq > compaction_seq, "{stats:?}");
    assert!(stats.first_append_seq > held, "{stats:?}");
    engine.close().unwrap();
    let engine = Engine::open_with_fs("/db", config, dyn_fs).unwrap();
    check(&engine, LAGGING, 48, 50, "after reopen");
    PENDING_BYTES_MAX_FOR_TESTS.set(None);
}

/// Most purge calls find nothing to do: they must not log the pending
/// compactions, sync, or wait for I/O (they used to cost a group commit and
/// an fsync each). The compaction that later frees a file is still logged,
/// by the purge that frees it, before the deletion, and survives a power cut.
#[test]
fn a_purge_with_nothing_to_free_logs_and_syncs_nothing() {
    let config = Config {
        target_file_size_bytes: 64 << 10,
        purge_threshold_bytes: 64 << 20,
        preallocate: false,
        ..Config::default()
    };
    let fs = MemFs::new();
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let engine = Engine::open_with_fs("/db", config.clone(), dyn_fs.clone()).unwrap();
    for i in 1..=4 {
        append(&engine, BUSY, i);
    }
    engine.sync().unwrap();
    // A compaction inside the active file frees nothing.
    engine.compact_to(BUSY, 3).unwrap();
    let (syncs, written) = (fs.sync_count(), fs.bytes_written());
    for _ in 0..10 {
        let out = engine.purge().unwrap();
        assert!(out.groups_to_compact.is_empty(), "{out:?}");
    }
    assert_eq!(fs.sync_count(), syncs, "an idle purge synced");
    assert_eq!(fs.bytes_written(), written, "an idle purge wrote");
    check(&engine, BUSY, 3, 4, "after idle purges");

    // Fill more files, compact the group past all but the active one: the
    // purge that frees the old files logs the compaction before it deletes.
    let mut last = 4;
    while engine.file_stats().append_files < 4 {
        last += 1;
        append(&engine, BUSY, last);
    }
    engine.compact_to(BUSY, last).unwrap();
    let first = engine.file_stats().first_append_seq;
    engine.purge().unwrap();
    assert!(engine.file_stats().first_append_seq > first);
    drop(engine);
    fs.crash(strata_fs::CrashMode::DropUnsynced);
    let engine = Engine::open_with_fs("/db", config, dyn_fs).unwrap();
    check(&engine, BUSY, last, last, "after a power cut");
}

/// A purge whose dead files alone bring the log under its threshold copies
/// nothing: the threshold once counted the dead files too, so purge copied
/// live data out of files that did not need freeing (176 MiB of a 1 GiB log
/// of mixed entries, where removing the dead files was enough).
#[test]
fn dead_files_that_bring_the_log_under_its_threshold_leave_live_data_in_place() {
    let config = Config {
        target_file_size_bytes: 64 << 10,
        purge_threshold_bytes: 1 << 20,
        preallocate: false,
        ..Config::default()
    };
    let engine = Engine::open_with_fs("/db", config, Arc::new(MemFs::new())).unwrap();
    let mut busy = 0;
    let fill = |busy: &mut u64, n: u64| {
        for _ in 0..n {
            *busy += 1;
            append(&engine, BUSY, *busy);
        }
        engine.compact_to(BUSY, *busy - 2).unwrap();
    };
    // 640 KiB that the compaction kills, one live entry, then 800 KiB more:
    // 1.4 MiB in all, 800 KiB of it from the live entry on.
    fill(&mut busy, 80);
    append(&engine, LAGGING, 1);
    fill(&mut busy, 100);
    let before = engine.file_stats().first_append_seq;
    let out = engine.purge().unwrap();
    assert_eq!(out.entries_rewritten, 0, "{out:?}");
    assert!(out.files_purged >= 8, "{out:?}");
    assert!(engine.file_stats().first_append_seq > before);
    check(&engine, LAGGING, 1, 1, "the live entry stays where it was");
    check(&engine, BUSY, busy - 2, busy, "the busy group");
}
