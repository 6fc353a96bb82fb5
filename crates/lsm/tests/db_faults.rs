//! Fault injection through the file-system layer: EIO and ENOSPC in every
//! kind of call (so in WAL, flush, compaction and manifest writes alike),
//! and bit flips in every kind of file. A failed call returns an error or
//! turns the engine read-only; reads go on; a reopen once the fault is
//! gone recovers every acknowledged write; a flipped bit is reported as
//! corruption, never returned as a wrong value, and never loses a key
//! silently (the WAL after a clean close, and the manifest after every
//! edit, end with a marker record whose `synced_end` vouches for the
//! records before it).

mod db_support;

use std::path::Path;
use std::sync::Arc;

use db_support::*;
use strata_fs::{FaultFs, FileSystem, MemFs, Op};
use strata_lsm::{Db, Error, Hooks, ReadOptions, WriteOptions};

fn open_faulty(fs: &FaultFs) -> strata_lsm::Result<Db> {
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    Db::open_with(dyn_fs, DIR, small_options(), Hooks::default())
}

/// Writes keys 0.. (each synced every few) until a write fails or `n` are
/// acknowledged; returns the acknowledged ones.
fn write_until_error(db: &Db, n: u32) -> (Vec<u32>, Option<Error>) {
    let cf = db.default_column_family();
    let mut acked = Vec::new();
    for i in 0..n {
        let options = WriteOptions {
            sync: i % 4 == 0,
            ..WriteOptions::default()
        };
        match db.put(&options, &cf, &key(i), &value(u64::from(i), 200)) {
            Ok(()) => acked.push(i),
            Err(e) => return (acked, Some(e)),
        }
    }
    (acked, None)
}

#[test]
fn every_kind_of_failed_call_stops_writes_and_reopen_recovers_what_was_acknowledged() {
    let ops = [
        Op::Write,
        Op::SyncData,
        Op::SyncAll,
        Op::Create,
        Op::Rename,
        Op::SyncDir,
        Op::Open,
    ];
    for op in ops {
        for after in [0u64, 1, 3, 8, 20] {
            let mem = MemFs::new();
            let fs = FaultFs::new(Arc::new(mem.clone()));
            let db = open_faulty(&fs).expect("open");
            fs.fail_after(op, after, libc::EIO);
            let (acked, err) = write_until_error(&db, 300);
            // Background failures stop writes a little later: wait for them.
            let cf = db.default_column_family();
            let _ = db.flush(&cf, true);
            if let Some(e) = &err {
                assert!(
                    matches!(e, Error::ReadOnly(_) | Error::Io { .. }),
                    "{op:?} after {after}: {e}"
                );
                // Reads go on.
                check_acked(
                    &db,
                    &acked,
                    200,
                    &format!("{op:?} after {after}: reads after the failure"),
                );
                match db.put(&WriteOptions::default(), &cf, b"more", b"x") {
                    Err(Error::ReadOnly(_)) => {}
                    other => {
                        panic!("{op:?} after {after}: a write after the failure gave {other:?}")
                    }
                }
            }
            fs.clear_faults();
            drop(db);
            let db = open_faulty(&fs).expect("reopen once the fault is gone");
            check_acked(
                &db,
                &acked,
                200,
                &format!("{op:?} after {after}: after reopen"),
            );
            db.put(&WriteOptions::default(), &cf_default(&db), b"more", b"x")
                .expect("writes work after reopen");
        }
    }
}

fn cf_default(db: &Db) -> strata_lsm::ColumnFamily {
    db.default_column_family()
}

#[test]
fn running_out_of_space_is_an_error_and_nothing_acknowledged_is_lost() {
    for space in [2u64 << 10, 20 << 10, 60 << 10, 150 << 10] {
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let db = open_faulty(&fs).expect("open");
        fs.set_space_left(Some(space));
        let (acked, err) = write_until_error(&db, 2000);
        assert!(err.is_some(), "{space} bytes must run out");
        check_acked(
            &db,
            &acked,
            200,
            &format!("{space} bytes: once out of space"),
        );
        fs.set_space_left(None);
        // Writes resume by themselves once space is back.
        std::thread::sleep(std::time::Duration::from_millis(250));
        let cf = db.default_column_family();
        for i in 5000..5050u32 {
            db.put(
                &WriteOptions::default(),
                &cf,
                &key(i),
                &value(u64::from(i), 200),
            )
            .unwrap_or_else(|e| panic!("{space}: a write with space back: {e}"));
        }
        check_acked(&db, &acked, 200, &format!("{space} bytes: with space back"));
        db.close().expect("close");
        let db = open_faulty(&fs).expect("reopen");
        check_acked(&db, &acked, 200, &format!("{space} bytes: after reopen"));
        check_acked(
            &db,
            &(5000..5050).collect::<Vec<u32>>(),
            200,
            &format!("{space} bytes: written with space back"),
        );
    }
}

fn files_ending(mem: &MemFs, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = mem
        .list(Path::new(DIR))
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(suffix) || (suffix == "MANIFEST" && n.starts_with("MANIFEST")))
        .collect();
    names.sort();
    names
}

/// A database of 300 keys over several SST files, closed cleanly, and the
/// same keys written after the last flush (so the WAL holds them too).
fn populated() -> (MemFs, Vec<u32>) {
    let mem = MemFs::new();
    let db = open(&mem, small_options()).expect("open");
    let (acked, err) = write_until_error(&db, 300);
    assert!(err.is_none());
    db.flush(&db.default_column_family(), true).expect("flush");
    let cf = db.default_column_family();
    for i in 300..340u32 {
        db.put(
            &WriteOptions::default(),
            &cf,
            &key(i),
            &value(u64::from(i), 200),
        )
        .expect("put");
    }
    db.close().expect("close");
    let mut all = acked;
    all.extend(300..340);
    (mem, all)
}

/// Reads every key: each is either right or a `Corruption` error.
fn never_wrong(db: &Db, keys: &[u32]) -> usize {
    let cf = db.default_column_family();
    let mut errors = 0;
    for &i in keys {
        match db.get(&ReadOptions::default(), &cf, &key(i)) {
            Ok(Some(v)) => assert_eq!(v, value(u64::from(i), 200), "key {i}: a wrong value"),
            Ok(None) => panic!("key {i} vanished without an error"),
            Err(Error::Corruption { .. }) => errors += 1,
            Err(e) => panic!("key {i}: {e}"),
        }
    }
    match db.iter(&ReadOptions::default(), &cf) {
        Ok(mut it) => {
            let mut r = it.seek_to_first();
            while r.is_ok() && it.valid() {
                let k = String::from_utf8_lossy(it.key()).to_string();
                if let Some(i) = k.strip_prefix("key").and_then(|n| n.parse::<u64>().ok()) {
                    assert_eq!(
                        it.value(),
                        value(i, 200).as_slice(),
                        "scan: a wrong value at {k}"
                    );
                }
                r = it.next();
            }
            if let Err(e) = r {
                assert!(matches!(e, Error::Corruption { .. }), "scan: {e}");
            }
        }
        Err(e) => assert!(matches!(e, Error::Corruption { .. }), "iter: {e}"),
    }
    errors
}

#[test]
fn bit_flips_in_sst_files_are_corruption_never_a_wrong_value() {
    let (mem, keys) = populated();
    let ssts = files_ending(&mem, ".sst");
    assert!(!ssts.is_empty());
    let mut detected = 0;
    for (n, name) in ssts.iter().enumerate() {
        let path = Path::new(DIR).join(name);
        let len = mem.open(&path, false).expect("open").len().expect("len");
        for step in 0..6u64 {
            let offset = (step * 7919 + n as u64 * 131) % len;
            let copy = mem.deep_clone();
            copy.corrupt(&path, offset, 0x10).expect("corrupt");
            match open(&copy, small_options()) {
                Ok(db) => detected += never_wrong(&db, &keys),
                Err(e) => {
                    assert!(matches!(e, Error::Corruption { .. }), "open: {e}");
                    detected += 1;
                }
            }
        }
    }
    assert!(detected > 0, "some flips must be detected");
}

#[test]
fn bit_flips_in_the_wal_and_manifest_are_corruption_or_a_clean_cut() {
    let (mem, keys) = populated();
    for kind in [".wal", "MANIFEST", "CURRENT"] {
        let names = files_ending(&mem, kind);
        assert!(!names.is_empty(), "no {kind} file");
        let path = Path::new(DIR).join(&names[names.len() - 1]);
        let len = mem.open(&path, false).expect("open").len().expect("len");
        for step in 0..24u64 {
            let offset = (step * 131 + 7) % len;
            let copy = mem.deep_clone();
            copy.corrupt(&path, offset, 0x04).expect("corrupt");
            match open(&copy, small_options()) {
                Ok(db) => {
                    // Only a flip in a closing marker record may be cut
                    // (it holds nothing); every key is there, exact.
                    let cf = db.default_column_family();
                    for &i in &keys {
                        assert_eq!(
                            db.get(&ReadOptions::default(), &cf, &key(i)).expect("get"),
                            Some(value(u64::from(i), 200)),
                            "{kind} flip at {offset}: key {i}"
                        );
                    }
                }
                Err(e) => assert!(
                    matches!(e, Error::Corruption { .. }),
                    "{kind} flip at {offset}: {e}"
                ),
            }
        }
    }
}
