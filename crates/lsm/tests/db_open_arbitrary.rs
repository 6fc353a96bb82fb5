//! Opening directories of arbitrary and mutated files never panics: the
//! fuzz target `open_dir`'s oracle, run by proptest over real directories
//! (written by the engine, then mutated) and over random bytes. The test
//! `write_open_dir_seeds` (ignored) refreshes the fuzz corpus from the same
//! real directories.

#[path = "../fuzz/src/open_dir.rs"]
mod open_dir;

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use strata_fs::{FileSystem, MemFs};
use strata_lsm::{Db, Hooks, Options, WriteOptions};

/// A real directory, as an `open_dir` input: a few keys flushed into an
/// SST, more left in the WAL, a second family, a closed engine.
fn real_dir(keys: u32, range_delete: bool) -> Vec<u8> {
    let fs = MemFs::new();
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let db = Db::open_with(dyn_fs, "/db", Options::default(), Hooks::default()).expect("open");
    let cf = db.default_column_family();
    let w = WriteOptions::default();
    for i in 0..keys {
        db.put(&w, &cf, format!("k{i:03}").as_bytes(), &[b'v'; 20])
            .expect("put");
    }
    db.flush(&cf, true).expect("flush");
    if range_delete {
        db.delete_range(&w, &cf, b"k001", b"k003")
            .expect("delete_range");
    }
    let other = db.create_column_family("other").expect("create");
    db.put(&w, &other, b"x", b"y").expect("put");
    db.close().expect("close");
    let mut files = Vec::new();
    for name in fs.list(Path::new("/db")).expect("list") {
        if name == "LOCK" {
            continue;
        }
        let f = fs.open(&Path::new("/db").join(&name), false).expect("open");
        let mut bytes = vec![0u8; f.len().expect("len") as usize];
        f.read_exact_at(0, &mut bytes).expect("read");
        files.push((name, bytes));
    }
    files.sort();
    open_dir::encode_dir(&files)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn mutated_real_directories_never_panic(
        keys in 1u32..40,
        range_delete in any::<bool>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let mut data = real_dir(keys, range_delete);
        for (at, mask) in flips {
            let i = at.index(data.len());
            data[i] ^= mask;
        }
        if let Some(at) = cut {
            data.truncate(at.index(data.len() + 1));
        }
        let _ = open_dir::open_dir(&data);
    }

    #[test]
    fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = open_dir::open_dir(&data);
    }
}

#[test]
fn an_untouched_real_directory_opens_and_reads_back() {
    assert!(
        open_dir::open_dir(&real_dir(10, true)),
        "a real directory must open"
    );
}

#[test]
#[ignore = "writes the fuzz corpus; run by hand after a format change"]
fn write_open_dir_seeds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/open_dir");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (i, (keys, rd)) in [(3, false), (12, true), (30, false)]
        .into_iter()
        .enumerate()
    {
        std::fs::write(dir.join(format!("real-{i}")), real_dir(keys, rd)).expect("write seed");
    }
}

/// Regression (found by the fuzz target in CI): an input naming one file
/// twice made the oracle's own setup fail to create the second, a panic
/// before the engine ran. A repeated name now gets a suffix.
#[test]
fn an_input_naming_a_file_twice_is_still_opened() {
    let dir = real_dir(3, false);
    let mut twice = dir.clone();
    twice.extend_from_slice(&dir);
    let files = open_dir::decode_dir(&twice);
    let mut names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), files.len(), "a name repeats");
    open_dir::open_dir(&twice);
}

/// Regression (found by the fuzz target in CI, a 30 s timeout): an input of
/// tens of thousands of empty files under one name made the oracle's own
/// renaming cubic, a search of every name so far for a suffix that grew
/// with each repeat. Names are now kept in a set, with a counter per name.
#[test]
fn an_input_of_many_files_with_one_name_decodes_in_linear_time() {
    let one = open_dir::encode_dir(&[("x".to_string(), Vec::new())]);
    let input: Vec<u8> = one
        .iter()
        .copied()
        .cycle()
        .take(one.len() * 30_000)
        .collect();
    let started = std::time::Instant::now();
    let files = open_dir::decode_dir(&input);
    let elapsed = started.elapsed();
    assert_eq!(files.len(), 30_000);
    let names: std::collections::HashSet<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), files.len(), "a name repeats");
    // Generous: linear work takes milliseconds; the cubic search took minutes.
    assert!(elapsed < std::time::Duration::from_secs(10), "{elapsed:?}");
}
