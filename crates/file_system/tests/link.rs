//! `FileSystem::link` on each implementation: a second name of the same
//! bytes, refused over an existing name; on `MemFs` the new name is durable
//! only after a sync of its directory, and the bytes only as far as they
//! were synced; `FaultFs` counts and fails it as `Op::Link`.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use strata_fs::{CrashMode, DiskFs, FaultFs, FileSystem, MemFs, Op};

fn read_all(fs: &dyn FileSystem, path: &Path) -> Vec<u8> {
    let file = fs.open(path, false).unwrap();
    let mut buf = vec![0; file.len().unwrap() as usize];
    file.read_exact_at(0, &mut buf).unwrap();
    buf
}

fn links_share_bytes(fs: &dyn FileSystem, dir: &Path) {
    let a = dir.join("a");
    let b = dir.join("b");
    let f = fs.create(&a).unwrap();
    f.write_at(0, b"hello").unwrap();
    f.sync_all().unwrap();
    fs.link(&a, &b).unwrap();
    assert_eq!(read_all(fs, &b), b"hello");
    // One file: a write through either name shows through the other.
    fs.open(&b, true).unwrap().write_at(0, b"J").unwrap();
    assert_eq!(read_all(fs, &a), b"Jello");
    // Removing one name keeps the other.
    fs.remove(&a).unwrap();
    assert_eq!(read_all(fs, &b), b"Jello");
    // An existing name is refused, a missing source too.
    let c = dir.join("c");
    fs.create(&c).unwrap();
    assert_eq!(
        fs.link(&b, &c).unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    assert_eq!(
        fs.link(&dir.join("nothing"), &dir.join("d"))
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
}

#[test]
fn disk_links() {
    let tmp = tempfile::tempdir().unwrap();
    links_share_bytes(&DiskFs::new(), tmp.path());
}

#[test]
fn mem_links() {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/d")).unwrap();
    links_share_bytes(&fs, Path::new("/d"));
}

#[test]
fn a_link_is_durable_after_its_directory_is_synced() {
    let fs = MemFs::new();
    let (src, dst) = (Path::new("/x/src"), Path::new("/y/dst"));
    fs.create_dir_all(Path::new("/x")).unwrap();
    fs.create_dir_all(Path::new("/y")).unwrap();
    let f = fs.create(src).unwrap();
    f.write_at(0, b"data").unwrap();
    f.sync_all().unwrap();
    fs.sync_dir(Path::new("/x")).unwrap();
    fs.sync_dir(Path::new("/y")).unwrap();

    fs.link(src, dst).unwrap();
    let lost = fs.deep_clone();
    lost.crash(CrashMode::DropUnsynced);
    assert!(!lost.exists(dst), "an unsynced link survived");
    assert_eq!(read_all(&lost, src), b"data");

    fs.sync_dir(Path::new("/y")).unwrap();
    let kept = fs.deep_clone();
    kept.crash(CrashMode::DropUnsynced);
    assert_eq!(read_all(&kept, dst), b"data");
    assert_eq!(read_all(&kept, src), b"data");
}

#[test]
fn fault_fs_counts_and_fails_links() {
    let mem = MemFs::new();
    mem.create_dir_all(Path::new("/d")).unwrap();
    mem.create(Path::new("/d/a")).unwrap();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    fault.fail_once_after(Op::Link, 1, libc::EXDEV);
    fault.link(Path::new("/d/a"), Path::new("/d/b")).unwrap();
    let e = fault
        .link(Path::new("/d/a"), Path::new("/d/c"))
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EXDEV));
    assert!(!mem.exists(Path::new("/d/c")));
    fault.link(Path::new("/d/a"), Path::new("/d/c")).unwrap();
    assert_eq!(fault.count(Op::Link), 3);
}
