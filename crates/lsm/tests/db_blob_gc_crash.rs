//! Blob GC interrupted at every step: the I/O call of each kind that a GC
//! makes (create the new blob file, write it, sync it, sync the directory,
//! append the edit to the manifest, remove the old file) fails in turn with
//! EIO, and the power goes at once. After the reopen, every key reads its
//! last acknowledged value, the engine opens without a missing or orphan
//! blob file, and the GC finishes on its own.

mod db_support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use db_support::*;
use strata_fs::{CrashMode, FaultFs, FileSystem, MemFs, Op};
use strata_lsm::{Db, Hooks, Options, ReadOptions, WriteBatch, WriteOptions};

const KEYS: u32 = 1200;
const OVERWRITTEN: u32 = 600;

fn options() -> Options {
    let mut o = small_options();
    let cf = &mut o.default_column_family;
    cf.blob.min_blob_size = Some(100);
    cf.blob.block_size_bytes = 2048;
    cf.write_buffer_bytes = 8 << 20;
    o
}

fn k(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn v(i: u32, round: u64) -> Vec<u8> {
    value(u64::from(i) + round * 1_000_000, 300)
}

fn put(db: &Db, keys: std::ops::Range<u32>, round: u64) {
    let cf = db.default_column_family();
    for chunk in keys.collect::<Vec<_>>().chunks(64) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            b.put(cf.id(), &k(i), &v(i, round));
        }
        db.write(&WriteOptions::default(), &b).unwrap();
    }
}

fn blob_files(fs: &dyn FileSystem) -> Vec<String> {
    let mut names: Vec<String> = fs
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".blob"))
        .collect();
    names.sort();
    names
}

/// A database whose first blob file is half dead once the overwritten
/// range is compacted: the compaction and the in-place rewrites that
/// follow are the GC under test. Returns it closed, and the old file.
fn prepared() -> (MemFs, String) {
    let fs = MemFs::new();
    let db = open(&fs, options()).unwrap();
    let cf = db.default_column_family();
    put(&db, 0..KEYS, 1);
    db.flush(&cf, true).unwrap();
    db.compact_range(&cf, None, None).unwrap();
    let old = blob_files(&fs)[0].clone();
    put(&db, 0..OVERWRITTEN, 2);
    db.flush(&cf, true).unwrap();
    db.close().unwrap();
    (fs, old)
}

fn check(db: &Db, ctx: &str) {
    let cf = db.default_column_family();
    for i in 0..KEYS {
        let round = if i < OVERWRITTEN { 2 } else { 1 };
        let got = db.get(&ReadOptions::default(), &cf, &k(i)).unwrap();
        assert!(got == Some(v(i, round)), "{ctx}: key {i}");
    }
}

/// Runs the GC with the call after `n` calls of `op` failing, cuts the
/// power, reopens and checks. Returns false once the GC ran without
/// reaching that call.
fn interrupted(base: &MemFs, old: &str, op: Op, n: u64) -> bool {
    let mem = base.deep_clone();
    let faulty = FaultFs::new(Arc::new(mem.clone()));
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(faulty.clone());
    let db = Db::open_with(dyn_fs, DIR, options(), Hooks::default()).unwrap();
    let before = faulty.count(op);
    faulty.fail_after(op, n, libc::EIO);
    let cf = db.default_column_family();
    let _ = db.compact_range(&cf, Some(&k(0)), Some(&k(OVERWRITTEN - 1)));
    let start = Instant::now();
    let old_path = Path::new(DIR).join(old);
    let mut fired = false;
    while start.elapsed() < Duration::from_secs(5) {
        fired = faulty.count(op) > before + n;
        if fired || !mem.exists(&old_path) {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let cut = power_cut(&mem, CrashMode::DropUnsynced);
    drop(db);
    let db = open(&cut, options()).unwrap_or_else(|e| panic!("{op:?} after {n}: open: {e}"));
    check(&db, &format!("{op:?} after {n}, cut"));
    // Left alone, the GC completes and the old file goes.
    let cf = db.default_column_family();
    let _ = db.compact_range(&cf, Some(&k(0)), Some(&k(OVERWRITTEN - 1)));
    let start = Instant::now();
    while cut.exists(&old_path) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{op:?} after {n}: the GC never finished after the reopen"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    check(&db, &format!("{op:?} after {n}, collected"));
    db.close().unwrap();
    fired
}

#[test]
fn a_power_cut_at_any_io_call_of_blob_gc_loses_nothing() {
    let (base, old) = prepared();
    let mut cuts = 0;
    for op in [Op::Create, Op::Write, Op::SyncData, Op::SyncDir, Op::Remove] {
        let mut n = 0;
        while interrupted(&base, &old, op, n) {
            cuts += 1;
            n += 1;
            assert!(n < 400, "{op:?}: the GC keeps making calls");
        }
    }
    // 23 when written: every create, write, sync, directory sync and
    // removal the GC makes here.
    assert!(cuts > 10, "only {cuts} interrupted runs");
}
