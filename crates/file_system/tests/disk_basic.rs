//! `DiskFs` against a real temporary directory: every trait method does what
//! the trait says, and errors carry the kernel's errno.

use std::path::Path;

use strata_fs::{DiskFs, FileSystem};

#[test]
fn files_names_and_locks_behave_on_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = DiskFs::new();
    let dir = tmp.path().join("a/b");
    fs.create_dir_all(&dir).unwrap();
    assert!(fs.exists(&dir));

    let path = dir.join("f");
    let file = fs.create(&path).unwrap();
    assert_eq!(
        fs.create(&path).unwrap_err().kind(),
        std::io::ErrorKind::AlreadyExists
    );
    assert!(file.is_empty().unwrap());

    file.write_at(0, b"hello").unwrap();
    file.write_at(8, b"world").unwrap();
    assert_eq!(file.len().unwrap(), 13);
    let mut buf = [0xFF; 13];
    file.read_exact_at(0, &mut buf).unwrap();
    assert_eq!(&buf, b"hello\0\0\0world");
    let mut tail = [0; 4];
    assert_eq!(file.read_at(11, &mut tail).unwrap(), 2);
    assert_eq!(file.read_at(100, &mut tail).unwrap(), 0);
    file.sync_data().unwrap();
    file.sync_all().unwrap();
    // Dropping the cache of a synced file, or starting writeback of part
    // of it, changes nothing a reader sees.
    file.drop_cache(0, 0).unwrap();
    file.drop_cache(4, 4).unwrap();
    file.start_writeback(0, 8).unwrap();
    file.will_need(0, 13).unwrap();
    let mut again = [0xFF; 13];
    file.read_exact_at(0, &mut again).unwrap();
    assert_eq!(again, buf);

    file.allocate(4096).unwrap();
    assert_eq!(file.len().unwrap(), 4096);
    file.allocate(10).unwrap();
    assert_eq!(file.len().unwrap(), 4096, "allocate never shrinks");
    let mut zeros = [1u8; 16];
    file.read_exact_at(4080, &mut zeros).unwrap();
    assert_eq!(zeros, [0; 16]);
    file.truncate(5).unwrap();
    assert_eq!(file.len().unwrap(), 5);

    let reader = fs.open(&path, false).unwrap();
    let mut five = [0; 5];
    reader.read_exact_at(0, &mut five).unwrap();
    assert_eq!(&five, b"hello");
    assert!(reader.write_at(0, b"x").is_err(), "read-only handle");

    let moved = dir.join("g");
    fs.rename(&path, &moved).unwrap();
    assert!(!fs.exists(&path));
    fs.create(&path).unwrap();
    let mut names = fs.list(&dir).unwrap();
    names.sort();
    assert_eq!(names, ["f", "g"]);
    fs.sync_dir(&dir).unwrap();

    fs.remove(&path).unwrap();
    assert_eq!(
        fs.open(&path, false).unwrap_err().raw_os_error(),
        Some(libc::ENOENT)
    );
    assert_eq!(fs.list(&dir).unwrap(), ["g"]);
}

#[test]
fn a_second_lock_would_block_until_the_first_is_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = DiskFs::new();
    let path = tmp.path().join("LOCK");
    let guard = fs.lock(&path).unwrap();
    assert!(fs.exists(&path), "lock creates the file");
    let err = fs.lock(&path).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    drop(guard);
    let _again = fs.lock(&path).unwrap();
}

#[test]
fn missing_parent_fails_with_not_found() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = DiskFs::new();
    let err = fs.create(&tmp.path().join("no/such/file")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(fs.sync_dir(Path::new("/no/such/dir/for/strata")).is_err());
}

#[test]
fn write_vectored_at_writes_the_concatenation() {
    use std::io::IoSlice;
    let tmp = tempfile::tempdir().unwrap();
    let fs = DiskFs::new();
    let file = fs.create(&tmp.path().join("v")).unwrap();
    // More slices than one pwritev takes, some of them empty, at an offset.
    let parts: Vec<Vec<u8>> = (0..2500u32)
        .map(|i| vec![(i % 251) as u8; (i % 7) as usize])
        .collect();
    let slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
    let joined: Vec<u8> = parts.concat();
    file.write_vectored_at(100, &slices).unwrap();
    assert_eq!(file.len().unwrap(), 100 + joined.len() as u64);
    let mut back = vec![0; joined.len()];
    file.read_exact_at(100, &mut back).unwrap();
    assert_eq!(back, joined);
    // Nothing to write is fine, and changes nothing.
    file.write_vectored_at(0, &[]).unwrap();
    file.write_vectored_at(0, &[IoSlice::new(&[])]).unwrap();
    assert_eq!(file.len().unwrap(), 100 + joined.len() as u64);
}
