//! Hostile external files: truncated, a flipped byte, a wrong format
//! version, files that overlap, keys outside `replace_range`'s range,
//! entries that break the seqno convention, range deletions, no entries,
//! a missing file, no files. Each is a typed error naming the file (or the
//! argument), nothing changes (the same contents, no new file left in the
//! directory), and the engine keeps serving reads and writes.

mod db_ingest_support;
mod db_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use db_ingest_support::*;
use db_support::*;
use strata_fs::{FileSystem, MemFs};
use strata_lsm::{
    Db, Error, IngestOptions, InternalKey, ReadOptions, SstWriter, ValueKind, WriteOptions,
};

fn contents(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db
        .iter(&ReadOptions::default(), &db.default_column_family())
        .expect("iter");
    scan_forward(&mut it)
}

fn db_files(fs: &MemFs) -> BTreeSet<String> {
    fs.list(Path::new(DIR))
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .collect()
}

fn set_byte(fs: &MemFs, path: &Path, offset: u64, f: impl Fn(u8) -> u8) {
    let file = fs.open(path, true).expect("open");
    let mut b = [0u8];
    file.read_exact_at(offset, &mut b).expect("read");
    file.write_at(offset, &[f(b[0])]).expect("write");
}

fn file_len(fs: &MemFs, path: &Path) -> u64 {
    fs.open(path, false).expect("open").len().expect("len")
}

struct Case {
    name: &'static str,
    files: Vec<PathBuf>,
    range: Option<(Vec<u8>, Vec<u8>)>,
    /// The error must name this (a file path, or a word of the argument).
    names: String,
}

#[test]
fn bad_files_are_typed_errors_and_change_nothing() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cf = db.default_column_family();
    let w = WriteOptions::default();
    for i in 0..40 {
        db.put(&w, &cf, &key(i), b"base").expect("put");
    }
    db.flush(&cf, true).expect("flush");
    for i in 0..40 {
        if i % 4 == 0 {
            db.put(&w, &cf, &key(i), b"mem").expect("put");
        }
    }
    fs.create_dir_all(Path::new("/external")).expect("dir");
    let good = |name: &str, keys: std::ops::Range<u32>| {
        let p = external_path(name);
        write_external(&fs, &p, &puts(keys.map(key), name));
        p
    };

    let truncated = good("truncated", 0..30);
    let len = file_len(&fs, &truncated);
    fs.open(&truncated, true)
        .expect("open")
        .truncate(len / 2)
        .expect("truncate");

    let flipped = good("flipped", 0..30);
    set_byte(&fs, &flipped, 20, |b| b ^ 0x40);

    let version = good("version", 0..30);
    // The footer's format version: 16 bytes from the end (docs/format/sst.md).
    let len = file_len(&fs, &version);
    set_byte(&fs, &version, len - 16, |b| b.wrapping_add(1));

    let left = good("left", 0..20);
    let right = good("right", 10..30);

    let inside = good("inside", 12..18);
    let outside = good("outside", 5..25);

    let seqno = external_path("seqno");
    {
        let mut wr = SstWriter::create(&fs, &seqno, external_options()).expect("create");
        wr.add(InternalKey::new(&key(1), 7, ValueKind::Put).encoded(), b"v")
            .expect("add");
        wr.finish().expect("finish");
    }
    let tombstones = external_path("tombstones");
    {
        let mut wr = SstWriter::create(&fs, &tombstones, external_options()).expect("create");
        wr.add(InternalKey::new(&key(1), 0, ValueKind::Put).encoded(), b"v")
            .expect("add");
        wr.add_range_delete(&key(2), &key(9), 0)
            .expect("range delete");
        wr.finish().expect("finish");
    }
    let empty = external_path("empty");
    SstWriter::create(&fs, &empty, external_options())
        .expect("create")
        .finish()
        .expect("finish");
    let not_sst = external_path("not_sst");
    fs.create(&not_sst)
        .expect("create")
        .write_at(0, &[7u8; 300])
        .expect("write");
    let missing = external_path("missing");
    let fine = good("fine", 100..110);

    let name = |p: &PathBuf| p.display().to_string();
    let cases = vec![
        Case {
            name: "truncated",
            files: vec![truncated.clone()],
            range: None,
            names: name(&truncated),
        },
        Case {
            name: "a flipped byte",
            files: vec![flipped.clone()],
            range: None,
            names: name(&flipped),
        },
        Case {
            name: "wrong format version",
            files: vec![version.clone()],
            range: None,
            names: name(&version),
        },
        Case {
            name: "overlapping files",
            files: vec![left.clone(), right.clone()],
            range: None,
            names: name(&left),
        },
        Case {
            name: "one file twice",
            files: vec![fine.clone(), fine.clone()],
            range: None,
            names: name(&fine),
        },
        Case {
            name: "keys outside the range",
            files: vec![inside.clone(), outside.clone()],
            range: Some((key(10), key(20))),
            names: name(&outside),
        },
        Case {
            name: "seqno not 0",
            files: vec![seqno.clone()],
            range: None,
            names: name(&seqno),
        },
        Case {
            name: "range deletions",
            files: vec![tombstones.clone()],
            range: None,
            names: name(&tombstones),
        },
        Case {
            name: "no entries",
            files: vec![empty.clone()],
            range: None,
            names: name(&empty),
        },
        Case {
            name: "not an SST",
            files: vec![not_sst.clone()],
            range: None,
            names: name(&not_sst),
        },
        Case {
            name: "a missing file",
            files: vec![fine.clone(), missing.clone()],
            range: None,
            names: name(&missing),
        },
        Case {
            name: "no files",
            files: vec![],
            range: None,
            names: "no files".into(),
        },
        Case {
            name: "an inverted range",
            files: vec![],
            range: Some((key(20), key(10))),
            names: "not below".into(),
        },
    ];
    let before = contents(&db);
    let files_before = db_files(&fs);
    for case in cases {
        let r = match &case.range {
            Some((s, e)) => db.replace_range(&cf, s, e, &case.files, &IngestOptions::default()),
            None => db.ingest(&cf, &case.files, &IngestOptions::default()),
        };
        let e = r.expect_err(case.name);
        assert!(
            matches!(e, Error::InvalidArgument(_) | Error::Corruption { .. }),
            "{}: {e:?}",
            case.name
        );
        assert!(
            e.to_string().contains(&case.names),
            "{}: {e} does not name {}",
            case.name,
            case.names
        );
        assert_eq!(contents(&db), before, "{}: contents changed", case.name);
        assert_eq!(db_files(&fs), files_before, "{}: files left", case.name);
        // Still serving writes (to a key no case touches).
        db.put(&w, &cf, b"zzz-alive", case.name.as_bytes())
            .expect("write after");
        db.delete(&w, &cf, b"zzz-alive").expect("delete after");
    }
    // The good file goes in, after all that.
    db.ingest(&cf, &[fine], &IngestOptions::default())
        .expect("good ingest");
    assert_eq!(contents(&db).len(), before.len() + 10);
}
