//! A crash at each step of an ingestion: the Nth call of each file-system
//! operation the ingestion makes fails (and every later one, as a dying
//! disk would), then the power is cut. The reopened database holds the
//! contents before the ingestion or after it, never a mix; after an
//! ingestion that returned Ok, always after.

mod db_ingest_support;
mod db_support;

use std::path::Path;
use std::sync::Arc;

use db_ingest_support::*;
use db_support::*;
use strata_fs::{CrashMode, FaultFs, FileSystem, MemFs, Op};
use strata_lsm::{Db, Hooks, IngestOptions, ReadOptions, WriteOptions};

fn contents(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db
        .iter(&ReadOptions::default(), &db.default_column_family())
        .expect("iter");
    let fwd = scan_forward(&mut it);
    assert_eq!(scan_backward(&mut it), fwd, "both directions agree");
    fwd
}

/// A database with data in files and in the (synced) WAL, and the
/// external file, all durable.
fn base() -> MemFs {
    let fs = MemFs::new();
    let db = open(&fs, options()).expect("open");
    let cf = db.default_column_family();
    let sync = WriteOptions {
        sync: true,
        ..WriteOptions::default()
    };
    for i in 0..40 {
        db.put(&sync, &cf, &key(i), b"base").expect("put");
    }
    db.flush(&cf, true).expect("flush");
    for i in (0..40).step_by(3) {
        db.put(&sync, &cf, &key(i), b"wal").expect("put");
    }
    db.close().expect("close");
    fs.create_dir_all(Path::new("/external")).expect("dir");
    let p = external_path("snap");
    write_external(
        &fs,
        &p,
        &puts((10..30).filter(|i| i % 2 == 0).map(key), "snap"),
    );
    fs.sync_dir(Path::new("/external")).expect("sync dir");
    fs
}

/// Small options without background compactions, so that the calls a
/// fault counts are the ingestion's (and its flush's) only.
fn options() -> strata_lsm::Options {
    let mut o = small_options();
    let c = &mut o.default_column_family.compaction;
    c.level0_compaction_trigger = 64;
    c.level0_slowdown_trigger = 64;
    c.level0_stop_trigger = 128;
    o
}

fn open_on(fs: &Arc<dyn FileSystem>, options: strata_lsm::Options) -> Db {
    Db::open_with(fs.clone(), DIR, options, Hooks::default()).expect("open")
}

fn run(db: &Db, move_files: bool) -> strata_lsm::Result<strata_lsm::IngestReport> {
    let cf = db.default_column_family();
    db.replace_range(
        &cf,
        &key(10),
        &key(30),
        &[external_path("snap")],
        &IngestOptions { move_files },
    )
}

#[test]
fn a_crash_at_any_step_leaves_the_old_state_or_the_new() {
    let ops = [
        Op::Open,
        Op::Read,
        Op::Create,
        Op::Write,
        Op::SyncAll,
        Op::SyncData,
        Op::SyncDir,
        Op::Link,
        Op::Remove,
    ];
    let crashes = sweep(options(), &ops);
    assert!(crashes > 20, "only {crashes} crashes");
}

/// The same with the compaction that opening schedules racing the
/// ingestion, so that faults land in its writes too. Found: a compaction
/// whose manifest append failed after its record was synced deleted its
/// outputs, and the next open refused the manifest that named them.
#[test]
fn a_failed_append_racing_a_compaction_never_loses_a_named_file() {
    for _ in 0..3 {
        sweep(small_options(), &[Op::Write, Op::SyncData]);
    }
}

/// For each op, fails it from each of its calls in an ingestion on, cuts
/// the power in three modes and checks the reopened contents. Returns the
/// number of crashes.
fn sweep(options: strata_lsm::Options, ops: &[Op]) -> u64 {
    let base = base();
    let old = {
        let fs = base.deep_clone();
        let db = open(&fs, options.clone()).expect("open");
        contents(&db)
    };
    let new = {
        let fs = base.deep_clone();
        let db = open(&fs, options.clone()).expect("open");
        run(&db, false).expect("ingest");
        contents(&db)
    };
    assert_ne!(old, new);
    let mut crashes = 0;
    for move_files in [false, true] {
        for &op in ops {
            // How many calls of `op` a whole ingestion makes.
            let calls = {
                let mem = base.deep_clone();
                let fault = FaultFs::new(Arc::new(mem.clone()));
                let fs: Arc<dyn FileSystem> = Arc::new(fault.clone());
                let db = open_on(&fs, options.clone());
                let before = fault.count(op);
                run(&db, move_files).expect("ingest");
                fault.count(op) - before
            };
            for n in 0..=calls {
                let mem = base.deep_clone();
                let fault = FaultFs::new(Arc::new(mem.clone()));
                let fs: Arc<dyn FileSystem> = Arc::new(fault.clone());
                let db = open_on(&fs, options.clone());
                fault.fail_after(op, n, libc::EIO);
                let outcome = run(&db, move_files);
                let seed = n * 31 + op as u64;
                for mode in [
                    CrashMode::DropUnsynced,
                    CrashMode::KeepRandomPrefix { seed },
                    CrashMode::KeepRandomPages { seed },
                ] {
                    let survivor = power_cut(&mem, mode);
                    let db2 = open(&survivor, options.clone()).unwrap_or_else(|e| {
                        panic!("{op:?} failing after {n} (move {move_files}): reopen: {e}")
                    });
                    let got = contents(&db2);
                    if outcome.is_ok() {
                        assert_eq!(got, new, "{op:?} after {n}: acknowledged, yet lost");
                    } else {
                        assert!(
                            got == old || got == new,
                            "{op:?} failing after {n} (move {move_files}): a mix of old and new"
                        );
                    }
                    crashes += 1;
                }
                drop(db);
            }
        }
    }
    crashes
}
