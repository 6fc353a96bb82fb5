//! `strata-ctl lsm` against directories the engine wrote: a clean one checks
//! clean (exit 0) and its stats and dumps show what was written; a flipped
//! byte in an SST or a blob file makes `check` exit 1 naming the file; blob
//! files are walked, referenced, dumped and counted.

use std::path::Path;
use std::process::{Command, Output};

use strata_lsm::{Db, Options, WriteOptions};

fn ctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata-ctl"))
        .args(args)
        .output()
        .expect("run strata-ctl")
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn populate(dir: &Path) {
    let db = Db::open(dir, Options::default()).expect("open");
    let cf = db.default_column_family();
    let w = WriteOptions::default();
    for i in 0..500u32 {
        db.put(&w, &cf, format!("key{i:04}").as_bytes(), &[b'v'; 64])
            .expect("put");
    }
    db.flush(&cf, true).expect("flush");
    db.delete(&w, &cf, b"key0001").expect("delete");
    let other = db.create_column_family("other").expect("create");
    db.put(&w, &other, b"x", b"y").expect("put");
    db.close().expect("close");
}

#[test]
fn a_clean_directory_checks_clean_and_reports_what_it_holds() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    populate(dir);
    let d = dir.to_str().expect("utf8 path");

    let check = ctl(&["lsm", "check", d]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check));
    assert!(text(&check).starts_with("clean"), "{}", text(&check));
    assert!(text(&check).contains("2 families"), "{}", text(&check));

    let stats = ctl(&["lsm", "stats", d]);
    assert_eq!(stats.status.code(), Some(0));
    let s = text(&stats);
    assert!(s.contains("\"default\"") && s.contains("\"other\""), "{s}");
    assert!(s.contains("500 entries"), "{s}");

    let dump = ctl(&["lsm", "dump", "--entries", d]);
    assert_eq!(dump.status.code(), Some(0), "{}", text(&dump));
    let s = text(&dump);
    assert!(s.contains("create family 1 \"other\""), "{s}");
    assert!(s.contains("+ L"), "{s}");

    let sst = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .expect("an sst");
    let dump = ctl(&["lsm", "dump-sst", "--entries", sst.to_str().expect("utf8")]);
    assert_eq!(dump.status.code(), Some(0), "{}", text(&dump));
    assert!(text(&dump).contains("\"key0499\""), "{}", text(&dump));
}

#[test]
fn a_flipped_byte_in_an_sst_makes_check_fail_naming_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    populate(dir);
    let sst = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .expect("an sst");
    let mut bytes = std::fs::read(&sst).expect("read");
    bytes[100] ^= 0x20;
    std::fs::write(&sst, bytes).expect("write");
    let check = ctl(&["lsm", "check", dir.to_str().expect("utf8")]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check));
    let name = sst.file_name().expect("name").to_string_lossy().to_string();
    assert!(text(&check).contains(&name), "{}", text(&check));
}

#[test]
fn a_directory_without_current_is_not_an_lsm_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let check = ctl(&["lsm", "check", tmp.path().to_str().expect("utf8")]);
    assert_eq!(check.status.code(), Some(1));
}

/// A directory whose values of 100 bytes or more are separated.
fn populate_separated(dir: &Path) {
    let mut options = Options::default();
    options.default_column_family.blob.min_blob_size = Some(100);
    let db = Db::open(dir, options).expect("open");
    let cf = db.default_column_family();
    let w = WriteOptions::default();
    for i in 0..300u32 {
        let len = if i % 3 == 0 { 20 } else { 300 };
        db.put(
            &w,
            &cf,
            format!("key{i:04}").as_bytes(),
            &vec![b'a' + (i % 26) as u8; len],
        )
        .expect("put");
    }
    db.flush(&cf, true).expect("flush");
    db.close().expect("close");
}

fn file_ending(dir: &Path, ext: &str) -> std::path::PathBuf {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == ext))
        .expect("a file of that kind")
}

#[test]
fn blob_files_are_checked_followed_dumped_and_counted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    populate_separated(dir);
    let d = dir.to_str().expect("utf8 path");

    let check = ctl(&["lsm", "check", d]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check));
    assert!(
        text(&check).contains("1 blob files, 200 blob references"),
        "{}",
        text(&check)
    );

    let stats = ctl(&["lsm", "stats", d]);
    assert!(text(&stats).contains("blob files: 1"), "{}", text(&stats));
    assert!(text(&stats).contains("(0.0% garbage)"), "{}", text(&stats));

    let dump = ctl(&["lsm", "dump", d]);
    assert!(text(&dump).contains(".blob"), "{}", text(&dump));

    let blob = file_ending(dir, "blob");
    let dump = ctl(&[
        "lsm",
        "dump-blob",
        "--entries",
        blob.to_str().expect("utf8"),
    ]);
    assert_eq!(dump.status.code(), Some(0), "{}", text(&dump));
    assert!(text(&dump).contains("200 records"), "{}", text(&dump));
    assert!(text(&dump).contains("\"key0299\""), "{}", text(&dump));
}

#[test]
fn a_flipped_byte_in_a_blob_file_makes_check_fail_naming_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    populate_separated(dir);
    let blob = file_ending(dir, "blob");
    let mut bytes = std::fs::read(&blob).expect("read");
    bytes[200] ^= 0x04;
    std::fs::write(&blob, bytes).expect("write");
    let check = ctl(&["lsm", "check", dir.to_str().expect("utf8")]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check));
    let name = blob
        .file_name()
        .expect("name")
        .to_string_lossy()
        .to_string();
    assert!(text(&check).contains(&name), "{}", text(&check));
}
