//! Readers taking snapshots and iterators in a loop while writers, flushes
//! and compactions run. Each writer owns two keys, one in each family, and
//! writes its counter to both in one batch. A reader at any snapshot must
//! see both keys of a writer equal (batches are atomic across families),
//! see every counter never go backwards from one snapshot to the next (the
//! visible seqno never goes backwards), and see an iterator agree with
//! point reads at the same snapshot.

mod db_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use db_support::*;
use strata_fs::MemFs;
use strata_lsm::{ReadOptions, WriteBatch, WriteOptions};

const WRITERS: u64 = 3;
const WRITES: u64 = 1500;

fn writer_key(w: u64) -> Vec<u8> {
    format!("writer{w}").into_bytes()
}

fn counter(v: Option<Vec<u8>>) -> u64 {
    v.map_or(0, |v| {
        u64::from_le_bytes(v[..8].try_into().expect("8 bytes"))
    })
}

#[test]
fn readers_see_atomic_monotonic_views_while_writers_flushes_and_compactions_run() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cfs = families(&db);
    let done = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let db = db.clone();
        let cfs = cfs.clone();
        writers.push(std::thread::spawn(move || {
            for n in 1..=WRITES {
                let mut b = WriteBatch::new();
                // Padding makes memtables fill and flush often.
                let mut v = n.to_le_bytes().to_vec();
                v.extend_from_slice(&value(n, 64));
                b.put(cfs[0].id(), &writer_key(w), &v);
                b.put(cfs[1].id(), &writer_key(w), &v);
                b.put(cfs[0].id(), &key((n % 50) as u32), &v);
                db.write(&WriteOptions::default(), &b).expect("write");
                if n % 500 == 0 {
                    db.compact_range(&cfs[(n / 500 % 2) as usize], None, None)
                        .expect("compact_range");
                }
            }
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..2 {
        let db = db.clone();
        let cfs = cfs.clone();
        let done = done.clone();
        readers.push(std::thread::spawn(move || {
            let mut last = vec![0u64; WRITERS as usize];
            let mut rounds = 0u64;
            while !done.load(Ordering::Acquire) || rounds < 3 {
                rounds += 1;
                let snap = db.snapshot();
                let read = ReadOptions {
                    snapshot: Some(snap.clone()),
                    ..ReadOptions::default()
                };
                for w in 0..WRITERS {
                    let a = counter(db.get(&read, &cfs[0], &writer_key(w)).expect("get"));
                    let b = counter(db.get(&read, &cfs[1], &writer_key(w)).expect("get"));
                    assert_eq!(a, b, "writer {w}: a batch seen half");
                    assert!(a >= last[w as usize], "writer {w}: counter went back");
                    last[w as usize] = a;
                }
                let mut it = db.iter(&read, &cfs[0]).expect("iter");
                it.seek(b"writer").expect("seek");
                for w in 0..WRITERS {
                    if last[w as usize] == 0 {
                        continue;
                    }
                    while it.valid() && it.key() < writer_key(w).as_slice() {
                        it.next().expect("next");
                    }
                    assert!(it.valid(), "iterator ended before writer {w}");
                    assert_eq!(it.key(), writer_key(w).as_slice());
                    assert_eq!(counter(Some(it.value().to_vec())), last[w as usize]);
                }
                let mut back = db.iter(&read, &cfs[1]).expect("iter");
                let mut n = 0;
                back.seek_to_last().expect("seek_to_last");
                while back.valid() {
                    n += 1;
                    back.prev().expect("prev");
                }
                assert_eq!(n, last.iter().filter(|&&c| c > 0).count());
            }
            rounds
        }));
    }
    for w in writers {
        w.join().expect("writer");
    }
    done.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().expect("reader") >= 3);
    }
    let stats = db.statistics();
    assert!(
        stats.flushes > 0,
        "the test must exercise flushes: {stats:?}"
    );
    assert!(
        stats.compactions > 0,
        "the test must exercise compactions: {stats:?}"
    );
    let read = ReadOptions::default();
    for w in 0..WRITERS {
        assert_eq!(
            counter(db.get(&read, &cfs[0], &writer_key(w)).expect("get")),
            WRITES
        );
    }
}

/// Writers without `sync` append and insert without a group commit, and
/// insert after the WAL lock is released, while small memtables switch and
/// flush under them. Each writer reads its own write back at once (a write
/// returns only once visible), and after a close and a reopen every write
/// acknowledged is there: a memtable switched while a writer was still
/// inserting into it was flushed only after that insert.
#[test]
fn unsynced_writers_racing_memtable_switches_lose_nothing() {
    const THREADS: u32 = 4;
    const PUTS: u32 = 1500;
    let fs = MemFs::new();
    let db = Arc::new(open(&fs, small_options()).expect("open"));
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let cf = db.default_column_family();
                for i in 0..PUTS {
                    let k = key(t * PUTS + i);
                    let v = value(u64::from(t * PUTS + i), 64);
                    db.put(&WriteOptions::default(), &cf, &k, &v).expect("put");
                    let got = db.get(&ReadOptions::default(), &cf, &k).expect("get");
                    assert_eq!(got.as_deref(), Some(&v[..]), "writer {t} put {i}");
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
    let db = Arc::try_unwrap(db).expect("writers are done");
    let flushed = db
        .property(&db.default_column_family(), "strata.num-files")
        .expect("property")
        .expect("known");
    assert_ne!(flushed, "0", "the memtables never switched and flushed");
    db.close().expect("close");
    let db = open(&fs, small_options()).expect("reopen");
    let cf = db.default_column_family();
    for n in 0..THREADS * PUTS {
        assert_eq!(
            db.get(&ReadOptions::default(), &cf, &key(n)).expect("get"),
            Some(value(u64::from(n), 64)),
            "write {n} lost"
        );
    }
}
