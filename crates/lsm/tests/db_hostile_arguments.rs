//! Hostile arguments to every public method: each gets a typed error at
//! once (never a panic, never a hang), nothing is written, and the engine
//! keeps serving.

mod db_support;

use db_support::*;
use strata_fs::{FileSystem, MemFs};
use strata_lsm::batch::{KEY_BYTES_MAX, VALUE_BYTES_MAX};
use strata_lsm::{Error, Options, ReadOptions, WriteBatch, WriteOptions};

fn still_serving(db: &strata_lsm::Db) {
    let cf = db.default_column_family();
    db.put(&WriteOptions::default(), &cf, b"alive", b"yes")
        .expect("put after a refused call");
    assert_eq!(
        db.get(&ReadOptions::default(), &cf, b"alive").expect("get"),
        Some(b"yes".to_vec())
    );
}

fn invalid<T: std::fmt::Debug>(r: strata_lsm::Result<T>) {
    match r {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

#[test]
fn keys_and_values_over_the_limits_are_refused() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cf = db.default_column_family();
    let w = WriteOptions::default();
    let long_key = vec![b'k'; KEY_BYTES_MAX + 1];
    invalid(db.put(&w, &cf, &long_key, b"v"));
    invalid(db.put(&w, &cf, b"", b"v"));
    invalid(db.delete(&w, &cf, &long_key));
    invalid(db.get(&ReadOptions::default(), &cf, &long_key));
    let huge = vec![0u8; VALUE_BYTES_MAX + 1];
    invalid(db.put(&w, &cf, b"k", &huge));
    drop(huge);
    invalid(db.delete_range(&w, &cf, b"b", b"a"));
    invalid(db.delete_range(&w, &cf, b"a", b"a"));
    assert_eq!(
        db.get(&ReadOptions::default(), &cf, b"k").expect("get"),
        None
    );
    still_serving(&db);
}

#[test]
fn a_batch_with_a_bad_item_writes_nothing_and_can_be_reused_after_clear() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cf = db.default_column_family();
    let mut b = WriteBatch::new();
    b.put(cf.id(), b"first", b"1");
    b.put(cf.id(), b"", b"empty key");
    b.put(cf.id(), b"third", b"3");
    invalid(db.write(&WriteOptions::default(), &b));
    invalid(db.write(&WriteOptions::default(), &b));
    assert_eq!(
        db.get(&ReadOptions::default(), &cf, b"first").expect("get"),
        None
    );
    b.clear();
    b.put(cf.id(), b"first", b"1");
    db.write(&WriteOptions::default(), &b)
        .expect("a cleared batch writes");
    assert_eq!(
        db.get(&ReadOptions::default(), &cf, b"first").expect("get"),
        Some(b"1".to_vec())
    );
}

#[test]
fn unknown_and_dropped_column_families_are_refused() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let mut b = WriteBatch::new();
    b.put(77, b"k", b"v");
    invalid(db.write(&WriteOptions::default(), &b));
    let cf = db.create_column_family("doomed").expect("create");
    db.put(&WriteOptions::default(), &cf, b"k", b"v")
        .expect("put");
    db.drop_column_family(&cf).expect("drop");
    invalid(db.put(&WriteOptions::default(), &cf, b"k", b"v"));
    invalid(db.get(&ReadOptions::default(), &cf, b"k"));
    invalid(db.iter(&ReadOptions::default(), &cf).map(|_| ()));
    invalid(db.flush(&cf, true));
    invalid(db.compact_range(&cf, None, None));
    invalid(db.drop_column_family(&cf));
    let mut b = WriteBatch::new();
    b.put(cf.id(), b"k", b"v");
    invalid(db.write(&WriteOptions::default(), &b));
    assert!(db.column_family("doomed").is_none());
    still_serving(&db);
}

#[test]
fn column_family_names_are_checked() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    invalid(db.create_column_family(""));
    invalid(db.create_column_family(&"n".repeat(256)));
    invalid(db.create_column_family("default"));
    db.create_column_family("a").expect("create");
    invalid(db.create_column_family("a"));
    invalid(db.drop_column_family(&db.default_column_family()));
    assert_eq!(
        db.column_families(),
        vec!["a".to_string(), "default".to_string()]
    );
    still_serving(&db);
}

#[test]
fn inverted_ranges_are_refused() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cf = db.default_column_family();
    let read = ReadOptions {
        lower_bound: Some(b"z".to_vec()),
        upper_bound: Some(b"a".to_vec()),
        ..ReadOptions::default()
    };
    invalid(db.iter(&read, &cf).map(|_| ()));
    invalid(db.compact_range(&cf, Some(b"z"), Some(b"a")));
    still_serving(&db);
}

#[test]
fn options_out_of_bounds_are_refused_before_any_io() {
    let fs = MemFs::new();
    let mut o = small_options();
    o.background_threads = 0;
    invalid(open(&fs, o).map(|_| ()));
    let mut o = small_options();
    o.compaction_nice = 20;
    invalid(open(&fs, o).map(|_| ()));
    let mut o = small_options();
    o.default_column_family.write_buffer_bytes = 1;
    invalid(open(&fs, o).map(|_| ()));
    let mut o = small_options();
    o.default_column_family.max_write_buffers = 1000;
    invalid(open(&fs, o).map(|_| ()));
    let mut o = small_options();
    o.column_families.insert(String::new(), Default::default());
    invalid(open(&fs, o).map(|_| ()));
    // Blob GC's ratios: NaN, out of range, a limit under the target.
    for bad in [
        |b: &mut strata_lsm::db::BlobOptions| b.garbage_ratio = f64::NAN,
        |b: &mut strata_lsm::db::BlobOptions| b.garbage_ratio = 0.0,
        |b: &mut strata_lsm::db::BlobOptions| b.space_amp_target = f64::INFINITY,
        |b: &mut strata_lsm::db::BlobOptions| b.space_amp_target = 1.0,
        |b: &mut strata_lsm::db::BlobOptions| {
            b.space_amp_target = 1.5;
            b.space_amp_limit = 1.2;
        },
        |b: &mut strata_lsm::db::BlobOptions| b.max_relocate_bytes = 0,
        |b: &mut strata_lsm::db::BlobOptions| b.zstd_dictionary_bytes = 100,
    ] {
        let mut o = small_options();
        bad(&mut o.default_column_family.blob);
        invalid(open(&fs, o).map(|_| ()));
    }
    invalid(Options::from_toml("background_threads = -3").map(|_| ()));
    invalid(Options::from_toml("no_such_field = 1").map(|_| ()));
    assert!(
        fs.list(std::path::Path::new("/")).expect("list").is_empty(),
        "nothing was created"
    );
    let o = Options::from_toml(
        "background_threads = 3\n[default_column_family]\nwrite_buffer_bytes = 65536\n",
    )
    .expect("valid TOML");
    assert_eq!(o.background_threads, 3);
    assert_eq!(o.default_column_family.write_buffer_bytes, 65536);
}

#[test]
fn a_second_open_of_the_same_directory_is_refused_and_a_closed_engine_says_so() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    match open(&fs, small_options()) {
        Err(Error::Io { .. }) => {}
        other => panic!("expected the lock to refuse, got {other:?}"),
    }
    let cf = db.default_column_family();
    let clone = db.clone();
    db.close().expect("close");
    match clone.put(&WriteOptions::default(), &cf, b"k", b"v") {
        Err(Error::Closed) => {}
        other => panic!("expected Closed, got {other:?}"),
    }
    match clone.get(&ReadOptions::default(), &cf, b"k") {
        Err(Error::Closed) => {}
        other => panic!("expected Closed, got {other:?}"),
    }
    drop(clone);
    let db = open(&fs, small_options()).expect("open after close");
    still_serving(&db);
}
