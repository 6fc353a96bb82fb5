//! Fail points inside the engine (the `fail` crate, feature `failpoints`), on
//! the in-memory file system. They prove that:
//! - a failed append fails only that write; a failed sync, of a write or of a
//!   file being sealed, poisons the engine; a failed file creation fails writes
//!   only until creation works again;
//! - a purge that fails at its start or before rewriting changes nothing, and a
//!   later purge still frees the files;
//! - a crash in the middle of a purge (a panic while it removes files, or
//!   before it syncs its copies) loses nothing after reopen;
//! - writes made while purge is copying a group win over the copy.
//!
//! Run with `cargo test -p strata-raftlog --features failpoints --test failpoints`.
//! Fail points are global to the process: every test holds a
//! `fail::FailScenario`, whose guard is a process-wide mutex, so the tests of
//! this file run one at a time whatever the harness's thread count.

#![cfg(feature = "failpoints")]

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use fail::FailScenario;
use strata_fs::{CrashMode, FaultFs, FileSystem, MemFs, Op};
use strata_raftlog::{Config, Engine, Error, LogBatch};

const DIR: &str = "/db";
/// A group with a few entries and a key, never compacted: purge must copy it
/// into the rewrite queue to free the oldest files.
const LAGGING: u64 = 1;
/// A group that writes a lot and is compacted often.
const BUSY: u64 = 2;

fn config() -> Config {
    Config {
        target_file_size_bytes: 64 << 10,
        purge_threshold_bytes: 1 << 20,
        ..Config::default()
    }
}

fn open(fs: &MemFs) -> Engine {
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    Engine::open_with_fs(DIR, config(), dyn_fs).expect("open")
}

/// The bytes of entry `index` of `group`: 1000 bytes, not compressible.
fn entry(group: u64, index: u64) -> Vec<u8> {
    let mut x = group.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index;
    let mut v = format!("g{group}/i{index}/").into_bytes();
    while v.len() < 1000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(1000);
    v
}

/// What the engine must hold: per group its entry range (entries have the
/// bytes of [`entry`]) and its keys.
#[derive(Debug, Clone, Default)]
struct Model {
    ranges: BTreeMap<u64, (u64, u64)>,
    keys: BTreeMap<u64, BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl Model {
    fn last(&self, group: u64) -> u64 {
        self.ranges.get(&group).map_or(0, |r| r.1)
    }

    /// Appends `n` entries to `group` in one batch; the model follows on `Ok`.
    fn append(&mut self, engine: &Engine, group: u64, n: u64, sync: bool) -> Result<(), Error> {
        let first = self.last(group) + 1;
        let entries: Vec<Vec<u8>> = (first..first + n).map(|i| entry(group, i)).collect();
        let mut batch = LogBatch::new();
        batch.add_entries(group, first, &entries);
        engine.write(&mut batch, sync)?;
        self.ranges.entry(group).or_insert((first, first)).1 = first + n - 1;
        Ok(())
    }

    fn put(&mut self, engine: &Engine, group: u64, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let mut batch = LogBatch::new();
        batch.put(group, key, value);
        engine.write(&mut batch, true)?;
        self.keys
            .entry(group)
            .or_default()
            .insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn compact(&mut self, engine: &Engine, group: u64, to: u64) -> Result<(), Error> {
        let mut batch = LogBatch::new();
        batch.compact_to(group, to);
        engine.write(&mut batch, true)?;
        if let Some(r) = self.ranges.get_mut(&group) {
            r.0 = r.0.max(to);
        }
        Ok(())
    }

    /// Checks every entry and key of the engine against the model.
    fn check(&self, engine: &Engine, ctx: &str) {
        for (&g, &(first, last)) in &self.ranges {
            assert_eq!(engine.first_index(g), Some(first), "{ctx}: group {g} first");
            assert_eq!(engine.last_index(g), Some(last), "{ctx}: group {g} last");
            let got = engine
                .fetch_entries(g, first, last + 1, usize::MAX)
                .unwrap_or_else(|e| panic!("{ctx}: fetch group {g}: {e}"));
            assert_eq!(got.len() as u64, last + 1 - first, "{ctx}: group {g}");
            for (i, data) in (first..).zip(&got) {
                assert!(*data == entry(g, i), "{ctx}: group {g} entry {i} differs");
            }
        }
        let mut groups: Vec<u64> = self.ranges.keys().copied().collect();
        groups.extend(self.keys.keys());
        for g in groups {
            let want: Vec<(Vec<u8>, Vec<u8>)> = self
                .keys
                .get(&g)
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default();
            assert_eq!(engine.scan_keys(g), want, "{ctx}: keys of group {g}");
        }
    }
}

/// Checks the model after a simulated power loss, on a copy of `fs`, so the
/// caller can go on with `fs` as it was.
fn check_after_crash(fs: &MemFs, model: &Model, mode: CrashMode, ctx: &str) {
    let copy = fs.deep_clone();
    copy.crash(mode);
    let engine = open(&copy);
    model.check(&engine, &format!("{ctx}, after crash {mode:?}"));
}

/// Gives the lagging group entries 1..=3 and a key, then writes about 1.3 MiB
/// to the busy group, compacting it as it goes but never purging, so that a
/// purge will have to rewrite the lagging group to free the oldest files.
fn lagging_setup(engine: &Engine, model: &mut Model) {
    model.append(engine, LAGGING, 3, true).unwrap();
    model.put(engine, LAGGING, b"state", b"lag-1").unwrap();
    fill_busy(engine, model, 1300);
}

/// Appends `n` entries to the busy group in batches of one, compacting it to
/// its last 10 entries every 100.
fn fill_busy(engine: &Engine, model: &mut Model, n: u64) {
    for _ in 0..n {
        model.append(engine, BUSY, 1, false).unwrap();
        let last = model.last(BUSY);
        if last.is_multiple_of(100) {
            model.compact(engine, BUSY, last - 10).unwrap();
        }
    }
    engine.sync().unwrap();
}

fn is_fail_point_io(e: &Error, want_op: &str) -> bool {
    matches!(e, Error::Io { op, source, .. } if *op == want_op && source.to_string() == "fail point")
}

#[test]
fn write_append_error_fails_only_that_write() {
    let scenario = FailScenario::setup();
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut model = Model::default();
    for _ in 0..10 {
        model.append(&engine, 1, 2, true).unwrap();
    }
    fail::cfg("raftlog::write::append", "1*return").unwrap();
    let mut failed = model.clone();
    let err = failed.append(&engine, 1, 1, true).unwrap_err();
    assert!(is_fail_point_io(&err, "write"), "{err:?}");
    // The failed batch is invisible, and the very next write succeeds.
    model.check(&engine, "after the failed append");
    for _ in 0..10 {
        model.append(&engine, 1, 2, true).unwrap();
    }
    model.put(&engine, 3, b"k", b"v").unwrap();
    model.check(&engine, "after the retries");
    drop(engine);
    check_after_crash(&fs, &model, CrashMode::DropUnsynced, "write::append");
    let engine = open(&fs);
    model.check(&engine, "after reopen");
    scenario.teardown();
}

#[test]
fn write_sync_error_poisons_the_engine() {
    let scenario = FailScenario::setup();
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut model = Model::default();
    for _ in 0..5 {
        model.append(&engine, 1, 1, true).unwrap();
    }
    fail::cfg("raftlog::write::sync", "return").unwrap();
    let err = model.clone().append(&engine, 1, 1, true).unwrap_err();
    assert!(is_fail_point_io(&err, "sync"), "{err:?}");
    // What the engine holds if the batch whose sync failed is found on reopen.
    let mut failed = model.clone();
    failed.ranges.insert(1, (1, 6));
    fail::remove("raftlog::write::sync");
    // Every later write fails, synced or not, and so does an explicit sync.
    let mut later = model.clone();
    for sync in [true, false] {
        let err = later.append(&engine, 1, 1, sync).unwrap_err();
        assert!(matches!(err, Error::Poisoned(_)), "{err:?}");
    }
    assert!(matches!(engine.sync(), Err(Error::Poisoned(_))));
    // Reads still work and do not show the batch whose sync failed.
    model.check(&engine, "poisoned");
    // Regression: close() returned Ok on a poisoned engine.
    let err = engine.close().unwrap_err();
    assert!(matches!(err, Error::Poisoned(_)), "close: {err:?}");

    // The failed batch never reached the durable image, so a crash drops it.
    check_after_crash(&fs, &model, CrashMode::DropUnsynced, "write::sync");
    // Without a crash its bytes are in the page cache: all or nothing of it.
    let engine = open(&fs);
    let last = engine.last_index(1);
    assert!(last == Some(5) || last == Some(6), "{last:?}");
    if last == Some(6) {
        failed.check(&engine, "reopen with the failed batch");
    } else {
        model.check(&engine, "reopen without the failed batch");
    }
    // A reopened engine writes again.
    let mut after = if last == Some(6) { failed } else { model };
    after.append(&engine, 1, 1, true).unwrap();
    after.check(&engine, "a write after reopen");
    scenario.teardown();
}

#[test]
fn rotate_create_error_fails_writes_until_cleared() {
    let scenario = FailScenario::setup();
    // The preparer makes nothing ahead: every rotation makes its own file.
    fail::cfg("raftlog::prepare", "return").unwrap();
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut model = Model::default();
    model.append(&engine, 1, 1, true).unwrap();
    let seq = engine.file_stats().active_append_seq;
    fail::cfg("raftlog::rotate::create", "return").unwrap();
    // About 64 one-KiB batches fill the file; the one that needs a new file fails.
    let mut writes = 0;
    let err = loop {
        match model.append(&engine, 1, 1, true) {
            Ok(()) => writes += 1,
            Err(e) => break e,
        }
        assert!(writes < 200, "no write needed a new file");
    };
    assert!(writes > 30, "failed after only {writes} writes: {err:?}");
    assert!(is_fail_point_io(&err, "create"), "{err:?}");
    // Every write that needs the new file fails while creation fails.
    let err = model.clone().append(&engine, 1, 1, true).unwrap_err();
    assert!(is_fail_point_io(&err, "create"), "{err:?}");
    assert_eq!(engine.file_stats().active_append_seq, seq);
    model.check(&engine, "while creation fails");

    fail::remove("raftlog::rotate::create");
    for _ in 0..100 {
        model.append(&engine, 1, 1, true).unwrap();
    }
    let stats = engine.file_stats();
    assert!(stats.active_append_seq > seq, "{stats:?}");
    assert_eq!(
        stats.append_files,
        stats.active_append_seq - stats.first_append_seq + 1
    );
    model.check(&engine, "after creation works again");
    drop(engine);
    check_after_crash(&fs, &model, CrashMode::DropUnsynced, "rotate::create");
    let engine = open(&fs);
    model.check(&engine, "after reopen");
    scenario.teardown();
}

#[test]
fn rotate_seal_error_poisons_the_engine() {
    let scenario = FailScenario::setup();
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut model = Model::default();
    fail::cfg("raftlog::rotate::seal", "return").unwrap();
    let mut writes = 0;
    // One write in three synced: a rotation must sync the sealed file's
    // data itself when the write before it was unsynced (a file of synced
    // data leaves its section's sync to the preparer, best effort).
    let mut durable = model.clone();
    let err = loop {
        let sync = writes % 3 == 2;
        match model.append(&engine, 1, 1, sync) {
            Ok(()) if sync => {
                writes += 1;
                durable = model.clone();
            }
            Ok(()) => writes += 1,
            Err(e) => break e,
        }
        assert!(writes < 400, "no write sealed a file");
    };
    assert!(writes > 30, "failed after only {writes} writes: {err:?}");
    assert!(is_fail_point_io(&err, "sync"), "{err:?}");
    fail::remove("raftlog::rotate::seal");
    let err = model.clone().append(&engine, 1, 1, false).unwrap_err();
    assert!(matches!(err, Error::Poisoned(_)), "{err:?}");
    model.check(&engine, "poisoned");
    drop(engine);
    check_after_crash(&fs, &durable, CrashMode::DropUnsynced, "rotate::seal");
    let engine = open(&fs);
    model.check(&engine, "after reopen");
    model.append(&engine, 1, 1, true).unwrap();
    scenario.teardown();
}

/// A purge that fails at `fail_point` changes nothing; after reopen the data is
/// intact and a purge frees the oldest files.
fn failed_purge_changes_nothing(fail_point: &str, op: &str) {
    let scenario = FailScenario::setup();
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut model = Model::default();
    lagging_setup(&engine, &mut model);
    let before = engine.file_stats();
    fail::cfg(fail_point, "return").unwrap();
    let err = engine.purge().unwrap_err();
    assert!(is_fail_point_io(&err, op), "{err:?}");
    assert_eq!(engine.file_stats(), before);
    model.check(&engine, fail_point);
    // The engine is not poisoned by a failed purge.
    model.append(&engine, BUSY, 1, true).unwrap();
    drop(engine);
    check_after_crash(&fs, &model, CrashMode::DropUnsynced, fail_point);

    let engine = open(&fs);
    model.check(&engine, &format!("{fail_point}: after reopen"));
    fail::remove(fail_point);
    let out = engine.purge().unwrap();
    assert!(out.files_purged > 0, "{out:?}");
    assert!(out.entries_rewritten >= 3, "{out:?}");
    let after = engine.file_stats();
    assert!(
        after.append_files < before.append_files,
        "{before:?} -> {after:?}"
    );
    assert!(after.rewrite_files >= 1, "{after:?}");
    model.check(&engine, &format!("{fail_point}: after the purge"));
    engine.close().unwrap();
    let engine = open(&fs);
    model.check(&engine, &format!("{fail_point}: reopen after the purge"));
    scenario.teardown();
}

#[test]
fn purge_start_error_changes_nothing() {
    failed_purge_changes_nothing("raftlog::purge::start", "purge");
}

#[test]
fn rewrite_start_error_changes_nothing() {
    failed_purge_changes_nothing("raftlog::rewrite::start", "rewrite");
}

/// Whether a rewrite-start failure leaves the running engine able to purge:
/// the failure marks the rewrite queue dirty, so the next purge must rewrite it
/// and still free the files.
#[test]
fn purge_after_rewrite_start_error_frees_files_without_reopen() {
    let scenario = FailScenario::setup();
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut model = Model::default();
    lagging_setup(&engine, &mut model);
    fail::cfg("raftlog::rewrite::start", "1*return").unwrap();
    assert!(engine.purge().is_err());
    let before = engine.file_stats();
    let out = engine.purge().unwrap();
    assert!(out.files_purged > 0, "{out:?}");
    assert!(out.rewrite_queue_compacted, "{out:?}");
    assert!(engine.file_stats().append_files < before.append_files);
    model.check(&engine, "after the second purge");
    drop(engine);
    check_after_crash(&fs, &model, CrashMode::DropUnsynced, "rewrite::start once");
    scenario.teardown();
}

/// Runs `purge` with `actions` at `fail_point`, expecting a panic; then checks
/// the model after power losses and after a plain reopen, and that the reopened
/// engine writes and purges normally.
fn panic_in_purge(fs: &MemFs, engine: Engine, model: &mut Model, fail_point: &str, actions: &str) {
    fail::cfg(fail_point, actions).unwrap();
    let result = catch_unwind(AssertUnwindSafe(|| engine.purge()));
    assert!(
        result.is_err(),
        "{fail_point}={actions}: purge did not reach it"
    );
    fail::remove(fail_point);
    drop(engine);
    let ctx = format!("panic at {fail_point}={actions}");
    check_after_crash(fs, model, CrashMode::DropUnsynced, &ctx);
    for seed in 0..4 {
        check_after_crash(fs, model, CrashMode::KeepRandomPrefix { seed }, &ctx);
    }
    let engine = open(fs);
    model.check(&engine, &format!("{ctx}: reopen"));
    fill_busy(&engine, model, 1300);
    let out = engine.purge().unwrap();
    assert!(out.files_purged > 0, "{ctx}: {out:?}");
    model.check(&engine, &format!("{ctx}: purge after reopen"));
    engine.close().unwrap();
    let engine = open(fs);
    model.check(&engine, &format!("{ctx}: reopen after purge"));
}

#[test]
fn panic_while_removing_append_files_loses_nothing() {
    for actions in ["panic", "2*off->panic"] {
        let scenario = FailScenario::setup();
        let fs = MemFs::new();
        let engine = open(&fs);
        let mut model = Model::default();
        lagging_setup(&engine, &mut model);
        panic_in_purge(
            &fs,
            engine,
            &mut model,
            "raftlog::purge::remove_append",
            actions,
        );
        scenario.teardown();
    }
}

#[test]
fn panic_while_removing_rewrite_files_loses_nothing() {
    for actions in ["panic", "1*off->panic"] {
        let scenario = FailScenario::setup();
        let fs = MemFs::new();
        let engine = open(&fs);
        let mut model = Model::default();
        // Copy the lagging group into a rewrite file.
        lagging_setup(&engine, &mut model);
        let out = engine.purge().unwrap();
        assert!(out.entries_rewritten >= 3, "{out:?}");
        // A reopened engine starts a new rewrite file: copy a second lagging
        // group into it, so that there are two rewrite files to remove.
        engine.close().unwrap();
        let engine = open(&fs);
        model.append(&engine, 3, 3, true).unwrap();
        model.put(&engine, 3, b"state", b"lag-1").unwrap();
        fill_busy(&engine, &mut model, 1300);
        let out = engine.purge().unwrap();
        assert!(out.entries_rewritten >= 3, "{out:?}");
        assert_eq!(engine.file_stats().rewrite_files, 2);
        // Replacing a rewritten key makes the next purge rewrite the rewrite
        // queue into a new file and remove the two old ones.
        model.put(&engine, LAGGING, b"state", b"lag-2").unwrap();
        fill_busy(&engine, &mut model, 300);
        panic_in_purge(
            &fs,
            engine,
            &mut model,
            "raftlog::purge::remove_rewrite",
            actions,
        );
        scenario.teardown();
    }
}

#[test]
fn panic_before_rewrite_sync_loses_nothing() {
    let scenario = FailScenario::setup();
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut model = Model::default();
    lagging_setup(&engine, &mut model);
    panic_in_purge(&fs, engine, &mut model, "raftlog::rewrite::sync", "panic");
    scenario.teardown();
}

/// The error twin of the panic at `purge::remove_rewrite`, with no restart
/// after it: removing the old rewrite file fails with EIO. The engine must
/// still know the file is there, or once later purges delete the record that
/// deleted a key, the stale copy of the key in that file comes back at reopen.
#[test]
fn failed_removal_of_a_rewrite_file_keeps_deletes_deleted() {
    const EIO: i32 = 5;
    let scenario = FailScenario::setup();
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let engine = Engine::open_with_fs(DIR, config(), Arc::new(fault.clone())).unwrap();
    let mut model = Model::default();
    lagging_setup(&engine, &mut model);
    let out = engine.purge().unwrap();
    assert!(out.entries_rewritten >= 3, "{out:?}");
    assert_eq!(engine.file_stats().rewrite_files, 1);
    // Delete the rewritten key: the next purge rewrites the rewrite queue into
    // a new file and removes the old one, which fails.
    let mut batch = LogBatch::new();
    batch.delete(LAGGING, b"state");
    engine.write(&mut batch, true).unwrap();
    model.keys.remove(&LAGGING);
    let tombstone_seq = engine.file_stats().active_append_seq;
    fault.fail_once_after(Op::Remove, 0, EIO);
    let err = engine.purge().unwrap_err();
    assert!(matches!(&err, Error::Io { op: "remove", .. }), "{err:?}");
    // Later purges go on and free the append file holding the delete.
    for round in 0..20 {
        if engine.file_stats().first_append_seq > tombstone_seq {
            break;
        }
        fill_busy(&engine, &mut model, 300);
        engine.purge().unwrap();
        model.check(&engine, &format!("purge round {round}"));
    }
    let stats = engine.file_stats();
    assert!(stats.first_append_seq > tombstone_seq, "{stats:?}");
    engine.close().unwrap();
    let engine = open(&mem);
    model.check(&engine, "reopen after the failed removal");
    scenario.teardown();
}

/// A purge paused just before syncing its copy of the lagging group, while the
/// group is compacted, its key deleted and another key put: the writes win, now
/// and after every later purge and reopen.
#[test]
fn writes_during_a_rewrite_win_over_the_copy() {
    let scenario = FailScenario::setup();
    let fs = MemFs::new();
    let engine = Arc::new(open(&fs));
    let mut model = Model::default();
    lagging_setup(&engine, &mut model);

    let (reached_tx, reached_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let reached_tx = Mutex::new(reached_tx);
    let release_rx = Mutex::new(release_rx);
    fail::cfg_callback("raftlog::rewrite::sync", move || {
        let _ = reached_tx.lock().unwrap().send(());
        let _ = release_rx.lock().unwrap().recv();
    })
    .unwrap();
    let purger = {
        let engine = Arc::clone(&engine);
        std::thread::spawn(move || engine.purge())
    };
    reached_rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("purge never reached rewrite::sync");
    model.compact(&engine, LAGGING, 3).unwrap();
    let mut batch = LogBatch::new();
    batch.delete(LAGGING, b"state");
    engine.write(&mut batch, true).unwrap();
    model.keys.remove(&LAGGING);
    model
        .put(&engine, LAGGING, b"other", b"put during the rewrite")
        .unwrap();
    release_tx.send(()).unwrap();
    let out = purger.join().unwrap().unwrap();
    assert!(out.entries_rewritten >= 3, "{out:?}");
    fail::remove("raftlog::rewrite::sync");
    model.check(&engine, "right after the purge");

    // Purge until the append file holding the compaction and the delete is
    // gone; the stale copy must not come back.
    let tombstone_seq = engine.file_stats().active_append_seq;
    for round in 0..20 {
        if engine.file_stats().first_append_seq > tombstone_seq {
            break;
        }
        fill_busy(&engine, &mut model, 300);
        engine.purge().unwrap();
        model.check(&engine, &format!("purge round {round}"));
    }
    let stats = engine.file_stats();
    assert!(stats.first_append_seq > tombstone_seq, "{stats:?}");
    let engine = Arc::into_inner(engine).expect("the purge thread is done");
    engine.close().unwrap();
    check_after_crash(&fs, &model, CrashMode::DropUnsynced, "after the race");
    let engine = open(&fs);
    model.check(&engine, "reopen after the race");
    scenario.teardown();
}

/// Runs `f` on a thread and fails the test if it has not returned within
/// `secs` seconds: a hang shows as a failure, not as a stuck test run.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("{what}: no return within {secs} s (hang or deadlock)"))
}

/// Regression: a panic on the group-commit leader left every later writer of
/// any thread waiting forever. Now the leader's group fails with an error,
/// leadership passes on, and the engine refuses writes (it cannot know what the
/// panic left in the file) without hanging anyone; reopening recovers.
#[test]
fn a_panicking_leader_fails_its_writers_and_hangs_nobody() {
    let scenario = FailScenario::setup();
    let fs = MemFs::new();
    let engine = Arc::new(open(&fs));
    let mut model = Model::default();
    model.append(&engine, 1, 5, true).unwrap();
    fail::cfg("raftlog::write::leader", "1*panic(leader bug)").unwrap();
    let writers: Vec<_> = (0..4u64)
        .map(|t| {
            let engine = engine.clone();
            std::thread::spawn(move || {
                let mut errors = 0;
                for i in 0..50u64 {
                    let mut batch = LogBatch::new();
                    batch.put(10 + t, b"k", &i.to_le_bytes());
                    if engine.write(&mut batch, i % 2 == 0).is_err() {
                        errors += 1;
                    }
                }
                errors
            })
        })
        .collect();
    let errors: u64 = within(60, "writers behind a panicked leader", move || {
        writers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert!(errors > 0, "the panic failed no write");
    let mut batch = LogBatch::new();
    batch.put(1, b"k", b"v");
    let err = engine.write(&mut batch, true).unwrap_err();
    assert!(
        matches!(err, Error::Poisoned(ref why) if why.contains("leader bug")),
        "{err:?}"
    );
    fail::remove("raftlog::write::leader");
    drop(engine);
    let engine = open(&fs);
    model.check(&engine, "reopen after the leader's panic");
    scenario.teardown();
}

/// Regression: `file_stats` held `files` and then took `recycled`, while
/// purge's `retire` held `recycled` and then took `files`: a metrics poller
/// and a purge deadlocked each other and every writer behind them. The pause
/// holds `retire` inside `recycled` until a stats call is blocked; then both
/// must finish.
#[test]
fn file_stats_during_retire_does_not_deadlock() {
    let scenario = FailScenario::setup();
    let fs = MemFs::new();
    let engine = Arc::new(open(&fs));
    let mut model = Model::default();
    lagging_setup(&engine, &mut model);
    fail::cfg("raftlog::purge::retire", "pause").unwrap();
    let purger = {
        let engine = engine.clone();
        std::thread::spawn(move || engine.purge().map(|o| o.files_purged))
    };
    // Let purge reach the pause, then poll stats (and write) behind it.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let poller = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            for _ in 0..20 {
                engine.file_stats();
            }
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(200));
    fail::cfg("raftlog::purge::retire", "off").unwrap();
    let purged = within(30, "purge racing file_stats", move || {
        poller.join().unwrap();
        purger.join().unwrap()
    })
    .expect("purge");
    assert!(purged > 0, "the purge freed nothing, so retire never ran");
    model.append(&engine, 1, 1, true).unwrap();
    model.check(&engine, "after the purge");
    scenario.teardown();
}

/// Regression: a group commit that failed (the disk filled up in its middle)
/// was cut from the file without a sync, so a power cut could keep the
/// group's first, complete record although its writer was told the write
/// failed. The leader's pause lets two writers queue behind it, so they form
/// the next group; the space left fits the first of their records only.
#[test]
fn a_failed_group_never_comes_back_after_a_power_cut() {
    let scenario = FailScenario::setup();
    let mem = MemFs::new();
    let faults = Arc::new(FaultFs::new(Arc::new(mem.clone())));
    let config = Config {
        preallocate: false,
        ..config()
    };
    let engine = Arc::new(Engine::open_with_fs(DIR, config.clone(), faults.clone()).unwrap());
    let mut batch = LogBatch::new();
    batch.add_entries(1, 1, &[entry(1, 1)]);
    engine.write(&mut batch, true).unwrap();
    fail::cfg("raftlog::write::leader", "1*pause").unwrap();
    let write = |group: u64, len: usize| {
        let engine = engine.clone();
        std::thread::spawn(move || {
            let mut batch = LogBatch::new();
            let data: Vec<u8> = (0..len as u64)
                .flat_map(|i| entry(group, 100 + i))
                .collect();
            batch.add_entries(group, 1, &[data]);
            engine.write(&mut batch, false)
        })
    };
    let leader = write(2, 1);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let small = write(3, 1);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let large = write(4, 20);
    std::thread::sleep(std::time::Duration::from_millis(100));
    // The leader's own record fits; of the next group only the small one.
    faults.set_space_left(Some(2 * 1100 + 8000));
    fail::cfg("raftlog::write::leader", "off").unwrap();
    leader.join().unwrap().expect("the paused leader's write");
    let small = small.join().unwrap();
    let large = large.join().unwrap();
    assert!(large.is_err(), "{large:?}");
    assert!(small.is_err(), "the two did not form one group: {small:?}");
    faults.set_space_left(None);
    fail::remove("raftlog::write::leader");
    drop(engine);
    for seed in 0..64 {
        let crashed = mem.deep_clone();
        crashed.crash(CrashMode::KeepRandomPrefix { seed });
        let engine = open(&crashed);
        assert_eq!(
            engine.last_index(3),
            None,
            "seed {seed}: a failed write came back"
        );
        assert_eq!(
            engine.last_index(4),
            None,
            "seed {seed}: a failed write came back"
        );
    }
    scenario.teardown();
}

/// Waits (up to 10 s) until the preparer has made `n` files ahead.
fn wait_prepared(engine: &Engine, n: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while engine.metrics().files_prepared < n {
        assert!(std::time::Instant::now() < deadline, "nothing prepared");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Cuts the power on a copy of `fs`, and checks that recovery adopts the
/// active file still under its `recycle-` name and reads back every write;
/// returns the copy.
fn crash_and_adopt(fs: &MemFs, model: &Model, ctx: &str) -> MemFs {
    let copy = fs.deep_clone();
    copy.crash(CrashMode::DropUnsynced);
    let reopened = open(&copy);
    let report = reopened.recovery_report();
    assert!(report.adopted_file.is_some(), "{ctx}: {report:?}");
    model.check(&reopened, ctx);
    copy
}

/// The preparer renames the file a rotation took from it into place without
/// a directory sync. If the power is cut before any later one, the file is
/// back under its `recycle-` name holding synced, acknowledged records:
/// recovery must find it by its header and keep them.
#[test]
fn a_file_made_ahead_whose_rename_a_crash_lost_is_adopted() {
    let scenario = FailScenario::setup();
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut model = Model::default();
    wait_prepared(&engine, 1);
    // From here the preparer syncs no directory: the rename stays unsynced.
    fail::cfg("raftlog::prepare", "return").unwrap();
    while engine.metrics().rotations_prepared == 0 {
        model.append(&engine, 1, 1, true).unwrap();
    }
    for _ in 0..3 {
        model.append(&engine, 1, 1, true).unwrap();
    }
    let copy = crash_and_adopt(&fs, &model, "after the rename was lost");
    // Adopted once, the file is in place for good.
    let again = open(&copy);
    assert!(again.recovery_report().adopted_file.is_none());
    model.check(&again, "after a second reopen");
    drop(again);
    fail::remove("raftlog::prepare");
    // The same writes with the rename made durable by the preparer.
    check_after_crash(&fs, &model, CrashMode::DropUnsynced, "prepared rotation");
    scenario.teardown();
}

/// The preparer renames the file a rotation took from it into place. If the
/// rename fails, the file keeps its `recycle-` name while it takes writes, a
/// crash then finds it by its header, and the next rotation fails its
/// writes until the rename succeeds: no later file may take a name before
/// the active one has its own.
#[test]
fn a_failed_rename_of_a_file_made_ahead_fails_only_the_next_rotation() {
    let scenario = FailScenario::setup();
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut model = Model::default();
    wait_prepared(&engine, 1);
    fail::cfg("raftlog::rotate::rename", "return").unwrap();
    let err = loop {
        if let Err(e) = model.append(&engine, 1, 1, true) {
            break e;
        }
        assert!(
            engine.metrics().files_rotated <= 1,
            "rotated past a rename that failed"
        );
    };
    assert!(is_fail_point_io(&err, "rename"), "{err:?}");
    assert_eq!(engine.metrics().files_rotated, 1);
    // The active file is still under its `recycle-` name.
    crash_and_adopt(&fs, &model, "crashed with the rename pending");
    fail::remove("raftlog::rotate::rename");
    for _ in 0..200 {
        model.append(&engine, 1, 1, true).unwrap();
    }
    assert!(engine.metrics().files_rotated >= 3);
    model.check(&engine, "after the failed rename");
    drop(engine);
    check_after_crash(&fs, &model, CrashMode::DropUnsynced, "failed rename");
    scenario.teardown();
}

/// Rotation encoded and wrote the sealed file's index section on the
/// group-commit leader's path: 70-100 ms at 100,000 groups, with every writer
/// waiting (M-100K's p99.99 was 110-160 ms). The section is the preparer's
/// job now: writes and rotations go on while it is held, and recovery still
/// reads the sections once they are written.
#[test]
fn rotations_do_not_wait_for_the_sealed_files_index_section() {
    let scenario = FailScenario::setup();
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut model = Model::default();
    fail::cfg("raftlog::write_index_section", "pause").unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for _ in 0..300 {
            model.append(&engine, 1, 1, true).unwrap();
        }
        let _ = tx.send((engine, model));
    });
    let received = rx.recv_timeout(std::time::Duration::from_secs(30));
    fail::remove("raftlog::write_index_section");
    let (engine, model) = received.expect("the writes waited for an index section");
    let metrics = engine.metrics();
    assert!(metrics.files_rotated >= 3, "{metrics:?}");
    engine.close().unwrap();
    let engine = open(&fs);
    let report = engine.recovery_report();
    assert!(report.files_from_sections >= 2, "{report:?}");
    model.check(&engine, "after reopen");
    scenario.teardown();
}

/// Found by the kill -9 test at about 200 cycles (a lagging group past
/// 1 MiB, so its copy spans two rewrite records, each in a file of its own
/// at this target size). A purge that compacts the rewrite queue writes a
/// new generation of copies; a crash after the first new file is sealed
/// (synced) and before the next is durable left the old generation whole
/// and the new one in part. Recovery replayed the rewrite queue in file
/// order: the new copy of entries `1..=n`, an append at index 1, dropped
/// the old generation's entries after `n` (Raft's suffix replacement), and
/// every entry after `n` was lost although synced. Now the generation is
/// marked as begun and finished, and recovery reads no unfinished one
/// (`generation.rs`).
#[test]
fn a_crash_inside_a_rewrite_queue_compaction_keeps_a_lagging_group() {
    // The power goes when the purge syncs its last rewrite file: the new
    // generation's earlier files were synced when sealed, its last not.
    let report = crash_in_rewrite_queue_compaction("raftlog::rewrite::sync");
    assert!(!report.rewrite_files_removed.is_empty(), "{report:?}");
}

/// The same compaction with the power going as it removes the old
/// generation: the new one is finished, so the old one's files left are
/// removed at open, unread.
#[test]
fn a_crash_removing_the_old_rewrite_generation_keeps_every_group() {
    let report = crash_in_rewrite_queue_compaction("raftlog::purge::remove_rewrite");
    assert!(!report.rewrite_files_removed.is_empty(), "{report:?}");
}

/// Builds a lagging group whose copy spans two rewrite files, makes the next
/// purge compact the rewrite queue, cuts the power (unsynced data dropped)
/// the first time `fail_point` is passed, and checks every group and key on
/// what the cut left. Returns the recovery report.
fn crash_in_rewrite_queue_compaction(fail_point: &str) -> strata_raftlog::RecoveryReport {
    let scenario = FailScenario::setup();
    // Copies of up to 8 MiB a group (1 MiB by default).
    let config = Config {
        purge_rewrite_group_bytes_max: 8 << 20,
        ..config()
    };
    let open = |fs: &MemFs| {
        let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
        Engine::open_with_fs(DIR, config.clone(), dyn_fs).expect("open")
    };
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut m = Model::default();
    // The lagging group: 1,300 entries of 1000 bytes (two rewrite records),
    // and a key, in batches among the busy group's.
    m.put(&engine, LAGGING, b"k", b"v").unwrap();
    for i in 0..1300u64 {
        m.append(&engine, LAGGING, 1, false).unwrap();
        m.append(&engine, BUSY, 2, false).unwrap();
        if i % 200 == 199 {
            let to = m.last(BUSY) - 10;
            m.compact(&engine, BUSY, to).unwrap();
        }
    }
    engine.sync().unwrap();
    // Purge until the lagging group lies in the rewrite queue.
    let mut rounds = 0;
    while engine.metrics().entries_rewritten < 1300 {
        for _ in 0..200 {
            m.append(&engine, BUSY, 4, false).unwrap();
        }
        let to = m.last(BUSY) - 10;
        m.compact(&engine, BUSY, to).unwrap();
        engine.purge().unwrap();
        rounds += 1;
        assert!(rounds < 200, "the lagging group was never copied");
    }
    // A delete of its copied key sets `min_dirty`: the next purge compacts
    // the rewrite queue into a new generation.
    let mut batch = LogBatch::new();
    batch.delete(LAGGING, b"k");
    engine.write(&mut batch, true).unwrap();
    m.keys.entry(LAGGING).or_default().remove(&b"k"[..]);
    for _ in 0..200 {
        m.append(&engine, BUSY, 4, false).unwrap();
    }
    let to = m.last(BUSY) - 10;
    m.compact(&engine, BUSY, to).unwrap();
    engine.sync().unwrap();
    let cut: Arc<Mutex<Option<MemFs>>> = Arc::default();
    {
        let (cut, fs) = (cut.clone(), fs.clone());
        fail::cfg_callback(fail_point, move || {
            let mut cut = cut.lock().unwrap();
            if cut.is_none() {
                let survivor = fs.deep_clone();
                survivor.crash(CrashMode::DropUnsynced);
                *cut = Some(survivor);
            }
        })
        .unwrap();
    }
    let out = engine.purge().unwrap();
    assert!(out.rewrite_queue_compacted, "{out:?}");
    fail::remove(fail_point);
    m.check(&engine, "the engine that purged");
    drop(engine);
    let survivor = cut
        .lock()
        .unwrap()
        .take()
        .expect("the purge passed the fail point");
    let engine = open(&survivor);
    m.check(&engine, "after the power cut inside the purge");
    let report = engine.recovery_report().clone();
    assert!(
        survivor
            .list(std::path::Path::new(DIR))
            .unwrap()
            .iter()
            .all(|n| !n.starts_with("rewrite-generation-")),
        "markers left after recovery"
    );
    drop(engine);
    scenario.teardown();
    report
}

/// Opens on `fs` wrapped in a `FaultFs` whose syncs take 2 ms: a synced
/// group's round is long, so its leader hands the leadership on before its
/// group reaches the index (on `MemFs` alone rounds are too cheap for that).
fn open_slow_syncs(fs: &MemFs) -> (Engine, FaultFs) {
    let faults = FaultFs::new(Arc::new(fs.clone()));
    faults.set_sync_delay(std::time::Duration::from_millis(2));
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(faults.clone());
    (
        Engine::open_with_fs(DIR, config(), dyn_fs).expect("open"),
        faults,
    )
}

/// Waits up to 10 s for `done`; false if it never held.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    false
}

/// A synced group's index update runs beside the next group's append: while
/// the first group is held before the index, a second writer's group is
/// appended and synced; neither write returns before its group is in the
/// index, and each is readable when it returns.
#[test]
fn the_next_group_appends_while_a_group_reaches_the_index() {
    let scenario = FailScenario::setup();
    let fs = MemFs::new();
    let (engine, faults) = open_slow_syncs(&fs);
    let engine = Arc::new(engine);
    fail::cfg("raftlog::write::index", "pause").unwrap();
    let syncs = faults.count(Op::SyncData);
    let write = |group: u64| {
        let engine = engine.clone();
        std::thread::spawn(move || {
            let mut batch = LogBatch::new();
            batch.add_entries(group, 1, &[entry(group, 1)]);
            engine
                .write(&mut batch, true)
                .map(|_| engine.last_index(group))
        })
    };
    let first = write(1);
    assert!(
        eventually(|| faults.count(Op::SyncData) > syncs),
        "the first group never synced"
    );
    let second = write(2);
    assert!(
        eventually(|| faults.count(Op::SyncData) > syncs + 1),
        "the second group did not sync while the first was held before the index"
    );
    assert_eq!(engine.last_index(1), None, "indexed before the pause ended");
    assert!(
        !first.is_finished() && !second.is_finished(),
        "a write returned before its group was indexed"
    );
    fail::cfg("raftlog::write::index", "off").unwrap();
    let (first, second) = within(30, "writers after the index pause", move || {
        (first.join().unwrap(), second.join().unwrap())
    });
    assert_eq!(first.expect("first write"), Some(1));
    assert_eq!(second.expect("second write"), Some(1));
    assert_eq!(engine.get_entry(2, 1).unwrap(), Some(entry(2, 1)));
    scenario.teardown();
}

/// A rotation waits until the group before it is in the index: a sealed
/// file's records are all indexed, which purge's choice of files counts on.
/// While the group that fills the file is held before the index, the next
/// group, which must rotate, writes nothing; released, both land, and a
/// reopen finds them.
#[test]
fn a_rotation_waits_for_the_group_before_it_to_reach_the_index() {
    let scenario = FailScenario::setup();
    let fs = MemFs::new();
    let (engine, faults) = open_slow_syncs(&fs);
    let engine = Arc::new(engine);
    let mut model = Model::default();
    // Just under the 64 KiB target: the next batch must rotate.
    model.append(&engine, 1, 60, true).unwrap();
    fail::cfg("raftlog::write::index", "pause").unwrap();
    let syncs = faults.count(Op::SyncData);
    let filler = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            let mut batch = LogBatch::new();
            batch.add_entries(2, 1, &[entry(2, 1)]);
            engine.write(&mut batch, true)
        })
    };
    assert!(
        eventually(|| faults.count(Op::SyncData) > syncs),
        "the filling group never synced"
    );
    let writes = faults.count(Op::Write);
    let rotating = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            let mut batch = LogBatch::new();
            for i in 0..8 {
                batch.add_entries(3, 1 + i, &[entry(3, 1 + i)]);
            }
            engine.write(&mut batch, true)
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        faults.count(Op::Write),
        writes,
        "the rotating group wrote while the group before it was not indexed"
    );
    fail::cfg("raftlog::write::index", "off").unwrap();
    within(30, "writers after the index pause", move || {
        filler.join().unwrap().expect("filler");
        rotating.join().unwrap().expect("rotating");
    });
    assert_eq!(engine.last_index(2), Some(1));
    assert_eq!(engine.last_index(3), Some(8));
    drop(engine);
    let engine = open(&fs);
    model.check(&engine, "reopen after the rotation");
    assert_eq!(engine.get_entry(2, 1).unwrap(), Some(entry(2, 1)));
    assert_eq!(engine.get_entry(3, 8).unwrap(), Some(entry(3, 8)));
    scenario.teardown();
}
