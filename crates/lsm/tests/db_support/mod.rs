//! What the engine tests share: small options that make flushes and
//! compactions happen with little data, opening on a `MemFs`, and a model
//! of the database (one `BTreeMap` per column family).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};
use strata_lsm::{
    ColumnFamily, Db, DbIterator, Hooks, Options, ReadOptions, WriteBatch, WriteOptions,
};

pub const DIR: &str = "/db";

/// Options that flush every few KiB and compact after two L0 files.
pub fn small_options() -> Options {
    let mut o = Options {
        block_cache_bytes: 1 << 20,
        background_threads: 2,
        max_manifest_bytes: 16 << 10,
        ..Options::default()
    };
    let cf = &mut o.default_column_family;
    cf.write_buffer_bytes = 8 << 10;
    cf.max_write_buffers = 4;
    cf.table.block_size_bytes = 512;
    cf.compaction.level0_compaction_trigger = 2;
    cf.compaction.target_file_bytes = 16 << 10;
    cf.compaction.base_level_bytes = 64 << 10;
    o
}

pub fn open(fs: &MemFs, options: Options) -> strata_lsm::Result<Db> {
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    Db::open_with(dyn_fs, DIR, options, Hooks::default())
}

/// A power cut at this instant: a copy of `fs` with the crash applied,
/// to open the next engine on. The engine still running on `fs` (its
/// background threads finishing, its drop) goes on touching `fs` only; on
/// `fs` itself, a crash would let those writes land after the cut, which
/// no real power cut allows.
pub fn power_cut(fs: &MemFs, mode: strata_fs::CrashMode) -> MemFs {
    let survivor = fs.deep_clone();
    survivor.crash(mode);
    survivor
}

/// The families of the model; `cf_name(i)` is the engine's name of `i`.
pub const FAMILIES: usize = 2;

pub fn cf_name(i: usize) -> &'static str {
    ["default", "other"][i]
}

/// Returns the engine's handles of the model's families, creating missing ones.
pub fn families(db: &Db) -> Vec<ColumnFamily> {
    (0..FAMILIES)
        .map(|i| match db.column_family(cf_name(i)) {
            Some(cf) => cf,
            None => db.create_column_family(cf_name(i)).expect("create family"),
        })
        .collect()
}

pub type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// One model map per family.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Model {
    pub maps: Vec<Map>,
}

impl Model {
    pub fn new() -> Model {
        Model {
            maps: vec![Map::new(); FAMILIES],
        }
    }

    pub fn delete_range(&mut self, cf: usize, start: &[u8], end: &[u8]) {
        if start >= end {
            return;
        }
        let doomed: Vec<Vec<u8>> = self.maps[cf]
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in doomed {
            self.maps[cf].remove(&k);
        }
    }
}

/// Every key and value an iterator yields from the first key on.
pub fn scan_forward(it: &mut DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first().expect("seek_to_first");
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().expect("next");
    }
    out
}

/// Every key and value an iterator yields from the last key back.
pub fn scan_backward(it: &mut DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_last().expect("seek_to_last");
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev().expect("prev");
    }
    out.reverse();
    out
}

/// Asserts that `db` holds exactly `model`, by point reads and by scans
/// both ways.
pub fn check_db(db: &Db, model: &Model, read: &ReadOptions, keys: &[Vec<u8>]) {
    let cfs = families(db);
    for (i, cf) in cfs.iter().enumerate() {
        let map = &model.maps[i];
        for k in keys {
            assert_eq!(
                db.get(read, cf, k).expect("get"),
                map.get(k).cloned(),
                "family {} key {:?}",
                cf_name(i),
                String::from_utf8_lossy(k)
            );
        }
        let want: Vec<(Vec<u8>, Vec<u8>)> =
            map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut it = db.iter(read, cf).expect("iter");
        assert_eq!(
            scan_forward(&mut it),
            want,
            "forward scan of {}",
            cf_name(i)
        );
        assert_eq!(
            scan_backward(&mut it),
            want,
            "backward scan of {}",
            cf_name(i)
        );
    }
}

pub fn key(i: u32) -> Vec<u8> {
    format!("key{i:03}").into_bytes()
}

/// Adds write `i`'s counter ("last" in the default family) to `b` and
/// writes it, synced or not: the power-cut tests' writes.
pub fn write_counted(db: &Db, mut b: WriteBatch, i: u64, sync: bool) {
    b.put(db.default_column_family().id(), b"last", &i.to_le_bytes());
    db.write(
        &WriteOptions {
            sync,
            ..WriteOptions::default()
        },
        &b,
    )
    .expect("write");
}

/// The writes a database holds, by the counter the power-cut tests keep
/// under "last" in the default family (`None`: 0).
pub fn recovered_count(db: &Db) -> u64 {
    let cf = db.default_column_family();
    match db
        .get(&ReadOptions::default(), &cf, b"last")
        .expect("get last")
    {
        Some(v) => u64::from_le_bytes(v.try_into().expect("8 bytes")) + 1,
        None => 0,
    }
}

/// Keys `0..ring` and "last": what the power-cut tests read back.
pub fn keys_and_last(ring: u32) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..ring).map(key).collect();
    keys.push(b"last".to_vec());
    keys
}

pub fn value(seed: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(b'a' + (x % 26) as u8);
    }
    v
}

/// Polls `done` until it holds; fails the test after 20 s. For what
/// background work finishes on its own time (a job that still holds an
/// older version keeps its input files until it ends).
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(
            start.elapsed().as_secs() < 20,
            "timed out waiting until {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Waits until one of `holds` catches a call; fails the test with `what`
/// after 10 s.
pub fn wait_until_any_held(holds: &[strata_fs::Hold], what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !holds
        .iter()
        .any(|h| h.wait_until_held(std::time::Duration::from_millis(10)))
    {
        assert!(std::time::Instant::now() < deadline, "{what}");
    }
}

/// Asserts that every key `i` of `keys` reads `value(i, value_bytes)` in the
/// default family; `what` names the moment in the failure.
pub fn check_acked(db: &Db, keys: &[u32], value_bytes: usize, what: &str) {
    let cf = db.default_column_family();
    for &i in keys {
        assert_eq!(
            db.get(&ReadOptions::default(), &cf, &key(i)).expect("get"),
            Some(value(u64::from(i), value_bytes)),
            "{what}: acknowledged key {i}"
        );
    }
}

/// Key `i` of the 400-byte-value tests, six digits wide.
pub fn wide_key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

/// Writes keys `keys` with 400-byte values of `round`, 64 a batch.
pub fn put_range(db: &Db, keys: std::ops::Range<u32>, round: u64) {
    let cf = db.default_column_family();
    let mut b = WriteBatch::new();
    for i in keys {
        b.put(
            cf.id(),
            &wide_key(i),
            &value(u64::from(i) + round * 1_000_000, 400),
        );
        if b.count() == 64 {
            db.write(&WriteOptions::default(), &b).unwrap();
            b.clear();
        }
    }
    db.write(&WriteOptions::default(), &b).unwrap();
}

/// Asserts that every key of `keys` holds its value of `round`.
pub fn check_range(db: &Db, keys: std::ops::Range<u32>, round: u64) {
    let cf = db.default_column_family();
    for i in keys {
        let got = db.get(&ReadOptions::default(), &cf, &wide_key(i)).unwrap();
        let want = value(u64::from(i) + round * 1_000_000, 400);
        assert!(got == Some(want), "key {i} of round {round}");
    }
}
