//! Hostile arguments to the engine's public methods: each gets a typed error
//! (or a harmless empty answer) within a timeout, never a panic or a hang, and
//! nothing of a refused batch reaches the disk; the engine keeps serving and
//! every earlier write survives a reopen.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use strata_fs::{FileSystem, MemFs};
use strata_raftlog::{Config, Engine, Error, LogBatch};

const DIR: &str = "/db";

fn open(fs: &MemFs) -> Arc<Engine> {
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let config = Config {
        target_file_size_bytes: 64 << 10,
        ..Config::default()
    };
    Arc::new(Engine::open_with_fs(DIR, config, dyn_fs).expect("open"))
}

/// Runs `f` with a 20 s watchdog and returns its result.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what}: panicked or hung"))
}

fn write(
    engine: &Arc<Engine>,
    what: &str,
    fill: impl FnOnce(&mut LogBatch),
) -> Result<usize, Error> {
    let engine = engine.clone();
    let mut batch = LogBatch::new();
    fill(&mut batch);
    within(what, move || engine.write(&mut batch, true))
}

fn assert_invalid(result: Result<usize, Error>, what: &str) {
    assert!(
        matches!(result, Err(Error::InvalidArgument(_))),
        "{what}: {result:?}"
    );
}

/// The engine still writes, reads and survives a reopen after hostile input.
fn assert_serving(engine: &Arc<Engine>, next: u64) {
    let mut batch = LogBatch::new();
    batch.add_entries(1, next, &[b"after"]);
    engine
        .write(&mut batch, true)
        .expect("a good write after hostile ones");
    assert_eq!(
        engine.get_entry(1, next).unwrap().as_deref(),
        Some(&b"after"[..])
    );
    assert_eq!(engine.last_index(1), Some(next));
}

/// The bytes written so far, once the preparer has written the next file's
/// header (it does so in the background, after open and each rotation).
fn settled_bytes_written(fs: &MemFs, engine: &Engine) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while engine.metrics().files_prepared == 0 {
        assert!(std::time::Instant::now() < deadline, "nothing prepared");
        std::thread::sleep(Duration::from_millis(1));
    }
    // And still for a while (a preparation after a rotation).
    let mut written = fs.bytes_written();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = fs.bytes_written();
        if now == written {
            return now;
        }
        written = now;
    }
}

/// Regression: entries ending past `u64::MAX` of a new group passed the
/// continuity check, were written and synced, and then the group-commit leader
/// panicked decoding its own batch, hanging every later writer; the record it
/// left made the next open fail. Now the batch is refused before any I/O.
#[test]
fn entries_overflowing_u64_are_refused_before_any_io() {
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut batch = LogBatch::new();
    batch.add_entries(1, 1, &[b"one"]);
    engine.write(&mut batch, true).unwrap();
    let written = settled_bytes_written(&fs, &engine);
    assert_invalid(
        write(&engine, "u64::MAX entry", |b| {
            b.add_entries(99, u64::MAX, &[b"x"])
        }),
        "one entry at u64::MAX",
    );
    assert_invalid(
        write(&engine, "run past u64::MAX", |b| {
            b.add_entries(98, u64::MAX - 1, &[b"x", b"y"])
        }),
        "a run past u64::MAX",
    );
    assert_eq!(fs.bytes_written(), written, "a refused batch wrote bytes");
    assert_serving(&engine, 2);
    drop(engine);
    let engine = open(&fs);
    assert_eq!(engine.last_index(1), Some(2));
    assert_eq!(engine.last_index(99), None);
}

#[test]
fn bad_batches_are_refused_and_the_engine_keeps_serving() {
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut batch = LogBatch::new();
    batch.add_entries(1, 1, &[b"one"]);
    engine.write(&mut batch, true).unwrap();
    let written = settled_bytes_written(&fs, &engine);
    assert_invalid(
        write(&engine, "empty put key", |b| b.put(1, b"", b"v")),
        "empty put key",
    );
    assert_invalid(
        write(&engine, "empty delete key", |b| b.delete(1, b"")),
        "empty delete key",
    );
    assert_invalid(
        write(&engine, "gap", |b| b.add_entries(1, 5, &[b"x"])),
        "a gap after the last index",
    );
    assert_invalid(
        write(&engine, "inconsistent runs", |b| {
            b.add_entries(7, 1, &[b"a", b"b"]);
            b.add_entries(7, 10, &[b"c"]);
        }),
        "a group twice in one batch with a gap between its runs",
    );
    assert_invalid(
        write(&engine, "huge batch", |b| {
            b.add_entries(3, 1, &[vec![7u8; 300 << 20]])
        }),
        "a batch over batch_bytes_max",
    );
    assert_invalid(
        write(&engine, "bad item hidden by good ones", |b| {
            b.add_entries(2, 1, &[b"fine"]);
            b.put(2, b"", b"bad");
            b.put(2, b"k", b"fine");
        }),
        "one bad item among good ones",
    );
    assert_eq!(fs.bytes_written(), written, "a refused batch wrote bytes");
    assert_eq!(
        engine.last_index(2),
        None,
        "part of a refused batch is visible"
    );

    // A refused batch stays refused until it is cleared; then it is reusable.
    let mut batch = LogBatch::new();
    batch.put(4, b"", b"v");
    assert!(engine.write(&mut batch, false).is_err());
    assert!(engine.write(&mut batch, false).is_err());
    batch.clear();
    batch.put(4, b"k", b"v");
    engine.write(&mut batch, true).unwrap();
    assert_eq!(engine.get(4, b"k").as_deref(), Some(&b"v"[..]));

    // Compacting or reading what does not exist is harmless.
    assert_eq!(engine.compact_to(12345, u64::MAX).unwrap(), 0);
    assert_eq!(engine.compact_to(1, 0).unwrap(), 0);
    assert_eq!(engine.get_entry(1, u64::MAX).unwrap(), None);
    assert_eq!(engine.get_entry(u64::MAX, 0).unwrap(), None);
    assert!(matches!(
        engine.fetch_entries(1, 5, 1, 10),
        Err(Error::InvalidArgument(_))
    ));
    assert!(engine.fetch_entries(1, 0, u64::MAX, usize::MAX).is_err());
    assert!(engine.fetch_entries(u64::MAX, 1, 2, 0).is_err());
    assert_eq!(engine.get(1, b""), None);
    assert_serving(&engine, 2);
}

/// A batch may reset a group to a snapshot and append the entries after it,
/// as persisting a raft-rs `Ready` with a snapshot needs: a compaction past the
/// group's end (or its removal) lets the entries after it start anywhere.
#[test]
fn a_batch_resets_a_group_to_a_snapshot_and_appends_after_it() {
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut batch = LogBatch::new();
    batch.add_entries(1, 1, &[b"a", b"b", b"c"]);
    batch.add_entries(2, 1, &[b"a"]);
    engine.write(&mut batch, true).unwrap();

    // Snapshot at 100 for group 1: compact past the end, append 101...
    batch.compact_to(1, 101);
    batch.put(1, b"snapshot", b"100");
    batch.add_entries(1, 101, &[b"x", b"y"]);
    // ...and group 2 removed and restarted at 50.
    batch.remove_group(2);
    batch.add_entries(2, 50, &[b"z"]);
    engine.write(&mut batch, true).unwrap();
    let check = |engine: &Engine| {
        assert_eq!(engine.first_index(1), Some(101));
        assert_eq!(engine.last_index(1), Some(102));
        assert_eq!(
            engine.get_entry(1, 102).unwrap().as_deref(),
            Some(&b"y"[..])
        );
        assert_eq!(engine.get_entry(1, 3).unwrap(), None);
        assert_eq!(engine.first_index(2), Some(50));
        assert_eq!(engine.last_index(2), Some(50));
    };
    check(&engine);
    drop(engine);
    let engine = open(&fs);
    check(&engine);
    // A compaction that leaves entries in place does not open a gap.
    let mut batch = LogBatch::new();
    batch.compact_to(1, 102);
    batch.add_entries(1, 110, &[b"gap"]);
    assert_invalid(
        engine.write(&mut batch, true),
        "a gap after a partial compaction",
    );
}

/// Every config field out of its bounds is refused by `open` with
/// `Error::Config`, before the directory is touched; the directory then opens
/// with a good config and holds what it held.
#[test]
fn configs_out_of_bounds_are_refused_before_any_io() {
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut batch = LogBatch::new();
    batch.add_entries(1, 1, &[b"kept"]);
    engine.write(&mut batch, true).unwrap();
    drop(engine);
    let bad: Vec<(&str, Config)> = vec![
        (
            "tiny files",
            Config {
                target_file_size_bytes: 1,
                ..Config::default()
            },
        ),
        (
            "huge files",
            Config {
                target_file_size_bytes: u64::MAX,
                ..Config::default()
            },
        ),
        (
            "no purge threshold",
            Config {
                purge_threshold_bytes: 0,
                ..Config::default()
            },
        ),
        (
            "no recovery threads",
            Config {
                recovery_threads: 0,
                ..Config::default()
            },
        ),
        (
            "too many threads",
            Config {
                recovery_threads: usize::MAX,
                ..Config::default()
            },
        ),
        (
            "huge recycle pool",
            Config {
                recycle_files_max: Some(usize::MAX),
                ..Config::default()
            },
        ),
        (
            "tiny batches",
            Config {
                batch_bytes_max: 0,
                ..Config::default()
            },
        ),
        (
            "huge batches",
            Config {
                batch_bytes_max: u64::MAX,
                ..Config::default()
            },
        ),
        (
            "huge compression threshold",
            Config {
                compression_threshold_bytes: u64::MAX,
                ..Config::default()
            },
        ),
        (
            "huge rewrite limit",
            Config {
                purge_rewrite_group_bytes_max: u64::MAX,
                ..Config::default()
            },
        ),
    ];
    for (what, config) in bad {
        let written = fs.bytes_written();
        let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
        let result = within(what, move || {
            Engine::open_with_fs(DIR, config, dyn_fs).map(|_| ())
        });
        assert!(
            matches!(result, Err(Error::Config(_))),
            "{what}: {result:?}"
        );
        assert_eq!(fs.bytes_written(), written, "{what}: wrote before refusing");
    }
    let engine = open(&fs);
    assert_eq!(
        engine.get_entry(1, 1).unwrap().as_deref(),
        Some(&b"kept"[..])
    );
}

/// Batches past 32 items take the continuity check's map path: the same
/// rules hold there (a gap refused, a reset then entries accepted).
#[test]
fn big_batches_follow_the_same_continuity_rules() {
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut batch = LogBatch::new();
    for g in 1..=40u64 {
        batch.add_entries(g, 1, &[b"a", b"b"]);
    }
    engine.write(&mut batch, true).unwrap();
    for g in 1..=40u64 {
        batch.add_entries(g, 3, &[b"c"]);
    }
    batch.add_entries(7, 9, &[b"gap"]);
    assert_invalid(engine.write(&mut batch, true), "a gap in a big batch");
    batch.clear();
    for g in 1..=40u64 {
        batch.compact_to(g, 100);
        batch.add_entries(g, 100, &[b"after the snapshot"]);
    }
    engine.write(&mut batch, true).unwrap();
    assert_eq!(engine.first_index(40), Some(100));
    assert_eq!(engine.last_index(1), Some(100));
}
