//! A compaction over a level of many files reads them one at a time: it
//! keeps about the table cache's files open, not one per input, and its
//! result holds every key. A manual compaction of a 10,000-file level once
//! opened all 10,000 inputs at once (`EMFILE` beside a table cache of that
//! size) and merged them with one cursor each.

mod db_support;

use db_support::*;
use strata_fs::MemFs;
use strata_lsm::{ReadOptions, WriteOptions};

const KEYS: u32 = 6_000;
const MAX_OPEN_FILES: usize = 16;

fn files_at(db: &strata_lsm::Db, cf: &strata_lsm::ColumnFamily, level: usize) -> usize {
    db.property(cf, &format!("strata.num-files-at-level{level}"))
        .expect("property")
        .and_then(|v| v.trim().parse().ok())
        .expect("a count")
}

#[test]
fn compacting_a_level_of_many_files_keeps_few_open() {
    let fs = MemFs::new();
    let mut options = small_options();
    options.max_open_files = MAX_OPEN_FILES;
    options.default_column_family.compaction.target_file_bytes = 4 << 10;
    let db = open(&fs, options).expect("open");
    let cf = db.default_column_family();
    for i in 0..KEYS {
        db.put(
            &WriteOptions::default(),
            &cf,
            &key(i),
            &value(u64::from(i), 100),
        )
        .expect("put");
    }
    db.compact_range(&cf, None, None)
        .expect("compact into the bottom level");
    let bottom = small_options().default_column_family.compaction.num_levels - 1;
    let inputs = files_at(&db, &cf, bottom);
    assert!(inputs >= 100, "the bottom level holds {inputs} files");

    // Rewrites the bottom level into itself: every file is an input.
    fs.reset_peak_open_files();
    db.compact_range(&cf, None, None)
        .expect("compact the bottom level");
    let peak = fs.peak_open_files();
    // The table cache, the WAL, the manifest, the compaction's current
    // input and output, with room for a few more, but not one per input.
    assert!(
        peak <= (MAX_OPEN_FILES + 12) as u64,
        "{peak} files open at once compacting {inputs} files"
    );
    assert!(files_at(&db, &cf, bottom) >= 100);
    let read = ReadOptions::default();
    for i in 0..KEYS {
        let got = db.get(&read, &cf, &key(i)).expect("get");
        assert_eq!(got, Some(value(u64::from(i), 100)), "key {i}");
    }
    db.close().expect("close");
}
