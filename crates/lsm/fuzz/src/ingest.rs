//! The oracle of `ingest_mutated`: arbitrary bytes given to `Db::ingest`
//! (or `Db::replace_range`, by byte 0) as an external SST file, on a
//! `MemFs` holding a small database. Whatever the bytes: no panic; an
//! error leaves the database as it was (the same contents, no new file in
//! its directory) and still writable; a success makes every entry of the
//! file readable (checked against the file read by `SstReader`).
//!
//! Shared with `crates/lsm/tests/db_ingest_mutated.rs`, which includes this
//! file by path and feeds it mutations of valid files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use strata_fs::{FileSystem, MemFs};
use strata_lsm::{
    Db, Hooks, IngestOptions, InternalKey, Options, ReadOptions, SstReader, SstWriter,
    SstWriterOptions, ValueKind, WriteOptions,
};

const DIR: &str = "/db";
const EXTERNAL: &str = "/external/f.sst";

/// The most entries of an accepted file the oracle checks.
const ENTRIES_MAX: usize = 256;

fn options() -> Options {
    let mut o = Options {
        background_threads: 1,
        ..Options::default()
    };
    o.default_column_family.write_buffer_bytes = 8 << 10;
    o
}

/// A closed database with keys in a file and in the WAL, built once.
fn base() -> &'static MemFs {
    static BASE: OnceLock<MemFs> = OnceLock::new();
    BASE.get_or_init(|| {
        let fs = MemFs::new();
        let db = open(&fs);
        let cf = db.default_column_family();
        let w = WriteOptions::default();
        for i in 0..20u32 {
            db.put(&w, &cf, format!("k{i:02}").as_bytes(), b"base")
                .expect("put");
        }
        db.flush(&cf, true).expect("flush");
        db.put(&w, &cf, b"k05", b"wal").expect("put");
        db.close().expect("close");
        fs.create_dir_all(Path::new("/external")).expect("dir");
        fs
    })
}

fn open(fs: &MemFs) -> Db {
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    Db::open_with(dyn_fs, DIR, options(), Hooks::default()).expect("open")
}

fn contents(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db
        .iter(&ReadOptions::default(), &db.default_column_family())
        .expect("iter");
    let mut out = Vec::new();
    it.seek_to_first().expect("seek");
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().expect("next");
    }
    out
}

fn sst_files(fs: &MemFs) -> BTreeSet<String> {
    fs.list(Path::new(DIR))
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .collect()
}

/// The entries of the external file (`None` values are deletions), or
/// the error reading it whole gives.
/// A file's entries: user key and value (`None` for a deletion).
type Entries = Vec<(Vec<u8>, Option<Vec<u8>>)>;

fn entries_of(fs: &MemFs) -> strata_lsm::Result<Entries> {
    let reader = SstReader::open(fs, Path::new(EXTERNAL), 0, None)?;
    let mut it = reader.iter();
    it.first()?;
    let mut out = Vec::new();
    while it.valid() {
        let value = (it.kind() == ValueKind::Put).then(|| it.value().to_vec());
        out.push((it.user_key().to_vec(), value));
        it.next()?;
    }
    Ok(out)
}

/// A valid external file of `n` keys from `k{first}` on (a seed to
/// mutate), as bytes.
pub fn valid_file(first: u32, n: u32, deletions: bool) -> Vec<u8> {
    let fs = MemFs::new();
    let path = PathBuf::from("/f.sst");
    let options = SstWriterOptions {
        block_size_bytes: 128,
        ..SstWriterOptions::default()
    };
    let mut w = SstWriter::create(&fs, &path, options).expect("create");
    for i in first..first + n {
        let key = format!("k{i:02}");
        if deletions && i % 3 == 0 {
            w.add(
                InternalKey::new(key.as_bytes(), 0, ValueKind::Delete).encoded(),
                b"",
            )
            .expect("add");
        } else {
            let value = format!("ingested {i}");
            w.add(
                InternalKey::new(key.as_bytes(), 0, ValueKind::Put).encoded(),
                value.as_bytes(),
            )
            .expect("add");
        }
    }
    w.finish().expect("finish");
    let f = fs.open(&path, false).expect("open");
    let mut bytes = vec![0u8; f.len().expect("len") as usize];
    f.read_exact_at(0, &mut bytes).expect("read");
    bytes
}

/// Byte 0: bit 0 picks `replace_range` over `[k00, k99)`, bit 1 asks
/// `move_files`; the rest is the file.
pub fn ingest_mutated(data: &[u8]) {
    let Some((&mode, file)) = data.split_first() else {
        return;
    };
    let fs = base().deep_clone();
    let f = fs.create(Path::new(EXTERNAL)).expect("create");
    f.write_at(0, file).expect("write");
    drop(f);
    let db = open(&fs);
    let cf = db.default_column_family();
    let before = contents(&db);
    let files_before = sst_files(&fs);
    let options = IngestOptions {
        move_files: mode & 2 != 0,
    };
    // What the file holds, read before the ingestion (which may move it,
    // and whose copy a compaction may rewrite at once).
    let expected = entries_of(&fs);
    let paths = [PathBuf::from(EXTERNAL)];
    let outcome = if mode & 1 != 0 {
        db.replace_range(&cf, b"k00", b"k99", &paths, &options)
    } else {
        db.ingest(&cf, &paths, &options)
    };
    match outcome {
        Err(_) => {
            assert_eq!(contents(&db), before, "a failed ingestion changed the data");
            assert_eq!(
                sst_files(&fs),
                files_before,
                "a failed ingestion left files"
            );
        }
        Ok(_) => {
            // The file was accepted: it read whole, and each entry reads
            // back as it is in the file.
            let expected = expected.expect("an accepted file reads whole");
            let read = ReadOptions::default();
            for (key, want) in expected.iter().take(ENTRIES_MAX) {
                let got = db.get(&read, &cf, key).expect("get");
                assert_eq!(&got, want, "an ingested entry reads back otherwise");
            }
        }
    }
    // Serving either way.
    db.put(&WriteOptions::default(), &cf, b"zz", b"alive")
        .expect("write after ingest");
    assert_eq!(
        db.get(&ReadOptions::default(), &cf, b"zz").expect("get"),
        Some(b"alive".to_vec())
    );
    db.close().expect("close");
}
