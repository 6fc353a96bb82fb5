//! A failure while writing outputs (EIO on a write or a sync, ENOSPC, a
//! failed create or directory sync) returns the error and leaves no output
//! file behind: only the inputs remain in the directory.

mod compaction_support;

use std::path::Path;

use compaction_support::*;
use strata_fs::{FaultFs, FileSystem, Op};
use strata_lsm::compaction::write_sorted_run;
use strata_lsm::{Error, Memtable, MergingIterator, ValueKind};

fn memtable() -> Memtable {
    let m = Memtable::new(1);
    for k in 0..200u32 {
        m.insert(
            format!("key{k:04}").as_bytes(),
            1 + k as u64,
            ValueKind::Put,
            &[b'v'; 100],
        )
        .unwrap();
    }
    m.insert(b"key0050", 500, ValueKind::RangeDelete, b"key0060")
        .unwrap();
    m
}

/// Runs a compaction of `memtable()` into 4 KiB files on `fs` after
/// `arm` set its fault; returns the error and the files left.
fn fail_with(arm: impl Fn(&FaultFs)) -> (Error, Vec<String>) {
    let mem = mem_fs();
    let fs = FaultFs::new(mem.clone());
    let m = memtable();
    let n = Numbers::new(10);
    let next = || n.next();
    let ctx = context(&fs, &next, &[], false, 4096);
    arm(&fs);
    let mut it = MergingIterator::new(vec![m.iter()]);
    let err = write_sorted_run(&mut it, m.range_tombstones(u64::MAX >> 8), &ctx).unwrap_err();
    fs.clear_faults();
    fs.set_space_left(None);
    (err, mem.list(Path::new(DIR)).unwrap())
}

#[test]
fn without_faults_the_run_makes_several_files() {
    let fs = mem_fs();
    let m = memtable();
    let n = Numbers::new(10);
    let next = || n.next();
    let ctx = context(&*fs, &next, &[], false, 4096);
    let mut it = MergingIterator::new(vec![m.iter()]);
    let out = write_sorted_run(&mut it, m.range_tombstones(u64::MAX >> 8), &ctx).unwrap();
    assert!(out.len() >= 3, "{} files", out.len());
    assert_eq!(fs.list(Path::new(DIR)).unwrap().len(), out.len());
}

fn assert_io(err: &Error, errno: i32) {
    match err {
        Error::Io { source, .. } => assert_eq!(source.raw_os_error(), Some(errno), "{err}"),
        other => panic!("expected an I/O error, got {other}"),
    }
}

#[test]
fn eio_on_a_later_write_removes_every_output() {
    for n in [0, 1, 3, 5] {
        let (err, left) = fail_with(|fs| fs.fail_after(Op::Write, n, libc::EIO));
        assert_io(&err, libc::EIO);
        assert!(left.is_empty(), "after {n} writes: {left:?}");
    }
}

#[test]
fn eio_on_sync_removes_every_output() {
    for n in [0, 2] {
        let (err, left) = fail_with(|fs| fs.fail_after(Op::SyncData, n, libc::EIO));
        assert_io(&err, libc::EIO);
        assert!(left.is_empty(), "{left:?}");
    }
}

#[test]
fn a_full_disk_removes_every_output() {
    for space in [0, 5000, 12_000] {
        let (err, left) = fail_with(|fs| fs.set_space_left(Some(space)));
        assert_io(&err, libc::ENOSPC);
        assert!(left.is_empty(), "{left:?}");
    }
}

#[test]
fn a_failed_create_or_directory_sync_removes_every_output() {
    let (err, left) = fail_with(|fs| fs.fail_after(Op::Create, 2, libc::EIO));
    assert_io(&err, libc::EIO);
    assert!(left.is_empty(), "{left:?}");
    let (err, left) = fail_with(|fs| fs.fail_after(Op::SyncDir, 0, libc::EIO));
    assert_io(&err, libc::EIO);
    assert!(left.is_empty(), "{left:?}");
}
