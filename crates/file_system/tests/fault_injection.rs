//! `FaultFs` fails the operations it is told to with the kernel's errno, runs
//! out of space like a full disk, and flips bits on read without touching the
//! stored data.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use strata_fs::{FaultFs, FileSystem, MemFs, Op};

fn setup() -> (MemFs, FaultFs) {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    fault.create_dir_all(Path::new("/db")).unwrap();
    (mem, fault)
}

#[test]
fn fail_after_fails_every_later_sync_with_eio() {
    let (_, fs) = setup();
    let file = fs.create(Path::new("/db/f")).unwrap();
    fs.fail_after(Op::SyncData, 2, libc::EIO);
    file.sync_data().unwrap();
    file.sync_data().unwrap();
    for _ in 0..3 {
        let err = file.sync_data().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO));
    }
    file.sync_all().unwrap();
    assert_eq!(fs.count(Op::SyncData), 5);
    assert_eq!(fs.count(Op::SyncAll), 1);
    fs.clear_faults();
    file.sync_data().unwrap();
}

#[test]
fn fail_once_after_fails_one_call() {
    let (_, fs) = setup();
    fs.fail_once_after(Op::Create, 1, libc::EIO);
    fs.create(Path::new("/db/a")).unwrap();
    let err = fs.create(Path::new("/db/b")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    assert!(!fs.exists(Path::new("/db/b")), "a failed call does nothing");
    fs.create(Path::new("/db/b")).unwrap();
    assert_eq!(fs.count(Op::Create), 3);
}

#[test]
fn growth_past_the_budget_fails_with_enospc_until_space_returns() {
    let (mem, fs) = setup();
    let file = fs.create(Path::new("/db/f")).unwrap();
    fs.set_space_left(Some(10));
    file.write_at(0, b"12345678").unwrap();

    let err = file.write_at(8, b"abcd").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    assert_eq!(err.kind(), ErrorKind::StorageFull);
    assert_eq!(file.len().unwrap(), 10, "the part that fits is written");
    // Overwriting needs no space.
    file.write_at(0, b"ABCDEFGHIJ").unwrap();
    assert_eq!(
        file.allocate(11).unwrap_err().kind(),
        ErrorKind::StorageFull
    );
    assert_eq!(
        mem.open(Path::new("/db/f"), false).unwrap().len().unwrap(),
        10
    );

    // Removing the file gives its bytes back.
    fs.remove(Path::new("/db/f")).unwrap();
    let other = fs.create(Path::new("/db/g")).unwrap();
    other.allocate(10).unwrap();
    assert_eq!(
        other.write_at(10, b"x").unwrap_err().kind(),
        ErrorKind::StorageFull
    );
    // Shrinking gives bytes back too.
    other.truncate(4).unwrap();
    other.write_at(4, b"123456").unwrap();
    assert!(other.write_at(10, b"x").is_err());

    fs.set_space_left(None);
    other.write_at(10, &[7; 1000]).unwrap();
    assert_eq!(other.len().unwrap(), 1010);
}

#[test]
fn bit_flips_on_read_leave_the_stored_data_alone() {
    let (mem, fs) = setup();
    let path = Path::new("/db/f");
    let file = fs.create(path).unwrap();
    file.write_at(0, b"hello").unwrap();
    fs.flip_bit_on_read(path, 1, 5);

    let mut buf = [0; 5];
    file.read_exact_at(0, &mut buf).unwrap();
    assert_eq!(&buf, b"hEllo");
    let mut tail = [0; 3];
    fs.open(path, false)
        .unwrap()
        .read_exact_at(2, &mut tail)
        .unwrap();
    assert_eq!(&tail, b"llo", "reads not covering the byte are clean");

    let mut stored = [0; 5];
    mem.open(path, false)
        .unwrap()
        .read_exact_at(0, &mut stored)
        .unwrap();
    assert_eq!(&stored, b"hello");

    fs.clear_faults();
    file.read_exact_at(0, &mut buf).unwrap();
    assert_eq!(&buf, b"hello");
    assert_eq!(
        fs.count(Op::Read),
        3,
        "reads straight from MemFs are not seen"
    );
}

#[test]
fn other_operations_pass_through_and_can_fail() {
    let (_, fs) = setup();
    fs.create(Path::new("/db/a")).unwrap();
    fs.rename(Path::new("/db/a"), Path::new("/db/b")).unwrap();
    assert_eq!(fs.list(Path::new("/db")).unwrap(), ["b"]);
    fs.fail_after(Op::SyncDir, 0, libc::EIO);
    assert_eq!(
        fs.sync_dir(Path::new("/db")).unwrap_err().raw_os_error(),
        Some(libc::EIO)
    );
    fs.fail_after(Op::Open, 0, libc::EACCES);
    assert_eq!(
        fs.open(Path::new("/db/b"), true).unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
    let _guard = fs.lock(Path::new("/db/LOCK")).unwrap();
    assert_eq!(
        fs.lock(Path::new("/db/LOCK")).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert_eq!(fs.count(Op::Lock), 2);
}

#[test]
fn write_vectored_at_is_one_write_under_the_budget() {
    use std::io::IoSlice;
    let (mem, fs) = setup();
    let file = fs.create(Path::new("/db/v")).unwrap();
    fs.set_space_left(Some(10));
    let err = file
        .write_vectored_at(0, &[IoSlice::new(b"hello"), IoSlice::new(b" world!")])
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    // As `write_at` of the joined bytes: what fits is written, and it counts once.
    assert_eq!(fs.count(Op::Write), 1);
    let mut buf = [0; 10];
    mem.open(Path::new("/db/v"), false)
        .unwrap()
        .read_exact_at(0, &mut buf)
        .unwrap();
    assert_eq!(&buf, b"hello worl");
    fs.set_space_left(None);
    fs.fail_once_after(Op::Write, 0, libc::EIO);
    let err = file
        .write_vectored_at(0, &[IoSlice::new(b"a"), IoSlice::new(b"b")])
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
}
