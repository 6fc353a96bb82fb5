//! The oracle for opening a directory of arbitrary bytes: the input is a
//! list of files (a name chosen from the engine's kinds of file, and its
//! bytes); they are written to a `MemFs` and the engine opens them. `open`
//! may fail, only with a typed error; if it succeeds, every key must read
//! back the same by point reads and by scans both ways, and a write, a
//! flush, a close and a second open must work.

use std::path::Path;
use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};
use strata_lsm::{Db, Hooks, Options, ReadOptions, WriteOptions};

const DIR: &str = "/db";

/// Encodes files as an input: per file, a u8 name length, the name, a u32
/// LE length, the bytes.
pub fn encode_dir(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, bytes) in files {
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(bytes);
    }
    out
}

/// Decodes an input into named files; a truncated tail becomes a short
/// file, a name that is no plain file name becomes one, and a name given
/// again gets a suffix (a directory holds one file per name).
pub fn decode_dir(mut data: &[u8]) -> Vec<(String, &[u8])> {
    let mut files = Vec::new();
    // Names taken so far: a set, since an input of thousands of files with
    // one name made a search of the list (and a suffix growing with each
    // repeat) cubic, over the fuzzer's 30 s limit (a timeout in CI).
    let mut taken = std::collections::HashSet::new();
    // The next suffix to try for each name given again.
    let mut next_suffix: std::collections::HashMap<String, usize> = Default::default();
    while let Some((&name_len, rest)) = data.split_first() {
        let (name, rest) = rest.split_at((name_len as usize).min(rest.len()));
        let mut name: String = String::from_utf8_lossy(name)
            .chars()
            .map(|c| if c == '/' || c == '\0' { '_' } else { c })
            .collect();
        if name.is_empty() || name == "." || name == ".." {
            name = format!("file{}", files.len());
        }
        if taken.contains(&name) {
            let n = next_suffix.entry(name.clone()).or_insert(1);
            let base = std::mem::take(&mut name);
            loop {
                name = format!("{base}.again{n}");
                *n += 1;
                if !taken.contains(&name) {
                    break;
                }
            }
        }
        taken.insert(name.clone());
        let len = rest
            .get(..4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        let rest = rest.get(4..).unwrap_or(&[]);
        let (bytes, tail) = rest.split_at(len.min(rest.len()));
        files.push((name, bytes));
        data = tail;
    }
    files
}

fn small_options() -> Options {
    let mut o = Options {
        block_cache_bytes: 1 << 20,
        background_threads: 1,
        ..Options::default()
    };
    o.default_column_family.write_buffer_bytes = 16 << 10;
    o
}

/// Runs the oracle on one input; returns whether the engine opened it.
pub fn open_dir(data: &[u8]) -> bool {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new(DIR)).expect("mkdir");
    for (name, bytes) in decode_dir(data) {
        let f = fs.create(&Path::new(DIR).join(&name)).expect("create");
        f.write_at(0, bytes).expect("write");
        f.sync_all().expect("sync");
    }
    fs.sync_dir(Path::new(DIR)).expect("sync dir");
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let Ok(db) = Db::open_with(dyn_fs.clone(), DIR, small_options(), Hooks::default()) else {
        return false;
    };
    let read = ReadOptions::default();
    for name in db.column_families() {
        let cf = db.column_family(&name).expect("a listed family");
        let Ok(mut it) = db.iter(&read, &cf) else {
            continue;
        };
        let mut forward = Vec::new();
        let mut r = it.seek_to_first();
        while r.is_ok() && it.valid() {
            assert!(
                forward
                    .last()
                    .is_none_or(|(k, _): &(Vec<u8>, Vec<u8>)| k.as_slice() < it.key()),
                "keys out of order"
            );
            forward.push((it.key().to_vec(), it.value().to_vec()));
            r = it.next();
        }
        if r.is_err() {
            continue;
        }
        for (k, v) in forward.iter().take(64) {
            if let Ok(got) = db.get(&read, &cf, k) {
                assert_eq!(
                    got.as_deref(),
                    Some(v.as_slice()),
                    "a point read disagrees with the scan"
                );
            }
        }
    }
    let cf = db.default_column_family();
    if db
        .put(&WriteOptions::default(), &cf, b"fuzz", b"value")
        .is_ok()
    {
        let _ = db.flush(&cf, true);
        assert_eq!(
            db.get(&read, &cf, b"fuzz").ok().flatten().as_deref(),
            Some(&b"value"[..]),
            "a write just made is not read back"
        );
    }
    if db.close().is_ok() {
        let db = Db::open_with(dyn_fs, DIR, small_options(), Hooks::default())
            .expect("a directory the engine closed cleanly reopens");
        drop(db);
    }
    true
}
