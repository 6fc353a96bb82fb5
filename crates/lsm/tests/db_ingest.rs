//! Ingestion's contract, scenario by scenario: the files become visible at
//! one new seqno ordered after every earlier write; snapshots and
//! iterators taken before never see them; they go to the deepest free
//! level (L0 when a memtable or L0 holds the range); `replace_range`
//! deletes the range and ingests in one step; the files survive a reopen
//! and compactions; `move_files` links instead of copying.

mod db_ingest_support;
mod db_support;

use db_ingest_support::*;
use db_support::*;
use strata_fs::{FileSystem, MemFs};
use strata_lsm::{IngestOptions, ReadOptions, WriteOptions};

fn k(i: u32) -> Vec<u8> {
    key(i)
}

fn get(db: &strata_lsm::Db, read: &ReadOptions, i: u32) -> Option<Vec<u8>> {
    db.get(read, &db.default_column_family(), &k(i))
        .expect("get")
}

fn tagged(tag: &str, i: u32) -> Option<Vec<u8>> {
    Some(format!("{tag}:{}", String::from_utf8_lossy(&k(i))).into_bytes())
}

#[test]
fn ingested_files_are_visible_at_a_new_seqno_and_snapshots_do_not_see_them() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cf = db.default_column_family();
    let w = WriteOptions::default();
    for i in 0..20 {
        db.put(&w, &cf, &k(i), b"old").expect("put");
    }
    let snap = db.snapshot();
    let mut before = db.iter(&ReadOptions::default(), &cf).expect("iter");
    fs.create_dir_all(std::path::Path::new("/external"))
        .expect("dir");
    let path = external_path("a");
    write_external(&fs, &path, &puts((5..15).map(k), "new"));
    let report = db
        .ingest(&cf, std::slice::from_ref(&path), &IngestOptions::default())
        .expect("ingest");
    assert_eq!(report.entries, 10);
    assert!(report.flushes >= 1, "the memtable held the range");
    let now = ReadOptions::default();
    for i in 0..20 {
        let want = if (5..15).contains(&i) {
            tagged("new", i)
        } else {
            Some(b"old".to_vec())
        };
        assert_eq!(get(&db, &now, i), want, "key {i}");
    }
    let at_snap = ReadOptions {
        snapshot: Some(snap),
        ..ReadOptions::default()
    };
    for i in 0..20 {
        assert_eq!(
            get(&db, &at_snap, i),
            Some(b"old".to_vec()),
            "snapshot, key {i}"
        );
    }
    let old = scan_forward(&mut before);
    assert!(old.iter().all(|(_, v)| v == b"old"));
    let mut it = db.iter(&at_snap, &cf).expect("iter at snapshot");
    assert_eq!(scan_forward(&mut it), old);
    assert_eq!(scan_backward(&mut it), old);
    // The source is the caller's: copied, not moved.
    assert!(fs.exists(&path));
    // Writes after the ingestion win over it.
    db.put(&w, &cf, &k(7), b"later").expect("put");
    assert_eq!(get(&db, &now, 7), Some(b"later".to_vec()));
    // Through a reopen and a full compaction, the same view.
    db.close().expect("close");
    let db = open(&fs, small_options()).expect("reopen");
    let cf = db.default_column_family();
    for _ in 0..2 {
        for i in 0..20 {
            let want = match i {
                7 => Some(b"later".to_vec()),
                5..15 => tagged("new", i),
                _ => Some(b"old".to_vec()),
            };
            assert_eq!(get(&db, &now, i), want, "key {i}");
        }
        db.compact_range(&cf, None, None).expect("compact");
    }
}

#[test]
fn a_range_nothing_holds_goes_to_the_last_level_and_deletions_are_ingested() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cf = db.default_column_family();
    fs.create_dir_all(std::path::Path::new("/external"))
        .expect("dir");
    let a = external_path("a");
    write_external(&fs, &a, &puts((0..10).map(k), "a"));
    let r = db
        .ingest(&cf, &[a], &IngestOptions::default())
        .expect("ingest a");
    let last = cf.options().compaction.num_levels as u8 - 1;
    assert_eq!(r.level, last);
    assert_eq!(r.flushes, 0);
    // Over it: the next ingestion of the range goes one level up, and its
    // deletions hide the older values.
    let b = external_path("b");
    let mut entries = puts((0..5).map(k), "b");
    for (i, e) in entries.iter_mut().enumerate() {
        if i % 2 == 1 {
            e.1 = None;
        }
    }
    write_external(&fs, &b, &entries);
    let r2 = db
        .ingest(&cf, &[b], &IngestOptions::default())
        .expect("ingest b");
    assert_eq!(r2.level, last - 1);
    assert!(r2.seqno > r.seqno);
    let now = ReadOptions::default();
    for i in 0..10 {
        let want = match i {
            0..5 if i % 2 == 1 => None,
            0..5 => tagged("b", i),
            _ => tagged("a", i),
        };
        assert_eq!(get(&db, &now, i), want, "key {i}");
    }
}

#[test]
fn several_disjoint_files_in_one_ingestion_are_one_change() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cf = db.default_column_family();
    fs.create_dir_all(std::path::Path::new("/external"))
        .expect("dir");
    let paths: Vec<_> = (0..3).map(|n| external_path(&format!("f{n}"))).collect();
    for (n, p) in paths.iter().enumerate() {
        let n = n as u32;
        write_external(&fs, p, &puts((n * 10..n * 10 + 10).map(k), "m"));
    }
    // Given in any order.
    let given = vec![paths[2].clone(), paths[0].clone(), paths[1].clone()];
    let r = db
        .ingest(&cf, &given, &IngestOptions::default())
        .expect("ingest");
    assert_eq!(r.files.len(), 3);
    assert_eq!(r.entries, 30);
    // One ingestion counted, its seqno hold the statistics' only one.
    let stats = db.statistics();
    assert_eq!(stats.ingestions, 1);
    let hold = r.seqno_hold.as_micros() as u64;
    assert_eq!(stats.ingest_seqno_hold_micros, hold);
    assert_eq!(stats.ingest_seqno_hold_micros_max, hold);
    let mut it = db.iter(&ReadOptions::default(), &cf).expect("iter");
    assert_eq!(scan_forward(&mut it).len(), 30);
}

#[test]
fn replace_range_swaps_the_contents_of_the_range_in_one_step() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cf = db.default_column_family();
    let w = WriteOptions::default();
    for i in 0..30 {
        db.put(&w, &cf, &k(i), b"old").expect("put");
    }
    db.flush(&cf, true).expect("flush");
    for i in 0..30 {
        if i % 3 == 0 {
            db.put(&w, &cf, &k(i), b"newer").expect("put");
        }
    }
    let snap = db.snapshot();
    fs.create_dir_all(std::path::Path::new("/external"))
        .expect("dir");
    let p = external_path("snap");
    // The region [10, 20) now holds only its even keys.
    write_external(
        &fs,
        &p,
        &puts((10..20).filter(|i| i % 2 == 0).map(k), "snap"),
    );
    let r = db
        .replace_range(&cf, &k(10), &k(20), &[p], &IngestOptions::default())
        .expect("replace_range");
    assert_eq!(r.delete_seqno, Some(r.seqno - 1));
    let now = ReadOptions::default();
    let expect = |i: u32| match i {
        10..20 if i.is_multiple_of(2) => tagged("snap", i),
        10..20 => None,
        _ if i.is_multiple_of(3) => Some(b"newer".to_vec()),
        _ => Some(b"old".to_vec()),
    };
    for i in 0..30 {
        assert_eq!(get(&db, &now, i), expect(i), "key {i}");
    }
    let at_snap = ReadOptions {
        snapshot: Some(snap),
        ..ReadOptions::default()
    };
    for i in 0..30 {
        let want = if i % 3 == 0 {
            b"newer".to_vec()
        } else {
            b"old".to_vec()
        };
        assert_eq!(get(&db, &at_snap, i), Some(want), "snapshot, key {i}");
    }
    // An empty snapshot: the range is emptied.
    let r = db
        .replace_range(&cf, &k(0), &k(5), &[], &IngestOptions::default())
        .expect("replace_range with no files");
    assert_eq!(r.entries, 0);
    for i in 0..5 {
        assert_eq!(get(&db, &now, i), None, "key {i}");
    }
    db.close().expect("close");
    let db = open(&fs, small_options()).expect("reopen");
    let cf = db.default_column_family();
    db.compact_range(&cf, None, None).expect("compact");
    for i in 0..30 {
        let want = if i < 5 { None } else { expect(i) };
        assert_eq!(get(&db, &now, i), want, "after reopen, key {i}");
    }
}

#[test]
fn move_files_links_the_file_and_removes_its_old_name() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).expect("open");
    let cf = db.default_column_family();
    fs.create_dir_all(std::path::Path::new("/external"))
        .expect("dir");
    let p = external_path("moved");
    write_external(&fs, &p, &puts((0..10).map(k), "m"));
    let r = db
        .ingest(
            &cf,
            std::slice::from_ref(&p),
            &IngestOptions { move_files: true },
        )
        .expect("ingest");
    assert_eq!(r.linked, 1);
    assert!(!fs.exists(&p), "the old name is gone");
    for i in 0..10 {
        assert_eq!(get(&db, &ReadOptions::default(), i), tagged("m", i));
    }
}

/// The name of the WAL file writes append to, before any memtable switch:
/// the oldest (the other one, if there, is made ahead for the next switch).
fn active_wal(mem: &MemFs) -> String {
    mem.list(std::path::Path::new(DIR))
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".wal"))
        .min()
        .expect("a WAL file")
}

/// A database on a fault-injecting file system and an ingestion of keys
/// 500..510 (tagged "ingested") stopped at its manifest append, after its
/// fence: the holds release it.
struct HeldIngestion {
    mem: MemFs,
    ffs: strata_fs::FaultFs,
    db: std::sync::Arc<strata_lsm::Db>,
    manifest: [strata_fs::Hold; 2],
    ingesting: std::thread::JoinHandle<strata_lsm::Result<strata_lsm::IngestReport>>,
}

fn ingestion_held_at_its_manifest_append(name: &str) -> HeldIngestion {
    use std::sync::Arc;
    use strata_fs::{FaultFs, Op};

    let mem = MemFs::new();
    let ffs = FaultFs::new(Arc::new(mem.clone()));
    let db = Arc::new(
        strata_lsm::Db::open_with(
            Arc::new(ffs.clone()),
            DIR,
            small_options(),
            strata_lsm::Hooks::default(),
        )
        .expect("open"),
    );
    mem.create_dir_all(std::path::Path::new("/external"))
        .expect("dir");
    let path = external_path(name);
    write_external(&mem, &path, &puts((500..510).map(k), "ingested"));
    let manifest = [
        ffs.hold(Op::SyncData, "MANIFEST-"),
        ffs.hold(Op::SyncAll, "MANIFEST-"),
    ];
    let ingesting = {
        let db = db.clone();
        std::thread::spawn(move || {
            let cf = db.default_column_family();
            db.ingest(&cf, &[path], &IngestOptions::default())
        })
    };
    wait_until_any_held(&manifest, "the ingestion never reached its manifest append");
    HeldIngestion {
        mem,
        ffs,
        db,
        manifest,
        ingesting,
    }
}

/// Regression: while an ingestion held its seqno (allocated, its manifest
/// append in flight), a write to another range took a later seqno and
/// returned at once, before the visible seqno could reach it: the writer's
/// own next read did not see what it had just written. A write now returns
/// only once it is visible.
#[test]
fn a_write_is_visible_to_its_writer_while_an_ingestion_is_installing() {
    use std::time::Duration;

    let HeldIngestion {
        db,
        manifest: holds,
        ingesting,
        ..
    } = ingestion_held_at_its_manifest_append("held");
    let writing = {
        let db = db.clone();
        std::thread::spawn(move || {
            let cf = db.default_column_family();
            db.put(&WriteOptions::default(), &cf, &k(1), b"mine")
                .expect("put");
            db.get(&ReadOptions::default(), &cf, &k(1)).expect("get")
        })
    };
    // Give the writer time to return early, as it used to.
    std::thread::sleep(Duration::from_millis(100));
    drop(holds);
    assert_eq!(
        writing.join().expect("writer").as_deref(),
        Some(&b"mine"[..]),
        "the writer did not see its own write"
    );
    ingesting.join().expect("ingest thread").expect("ingest");
    assert_eq!(
        get(&db, &ReadOptions::default(), 505),
        tagged("ingested", 505)
    );
}

/// Regression: an ingestion whose seqnos came after a write still in flight
/// (its WAL sync slow) waited for that write, its own seqnos allocated and
/// unpublished and the installer's lock held, before it swapped its files
/// in: a preempted or slow step there held every later writer's
/// acknowledgement. It now installs and publishes at once; the visible
/// seqno passes it when the earlier write finishes, and until then readers
/// do not see the files.
#[test]
fn an_ingestion_installs_without_waiting_for_an_earlier_write_in_flight() {
    use std::time::{Duration, Instant};
    use strata_fs::Op;

    let files = |db: &strata_lsm::Db| {
        db.property(&db.default_column_family(), "strata.num-files")
            .expect("property")
            .expect("known property")
    };
    let HeldIngestion {
        mem,
        ffs,
        db,
        manifest,
        ingesting,
    } = ingestion_held_at_its_manifest_append("behind-a-write");
    // The ingestion's file is not installed yet: `files(&db)` counts it once
    // it is.
    let files_before = files(&db);
    // A synced write to another range takes a seqno after the fence and
    // stops in its WAL sync, unpublished.
    let wal = active_wal(&mem);
    let wal_sync = [ffs.hold(Op::SyncData, &wal)];
    let writing = {
        let db = db.clone();
        std::thread::spawn(move || {
            let cf = db.default_column_family();
            let sync = WriteOptions {
                sync: true,
                ..WriteOptions::default()
            };
            db.put(&sync, &cf, &k(1), b"mine").expect("put");
        })
    };
    wait_until_any_held(&wal_sync, "the write never reached its WAL sync");
    drop(manifest);
    // The files are installed while the write is still held...
    let deadline = Instant::now() + Duration::from_secs(10);
    while files(&db) == files_before {
        assert!(
            Instant::now() < deadline,
            "the ingestion waited for the write in flight before installing"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // ... and not visible: the write before them is not.
    assert_eq!(get(&db, &ReadOptions::default(), 505), None);
    assert_eq!(get(&db, &ReadOptions::default(), 1), None);
    assert!(
        !ingesting.is_finished(),
        "ingest returned before it was visible"
    );
    drop(wal_sync);
    writing.join().expect("writer");
    let report = ingesting.join().expect("ingest thread").expect("ingest");
    assert!(
        report.seqno_hold < Duration::from_secs(1),
        "the hold spanned the write's wait: {:?}",
        report.seqno_hold
    );
    assert_eq!(get(&db, &ReadOptions::default(), 1), Some(b"mine".to_vec()));
    assert_eq!(
        get(&db, &ReadOptions::default(), 505),
        tagged("ingested", 505)
    );
}

/// Regression: a writer that checked the latches just before an ingestion
/// latched its range, then waited in the write queue, took a seqno after
/// the ingestion's fence. The published files (at a seqno allocated after
/// the manifest append) then hid its write, while the manifest (the files
/// at the fence's seqno) let it win after a reopen. The write leader now
/// sends such a batch back to wait for the latch: whatever order the two
/// take, a reopen keeps it.
#[test]
fn a_write_that_raced_the_latch_reads_the_same_before_and_after_a_reopen() {
    use std::sync::Arc;
    use std::time::Duration;
    use strata_fs::{FaultFs, Op};

    let mem = MemFs::new();
    let ffs = FaultFs::new(Arc::new(mem.clone()));
    let open_db = |fs: Arc<dyn strata_fs::FileSystem>| {
        Arc::new(
            strata_lsm::Db::open_with(fs, DIR, small_options(), strata_lsm::Hooks::default())
                .expect("open"),
        )
    };
    let db = open_db(Arc::new(ffs.clone()));
    mem.create_dir_all(std::path::Path::new("/external"))
        .expect("dir");
    let path = external_path("raced");
    write_external(&mem, &path, &puts((500..510).map(k), "ingested"));
    let wal = active_wal(&mem);
    // A synced write holds the write queue's leader in its WAL sync.
    let holds = [ffs.hold(Op::SyncData, &wal), ffs.hold(Op::SyncAll, &wal)];
    let spawn_put = |key: u32, value: &'static [u8], sync: bool| {
        let db = db.clone();
        std::thread::spawn(move || {
            let cf = db.default_column_family();
            let w = WriteOptions {
                sync,
                ..WriteOptions::default()
            };
            db.put(&w, &cf, &k(key), value)
        })
    };
    let leader = spawn_put(1, b"leader", true);
    wait_until_any_held(&holds, "the leader never reached its WAL sync");
    // Past the latch check before the ingestion latches, then queued.
    let racer = spawn_put(505, b"racer", false);
    std::thread::sleep(Duration::from_millis(100));
    // The ingestion latches and queues its fence behind the racer.
    let ingesting = {
        let db = db.clone();
        std::thread::spawn(move || {
            let cf = db.default_column_family();
            db.ingest(&cf, &[path], &IngestOptions::default())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    drop(holds);
    leader.join().expect("leader").expect("put");
    racer.join().expect("racer").expect("put");
    ingesting.join().expect("ingest thread").expect("ingest");
    let before = get(&db, &ReadOptions::default(), 505);
    assert!(
        before == tagged("ingested", 505) || before.as_deref() == Some(&b"racer"[..]),
        "neither the write nor the file: {before:?}"
    );
    drop(db);
    let db = open_db(Arc::new(mem.clone()));
    assert_eq!(
        get(&db, &ReadOptions::default(), 505),
        before,
        "a reopen changed which of the write and the ingested file wins"
    );
    assert_eq!(
        get(&db, &ReadOptions::default(), 506),
        tagged("ingested", 506)
    );
}
