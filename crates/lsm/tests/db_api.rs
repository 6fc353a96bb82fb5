//! The engine's hooks and less-travelled calls, end to end: writes without
//! the WAL, listeners on flush and compaction, a compaction filter, table
//! properties filled by a collector, multi_get, prefix iterators, and
//! `no_slowdown`.

mod db_support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use db_support::*;
use strata_fs::{CrashMode, FileSystem, MemFs};
use strata_lsm::compaction::{CompactionFilter, FilterDecision};
use strata_lsm::{
    CompactionInfo, Db, Error, EventListener, FlushInfo, Hooks, PropertiesCollector, ReadOptions,
    SeqNo, ValueKind, WriteOptions,
};

fn open_with_hooks(fs: &MemFs, hooks: Hooks) -> Db {
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    Db::open_with(dyn_fs, DIR, small_options(), hooks).expect("open")
}

#[test]
fn writes_without_the_wal_live_in_memtables_until_a_flush() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cf = db.default_column_family();
    let no_wal = WriteOptions {
        disable_wal: true,
        ..WriteOptions::default()
    };
    db.put(&no_wal, &cf, b"unlogged", b"1").expect("put");
    db.put(
        &WriteOptions {
            sync: true,
            ..WriteOptions::default()
        },
        &cf,
        b"logged",
        b"2",
    )
    .expect("put");
    assert_eq!(
        db.get(&ReadOptions::default(), &cf, b"unlogged")
            .expect("get"),
        Some(b"1".to_vec())
    );
    let stats = db.statistics();
    // A power cut loses the unlogged write, keeps the synced one.
    let cut = power_cut(&fs, CrashMode::DropUnsynced);
    let after = open(&cut, small_options()).expect("open after the cut");
    let cf2 = after.default_column_family();
    assert_eq!(
        after
            .get(&ReadOptions::default(), &cf2, b"unlogged")
            .expect("get"),
        None
    );
    assert_eq!(
        after
            .get(&ReadOptions::default(), &cf2, b"logged")
            .expect("get"),
        Some(b"2".to_vec())
    );
    drop(after);
    // Once flushed, the unlogged write survives too.
    db.flush(&cf, true).expect("flush");
    let cut = power_cut(&fs, CrashMode::DropUnsynced);
    let after = open(&cut, small_options()).expect("open after the cut");
    let cf2 = after.default_column_family();
    assert_eq!(
        after
            .get(&ReadOptions::default(), &cf2, b"unlogged")
            .expect("get"),
        Some(b"1".to_vec())
    );
    assert!(stats.wal_bytes > 0);
    drop(db);
}

#[derive(Default)]
struct Counting {
    flushes: AtomicU64,
    compactions: AtomicU64,
    files_flushed: AtomicU64,
}

impl EventListener for Counting {
    fn on_flush_completed(&self, info: &FlushInfo) {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.files_flushed
            .fetch_add(info.files.len() as u64, Ordering::Relaxed);
    }
    fn on_compaction_completed(&self, info: &CompactionInfo) {
        assert!(!info.inputs.is_empty());
        self.compactions.fetch_add(1, Ordering::Relaxed);
    }
}

/// Drops every key starting with "tmp/".
struct DropTemporary;

impl CompactionFilter for DropTemporary {
    fn name(&self) -> &str {
        "drop-temporary"
    }
    fn filter(&self, _level: u8, user_key: &[u8], _value: &[u8]) -> FilterDecision {
        if user_key.starts_with(b"tmp/") {
            FilterDecision::Remove
        } else {
            FilterDecision::Keep
        }
    }
}

/// Counts the keys of a file into the user property "test.keys".
#[derive(Debug, Default)]
struct KeyCounter(u64);

impl PropertiesCollector for KeyCounter {
    fn add(&mut self, _key: &[u8], _value: &[u8], _kind: ValueKind, _seqno: SeqNo) {
        self.0 += 1;
    }
    fn finish(&mut self) -> Vec<(String, Vec<u8>)> {
        vec![("test.keys".to_string(), self.0.to_le_bytes().to_vec())]
    }
}

#[test]
fn listeners_filters_and_collectors_see_every_job() {
    let listener = Arc::new(Counting::default());
    let mut filters: HashMap<String, Arc<dyn CompactionFilter>> = HashMap::new();
    filters.insert("default".into(), Arc::new(DropTemporary));
    let mut collectors: HashMap<String, Arc<strata_lsm::compaction::CollectorFactory>> =
        HashMap::new();
    collectors.insert(
        "default".into(),
        Arc::new(|| vec![Box::new(KeyCounter::default()) as Box<dyn PropertiesCollector>]),
    );
    let hooks = Hooks {
        compaction_filters: filters,
        listeners: vec![listener.clone()],
        properties_collectors: collectors,
    };
    let fs = MemFs::new();
    let db = open_with_hooks(&fs, hooks);
    let cf = db.default_column_family();
    let w = WriteOptions::default();
    for i in 0..100u32 {
        db.put(&w, &cf, format!("tmp/{i:03}").as_bytes(), b"scratch")
            .expect("put");
        db.put(&w, &cf, format!("keep/{i:03}").as_bytes(), b"data")
            .expect("put");
    }
    db.flush(&cf, true).expect("flush");
    assert!(listener.flushes.load(Ordering::Relaxed) >= 1);
    assert!(listener.files_flushed.load(Ordering::Relaxed) >= 1);
    db.compact_range(&cf, None, None).expect("compact");
    assert!(listener.compactions.load(Ordering::Relaxed) >= 1);
    let read = ReadOptions::default();
    assert_eq!(
        db.get(&read, &cf, b"tmp/007").expect("get"),
        None,
        "filtered away"
    );
    assert_eq!(
        db.get(&read, &cf, b"keep/007").expect("get"),
        Some(b"data".to_vec())
    );
    let props = db.table_properties(&cf).expect("properties");
    assert!(!props.is_empty());
    let total: u64 = props
        .iter()
        .map(|(_, p)| {
            let v = p.user.get("test.keys").expect("the collector's property");
            u64::from_le_bytes(v.as_slice().try_into().expect("8 bytes"))
        })
        .sum();
    let entries: u64 = props.iter().map(|(_, p)| p.num_entries).sum();
    assert_eq!(
        total, entries,
        "the collector saw every entry of every file"
    );
    assert_eq!(entries, 100, "only the kept keys remain");
}

#[test]
fn multi_get_and_prefix_iterators() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cf = db.default_column_family();
    let w = WriteOptions::default();
    for p in ["a", "b", "c"] {
        for i in 0..50u32 {
            db.put(&w, &cf, format!("{p}/{i:03}").as_bytes(), p.as_bytes())
                .expect("put");
        }
    }
    db.flush(&cf, true).expect("flush");
    db.delete(&w, &cf, b"b/010").expect("delete");
    let got = db
        .multi_get(
            &ReadOptions::default(),
            &cf,
            &[b"a/001", b"b/010", b"c/049", b"zzz"],
        )
        .expect("multi_get");
    assert_eq!(
        got,
        vec![Some(b"a".to_vec()), None, Some(b"c".to_vec()), None]
    );
    let read = ReadOptions {
        prefix: Some(b"b/".to_vec()),
        ..ReadOptions::default()
    };
    let mut it = db.iter(&read, &cf).expect("iter");
    let keys: Vec<Vec<u8>> = scan_forward(&mut it).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys.len(), 49);
    assert!(keys.iter().all(|k| k.starts_with(b"b/")));
    let back: Vec<Vec<u8>> = scan_backward(&mut it).into_iter().map(|(k, _)| k).collect();
    assert_eq!(back, keys);
}

/// A compaction filter that holds its compaction until the test lets go.
struct Gate {
    open: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    entered: Arc<AtomicU64>,
}

impl CompactionFilter for Gate {
    fn name(&self) -> &str {
        "gate"
    }
    fn filter(&self, _level: u8, _key: &[u8], _value: &[u8]) -> FilterDecision {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let (lock, cv) = &*self.open;
        let mut open = lock.lock().expect("gate lock");
        while !*open {
            open = cv.wait(open).expect("gate wait");
        }
        FilterDecision::Keep
    }
}

type GateHandle = Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>;

/// An engine with one background thread, held by a compaction (behind a
/// closed gate) so that no memtable can be flushed.
fn held_engine(max_write_buffers: usize) -> (Db, strata_lsm::ColumnFamily, GateHandle) {
    held_engine_with(max_write_buffers, |_| {})
}

/// As `held_engine`, with `tune` applied to the options first.
fn held_engine_with(
    max_write_buffers: usize,
    tune: impl FnOnce(&mut strata_lsm::Options),
) -> (Db, strata_lsm::ColumnFamily, GateHandle) {
    let gate = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let entered = Arc::new(AtomicU64::new(0));
    let mut filters: HashMap<String, Arc<dyn CompactionFilter>> = HashMap::new();
    filters.insert(
        "default".into(),
        Arc::new(Gate {
            open: gate.clone(),
            entered: entered.clone(),
        }),
    );
    let mut options = small_options();
    options.background_threads = 1;
    options.default_column_family.max_write_buffers = max_write_buffers;
    tune(&mut options);
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let hooks = Hooks {
        compaction_filters: filters,
        ..Hooks::default()
    };
    let db = Db::open_with(dyn_fs, DIR, options, hooks).expect("open");
    let cf = db.default_column_family();
    let w = WriteOptions::default();
    for _ in 0..2 {
        // Overlapping files, so that the compaction merges (and filters)
        // rather than moves a file.
        db.put(&w, &cf, &key(0), b"v").expect("put");
        db.put(&w, &cf, &key(9), b"v").expect("put");
        db.flush(&cf, true).expect("flush");
    }
    // Two L0 files: the compaction starts and holds the thread.
    let start = std::time::Instant::now();
    while entered.load(Ordering::SeqCst) == 0 {
        assert!(
            start.elapsed().as_secs() < 30,
            "the compaction never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    (db, cf, gate)
}

/// Writes that may not wait until one is refused; returns why.
fn write_until_busy(db: &Db, cf: &strata_lsm::ColumnFamily) -> String {
    let quick = WriteOptions {
        no_slowdown: true,
        ..WriteOptions::default()
    };
    for i in 10..10_000 {
        match db.put(&quick, cf, &key(i), &[b'v'; 200]) {
            Ok(()) => {}
            Err(Error::Busy(why)) => return why,
            Err(e) => panic!("expected Busy, got {e}"),
        }
    }
    panic!("writes were never held back");
}

#[test]
fn compaction_bytes_are_counted_by_the_level_written() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cf = db.default_column_family();
    let w = WriteOptions::default();
    for round in 0..2u8 {
        for i in 0..50 {
            db.put(&w, &cf, &key(i), &[round; 100]).expect("put");
        }
        db.flush(&cf, true).expect("flush");
    }
    db.compact_range(&cf, None, None).expect("compact");
    let stats = db.statistics();
    let by_level = &stats.compaction_bytes_written_by_level;
    assert!(stats.compaction_bytes_written > 0, "{stats:?}");
    assert_eq!(by_level.iter().sum::<u64>(), stats.compaction_bytes_written);
    // Compactions out of L0 write below it, never into it, and the bytes
    // are counted where the files now are.
    assert_eq!(by_level[0], 0, "{by_level:?}");
    let files_at = |l: usize| {
        db.property(&cf, &format!("strata.num-files-at-level{l}"))
            .expect("property")
            .expect("a level")
    };
    let written: Vec<usize> = (0..by_level.len()).filter(|&l| by_level[l] > 0).collect();
    assert!(!written.is_empty(), "{by_level:?}");
    for l in written {
        assert_ne!(files_at(l), "0", "bytes counted at L{l}: {by_level:?}");
    }
}

#[test]
fn compaction_properties_say_when_the_engine_has_settled() {
    // A benchmark measures a workload's bytes and time until this says the
    // engine is idle: a compaction still running must show.
    let (db, cf, gate) = held_engine(4);
    let prop = |name: &str| {
        db.property(&cf, name)
            .expect("property")
            .expect("a known property")
    };
    assert_eq!(prop("strata.num-running-compactions"), "1");
    // The L0 files stay due until the compaction's version is installed.
    assert_eq!(prop("strata.compaction-pending"), "1");
    let (lock, cv) = &*gate;
    *lock.lock().expect("gate lock") = true;
    cv.notify_all();
    wait_until("no compaction runs or is due", || {
        prop("strata.num-running-compactions") == "0" && prop("strata.compaction-pending") == "0"
    });
    assert_eq!(prop("strata.num-files-at-level0"), "0");
}

#[test]
fn no_slowdown_turns_a_stall_into_busy() {
    // With two memtables at most, writers must stop.
    let (db, cf, gate) = held_engine(2);
    // Fill memtables until one is switched and waits for its flush: then
    // a write that may not wait is refused, and writes nothing.
    let busy = write_until_busy(&db, &cf);
    let quick = WriteOptions {
        no_slowdown: true,
        ..WriteOptions::default()
    };
    assert!(busy.contains("memtables"), "{busy}");
    assert_eq!(
        db.property(&cf, "strata.num-immutable-memtables")
            .expect("property"),
        Some("1".to_string())
    );
    assert!(matches!(
        db.put(&quick, &cf, b"late", b"v"),
        Err(Error::Busy(_))
    ));
    assert_eq!(
        db.get(&ReadOptions::default(), &cf, b"late").expect("get"),
        None
    );
    // A writer that may wait waits while the thread is held (so it is
    // counted as a stall), and gets through once the thread is free.
    let waiting = {
        let db = db.clone();
        let cf = cf.clone();
        std::thread::spawn(move || db.put(&WriteOptions::default(), &cf, b"late", b"v"))
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(
        !waiting.is_finished(),
        "a write got through a full set of memtables"
    );
    let (lock, cv) = &*gate;
    *lock.lock().expect("gate lock") = true;
    cv.notify_all();
    waiting
        .join()
        .expect("writer thread")
        .expect("a waiting write");
    let stats = db.statistics();
    assert!(stats.stalls >= 1);
    // The wait is put down to the memtables, and to nothing else.
    let d = stats.write_delays;
    assert!(d.memtable_stop_micros >= 10_000, "{d:?}");
    assert!(d.memtable_stop_micros <= stats.stall_micros, "{d:?}");
    assert_eq!(d.level0_stop_micros + d.debt_stop_micros, 0, "{d:?}");
    assert_eq!(
        db.get(&ReadOptions::default(), &cf, b"late").expect("get"),
        Some(b"v".to_vec())
    );
}

/// Writes that fill the last memtable `max_write_buffers` allows are
/// slowed (counted as slowdowns, refused as `Busy` to a writer that may not
/// wait) before they would have to stop, as RocksDB paces its last write
/// buffer: with 4, three wait for a flush while the fourth fills.
#[test]
fn writes_filling_the_last_memtable_are_slowed_before_they_would_stop() {
    let (db, cf, gate) = held_engine(4);
    let busy = write_until_busy(&db, &cf);
    let immutables = db
        .property(&cf, "strata.num-immutable-memtables")
        .expect("property");
    if !busy.contains("paced") || immutables.as_deref() != Some("3") {
        let (lock, cv) = &*gate;
        *lock.lock().expect("gate lock") = true;
        cv.notify_all();
        panic!("{busy}, {immutables:?} immutable memtables");
    }
    let before = db.statistics().slowdowns;
    // 4 KiB: a delay of tens of microseconds, counted whole.
    db.put(&WriteOptions::default(), &cf, b"slowed", &[b'v'; 4096])
        .expect("a slowed write gets through");
    let stats = db.statistics();
    // Released before the checks: a failed one must not leave the
    // background thread held, and the engine's drop waiting for it.
    let (lock, cv) = &*gate;
    *lock.lock().expect("gate lock") = true;
    cv.notify_all();
    assert_eq!(stats.slowdowns, before + 1);
    assert_eq!(stats.stalls, 0);
    let d = stats.write_delays;
    assert!(d.memtable_slowdown_micros > 0, "{d:?}");
    assert_eq!(d.memtable_slowdown_micros, stats.slowdown_micros, "{d:?}");
}

/// Compaction-debt limits of 0 mean "never" (`CompactionOptions`): with
/// both at 0, writes go through neither stopped nor slowed, on a fresh
/// engine and with a compaction held while L0 files wait (debt above 0).
/// Both limits were compared with `>=`, so a hard limit of 0 stopped every
/// write for good (a writer that may wait hung; one that may not got
/// `Busy`).
#[test]
fn compaction_debt_limits_of_zero_never_hold_writes_back() {
    let never = |o: &mut strata_lsm::Options| {
        let c = &mut o.default_column_family.compaction;
        c.soft_pending_compaction_bytes = 0;
        c.hard_pending_compaction_bytes = 0;
    };
    let quick = WriteOptions {
        no_slowdown: true,
        ..WriteOptions::default()
    };
    let mut options = small_options();
    never(&mut options);
    let db = open(&MemFs::new(), options).expect("open");
    let cf = db.default_column_family();
    db.put(&quick, &cf, b"k", b"v")
        .expect("a write on a fresh engine is not held back");
    drop(db);

    // The held engine writes while it sets up: on a watchdog, so that a
    // write held for good fails the test instead of hanging it.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (db, cf, gate) = held_engine_with(4, never);
        let mut refused = None;
        for i in 100..140 {
            if let Err(e) = db.put(&quick, &cf, &key(i), &[b'v'; 100]) {
                refused = Some(e.to_string());
                break;
            }
        }
        let stats = db.statistics();
        let (lock, cv) = &*gate;
        *lock.lock().expect("gate lock") = true;
        cv.notify_all();
        let _ = done.send((refused, stats));
    });
    let (refused, stats) = finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("writes were held back for good");
    assert!(refused.is_none(), "a write was refused: {refused:?}");
    let d = stats.write_delays;
    assert_eq!(d.debt_stop_micros + d.debt_slowdown_micros, 0, "{d:?}");
    assert_eq!((stats.stalls, stats.slowdowns), (0, 0));
}
