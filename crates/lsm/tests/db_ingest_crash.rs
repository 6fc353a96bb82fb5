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
    let db = open(&fs, small_options()).expect("open");
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

fn open_on(fs: &Arc<dyn FileSystem>) -> Db {
    Db::open_with(fs.clone(), DIR, small_options(), Hooks::default()).expect("open")
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
    let base = base();
    let old = {
        let fs = base.deep_clone();
        let db = open(&fs, small_options()).expect("open");
        contents(&db)
    };
    let new = {
        let fs = base.deep_clone();
        let db = open(&fs, small_options()).expect("open");
        run(&db, false).expect("ingest");
        contents(&db)
    };
    assert_ne!(old, new);
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
    let mut crashes = 0;
    for move_files in [false, true] {
        for op in ops {
            // How many calls of `op` a whole ingestion makes.
            let calls = {
                let mem = base.deep_clone();
                let fault = FaultFs::new(Arc::new(mem.clone()));
                let fs: Arc<dyn FileSystem> = Arc::new(fault.clone());
                let db = open_on(&fs);
                let before = fault.count(op);
                run(&db, move_files).expect("ingest");
                fault.count(op) - before
            };
            eprintln!("move {move_files}: {op:?} called {calls} times");
            for n in 0..=calls {
                let mem = base.deep_clone();
                let fault = FaultFs::new(Arc::new(mem.clone()));
                let fs: Arc<dyn FileSystem> = Arc::new(fault.clone());
                let db = open_on(&fs);
                fault.fail_after(op, n, libc::EIO);
                let outcome = run(&db, move_files);
                let seed = n * 31 + op as u64;
                for mode in [
                    CrashMode::DropUnsynced,
                    CrashMode::KeepRandomPrefix { seed },
                    CrashMode::KeepRandomPages { seed },
                ] {
                    let survivor = power_cut(&mem, mode);
                    let db2 = open(&survivor, small_options()).unwrap_or_else(|e| {
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
    eprintln!("{crashes} crashes");
    assert!(crashes > 20, "only {crashes} crashes");
}
