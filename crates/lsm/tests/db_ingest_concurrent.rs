//! Ingestions racing writers, snapshots and iterators, checked against
//! what real time allows: writers own keys of region `a` (which
//! ingestions and `replace_range` keep replacing) and of region `z` (which
//! no ingestion touches); region `m` is ingested with no writer. At the
//! end every key holds the value of an operation on it that no other
//! operation on it followed in real time (no lost write, no resurrected
//! one); a snapshot reads the same thing however often and whatever
//! ingests meanwhile; the visible seqno never goes back; and writers of
//! `z` never waited for a range latch.

mod db_ingest_support;
mod db_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use db_ingest_support::*;
use db_support::*;
use strata_fs::{FileSystem, MemFs};
use strata_lsm::{latch_waits_on_this_thread, Db, IngestOptions, ReadOptions, WriteOptions};

/// One operation on one key: when it ran and what it left.
#[derive(Debug, Clone)]
struct Op {
    start: Instant,
    end: Instant,
    value: Option<Vec<u8>>,
}

type History = Arc<Mutex<BTreeMap<Vec<u8>, Vec<Op>>>>;

fn record(history: &History, key: &[u8], start: Instant, end: Instant, value: Option<Vec<u8>>) {
    history
        .lock()
        .unwrap()
        .entry(key.to_vec())
        .or_default()
        .push(Op { start, end, value });
}

fn akey(i: u32) -> Vec<u8> {
    format!("a{i:03}").into_bytes()
}

fn zkey(i: u32) -> Vec<u8> {
    format!("z{i:03}").into_bytes()
}

fn mkey(i: u32) -> Vec<u8> {
    format!("m{i:03}").into_bytes()
}

const A_KEYS: u32 = 40;
const WRITES: u32 = 400;
const INGESTIONS: u32 = 24;

fn scan(db: &Db, read: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(read, &db.default_column_family()).expect("iter");
    scan_forward(&mut it)
}

#[test]
fn ingestions_race_writers_snapshots_and_iterators() {
    for seed in 0..4u64 {
        run(seed);
    }
}

fn run(seed: u64) {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    fs.create_dir_all(Path::new("/external")).expect("dir");
    let history: History = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let ingesting = Arc::new(AtomicBool::new(true));
    let mut writers = Vec::new();
    // Writers 0 and 1 own the even and odd keys of `a`; 2 and 3 those of `z`.
    for w in 0..4u32 {
        let db = db.clone();
        let history = history.clone();
        let ingesting = ingesting.clone();
        writers.push(std::thread::spawn(move || {
            let cf = db.default_column_family();
            let opts = WriteOptions::default();
            // At least `WRITES` each, and on while the ingestions run.
            let mut n = 0;
            while n < WRITES || (ingesting.load(Ordering::Acquire) && n < 20 * WRITES) {
                let i = (n * 7 + w) % A_KEYS / 2 * 2 + w % 2;
                let k = if w < 2 { akey(i) } else { zkey(i) };
                let v = format!("w{w}-{n}").into_bytes();
                let start = Instant::now();
                if n % 11 == 5 {
                    db.delete(&opts, &cf, &k).expect("delete");
                    record(&history, &k, start, Instant::now(), None);
                } else {
                    db.put(&opts, &cf, &k, &v).expect("put");
                    record(&history, &k, start, Instant::now(), Some(v));
                }
                n += 1;
            }
            (w, latch_waits_on_this_thread(), n)
        }));
    }
    // Readers: snapshots whose view must not change, a seqno that must
    // not go back.
    let reader = {
        let db = db.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let mut last_seqno = 0;
            let mut checks = 0;
            while !done.load(Ordering::Acquire) || checks < 3 {
                let snap = db.snapshot();
                assert!(snap.seqno() >= last_seqno, "visible seqno went back");
                last_seqno = snap.seqno();
                let read = ReadOptions {
                    snapshot: Some(snap),
                    ..ReadOptions::default()
                };
                let mut held = db.iter(&read, &db.default_column_family()).expect("iter");
                let first = scan(&db, &read);
                std::thread::yield_now();
                let again = scan(&db, &read);
                assert_eq!(first, again, "a snapshot's view changed");
                assert_eq!(scan_forward(&mut held), first, "an iterator's view changed");
                let cf = db.default_column_family();
                for (k, v) in first.iter().step_by(5) {
                    assert_eq!(db.get(&read, &cf, k).expect("get").as_ref(), Some(v));
                }
                checks += 1;
            }
            checks
        })
    };
    // The ingester, on this thread.
    let cf = db.default_column_family();
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for n in 0..INGESTIONS {
        let region_m = n % 3 == 2;
        let lo = (next() % u64::from(A_KEYS - 8)) as u32;
        let hi = lo + 1 + (next() % 8) as u32;
        let keyf: fn(u32) -> Vec<u8> = if region_m { mkey } else { akey };
        let tag = format!("i{seed}-{n}");
        let path = external_path(&tag);
        let keys: Vec<u32> = (lo..hi).filter(|i| (i + n) % 3 != 0).collect();
        let entries: Vec<(Vec<u8>, Option<Vec<u8>>)> = keys
            .iter()
            .map(|&i| (keyf(i), Some(format!("{tag}-{i}").into_bytes())))
            .collect();
        let replace = n % 2 == 0;
        if entries.is_empty() && !replace {
            continue;
        }
        if !entries.is_empty() {
            write_external(&fs, &path, &entries);
        }
        let files = if entries.is_empty() {
            vec![]
        } else {
            vec![path]
        };
        let start = Instant::now();
        if replace {
            db.replace_range(&cf, &keyf(lo), &keyf(hi), &files, &IngestOptions::default())
                .expect("replace_range");
        } else {
            db.ingest(&cf, &files, &IngestOptions::default())
                .expect("ingest");
        }
        let end = Instant::now();
        let covered: Vec<u32> = if replace {
            (lo..hi).collect()
        } else {
            keys.clone()
        };
        for i in covered {
            let value = keys.contains(&i).then(|| format!("{tag}-{i}").into_bytes());
            record(&history, &keyf(i), start, end, value);
        }
    }
    ingesting.store(false, Ordering::Release);
    let mut waits = BTreeMap::new();
    for h in writers {
        let (w, n, writes) = h.join().expect("writer");
        eprintln!("seed {seed}: writer {w} made {writes} writes, waited {n} times");
        waits.insert(w, n);
    }
    done.store(true, Ordering::Release);
    let checks = reader.join().expect("reader");
    assert!(checks >= 3);
    eprintln!("seed {seed}: {checks} snapshot checks");
    for w in 2..4 {
        assert_eq!(waits[&w], 0, "writer {w} of region z waited for a latch");
    }
    // Every key: the value of an operation that no other one followed.
    let now = scan(&db, &ReadOptions::default());
    let got: BTreeMap<Vec<u8>, Vec<u8>> = now.into_iter().collect();
    let history = history.lock().unwrap();
    for (k, ops) in history.iter() {
        let last = ops
            .iter()
            .filter(|o| !ops.iter().any(|p| o.end < p.start))
            .map(|o| o.value.clone())
            .collect::<Vec<_>>();
        let value = got.get(k).cloned();
        assert!(
            last.contains(&value),
            "seed {seed} key {}: holds {:?}, the last operations left {:?}",
            String::from_utf8_lossy(k),
            value.as_deref().map(String::from_utf8_lossy),
            last
        );
    }
    for k in got.keys() {
        assert!(history.contains_key(k), "a key nobody wrote");
    }
}
