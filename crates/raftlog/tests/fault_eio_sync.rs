//! A failed fsync (`EIO` from `FaultFs`) poisons the engine.
//!
//! Proves: the write whose sync fails returns the I/O error and every later
//! write (and `sync`) returns `Error::Poisoned`, without the engine trying to
//! sync again; the failed batch is never shown to readers; reopening (after a
//! process restart or a power loss) gives every acknowledged batch, and at most
//! the failed one besides. The same holds when the failing sync is the seal of
//! a file at rotation, and with four concurrent writers (syncs slowed down so
//! that commit groups of several writers form): every writer of the failing
//! group gets the error, and no write that starts after it is acknowledged.

mod fault_support;

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use fault_support::{
    append_files, config, incompressible, open, path, workload, BatchSpec, Change, Model, DIR,
};
use rand::rngs::StdRng;
use rand::SeedableRng;
use strata_fs::{CrashMode, FaultFs, File, FileLock, FileSystem, MemFs, Op};
use strata_raftlog::format::{FILE_HEADER_LEN, RECORD_HEADER_LEN};
use strata_raftlog::{Config, Engine, Error, LogBatch, RecoveryMode};

/// Linux's `EIO`: libc is not a dependency of this crate's tests.
const EIO: i32 = 5;

fn is_eio_sync(e: &Error) -> bool {
    matches!(e, Error::Io { op: "sync", source, .. } if source.raw_os_error() == Some(EIO))
}

/// An engine over `FaultFs` over `MemFs`, making its files at rotation:
/// these tests count and fail the write path's syncs, and a preparer's syncs
/// would come from another thread at moments of its own.
fn faulty(config: Config) -> (MemFs, FaultFs, Engine) {
    let config = Config {
        prepare_next_file: false,
        ..config
    };
    let mem = MemFs::new();
    let ffs = FaultFs::new(Arc::new(mem.clone()));
    let engine = Engine::open_with_fs(DIR, config, Arc::new(ffs.clone())).unwrap();
    (mem, ffs, engine)
}

/// Reopens `fs` and checks that it holds the first `acked` batches, or those
/// and the one whose write failed (its outcome is unknown), and nothing more.
fn check_reopen(fs: Arc<dyn FileSystem>, batches: &[BatchSpec], acked: usize, case: &str) {
    let engine = open(fs, config(RecoveryMode::TolerateTailCorruption), case)
        .unwrap_or_else(|e| panic!("{case}: reopen failed: {e}"));
    let before = Model::replay(&batches[..acked]);
    let with_failed = Model::replay(&batches[..acked + 1]);
    if let Err(e) = before.check(&engine) {
        with_failed.check(&engine).unwrap_or_else(|e2| {
            panic!(
                "{case}: neither the acknowledged state ({e}) nor that and the failed batch ({e2})"
            )
        });
    }
    // The reopened engine is not poisoned.
    let mut b = LogBatch::new();
    b.put(1000, b"after", b"reopen");
    engine.write(&mut b, true).unwrap();
}

#[test]
fn a_failed_sync_poisons_and_nothing_after_it_is_acknowledged() {
    let (mem, ffs, engine) = faulty(config(RecoveryMode::TolerateTailCorruption));
    let batches = workload(21, 40, 4, &[12, 90, 300]);
    let fail_at = 20;
    let syncs_before = ffs.count(Op::SyncData);
    ffs.fail_after(Op::SyncData, fail_at as u64, EIO);
    for (n, spec) in batches.iter().enumerate() {
        let result = engine.write(&mut spec.to_batch(), true);
        match n.cmp(&fail_at) {
            std::cmp::Ordering::Less => {
                result.unwrap_or_else(|e| panic!("batch {n}: {e}"));
            }
            std::cmp::Ordering::Equal => {
                let e = result.expect_err("the write whose sync failed");
                assert!(is_eio_sync(&e), "batch {n}: {e}");
                // The failed batch is not shown to readers.
                Model::replay(&batches[..fail_at]).check(&engine).unwrap();
            }
            std::cmp::Ordering::Greater => {
                let e = result.expect_err("a write after a failed sync");
                assert!(matches!(e, Error::Poisoned(_)), "batch {n}: {e}");
            }
        }
    }
    assert_eq!(
        engine.file_stats().active_append_seq,
        1,
        "no rotation: each write made exactly one sync"
    );
    // Unsynced writes and explicit syncs are refused too; reads still work.
    let mut b = batches[fail_at].to_batch();
    assert!(matches!(
        engine.write(&mut b, false),
        Err(Error::Poisoned(_))
    ));
    assert!(!b.is_empty(), "a refused batch is given back");
    assert!(matches!(engine.sync(), Err(Error::Poisoned(_))));
    assert!(matches!(
        engine.write(&mut LogBatch::new(), true),
        Err(Error::Poisoned(_))
    ));
    Model::replay(&batches[..fail_at]).check(&engine).unwrap();
    // The failed sync was never retried.
    assert_eq!(ffs.count(Op::SyncData), syncs_before + fail_at as u64 + 1);
    assert!(matches!(engine.close(), Err(Error::Poisoned(_))));
    ffs.clear_faults();

    // A power loss: only what was synced survives.
    let crashed = mem.deep_clone();
    crashed.crash(CrashMode::DropUnsynced);
    check_reopen(Arc::new(crashed), &batches, fail_at, "power loss");
    // A process restart: the page cache survives, with the failed batch in it.
    check_reopen(Arc::new(ffs), &batches, fail_at, "restart");
}

#[test]
fn a_failed_seal_sync_at_rotation_poisons() {
    let config = Config {
        compression_threshold_bytes: 0,
        ..config(RecoveryMode::TolerateTailCorruption)
    };
    let (mem, ffs, engine) = faulty(config.clone());
    let mut rng = StdRng::seed_from_u64(5);
    let mut batches = Vec::new();
    let mut offset = FILE_HEADER_LEN as u64;
    let mut failed = None;
    for n in 0..60u64 {
        let group = n % 2 + 1;
        let spec = BatchSpec(vec![Change::Entries {
            group,
            first: n / 2 + 1,
            data: vec![incompressible(&mut rng, 3000)],
        }]);
        let mut batch = spec.to_batch();
        batches.push(spec);
        let len = (RECORD_HEADER_LEN + batch.approximate_size()) as u64;
        let rotates =
            offset > FILE_HEADER_LEN as u64 && offset + len > config.target_file_size_bytes;
        if rotates && failed.is_none() {
            // The seal of the full file is the next sync.
            ffs.fail_after(Op::SyncData, 0, EIO);
        }
        let result = engine.write(&mut batch, true);
        match failed {
            None if rotates => {
                let e = result.expect_err("the write whose rotation failed to seal");
                assert!(is_eio_sync(&e), "batch {n}: {e}");
                let Error::Io { path: p, .. } = &e else {
                    unreachable!()
                };
                assert_eq!(*p, path("0000000000000001.raftlog"), "the sealed file");
                failed = Some(n as usize);
            }
            None => offset += result.unwrap_or_else(|e| panic!("batch {n}: {e}")) as u64,
            Some(_) => {
                let e = result.expect_err("a write after a failed seal");
                assert!(matches!(e, Error::Poisoned(_)), "batch {n}: {e}");
            }
        }
    }
    let failed = failed.expect("the workload fills the first file");
    assert_eq!(
        append_files(&mem),
        ["0000000000000001.raftlog"],
        "no next file after a failed seal"
    );
    Model::replay(&batches[..failed]).check(&engine).unwrap();
    drop(engine);
    ffs.clear_faults();
    let crashed = mem.deep_clone();
    crashed.crash(CrashMode::DropUnsynced);
    check_reopen(Arc::new(crashed), &batches, failed, "power loss");
    check_reopen(Arc::new(ffs), &batches, failed, "restart");
}

/// One write of a concurrent writer, timed with a shared logical clock.
#[derive(Debug)]
struct Attempt {
    index: u64,
    start: u64,
    end: u64,
    outcome: Result<(), String>,
    poisoned: bool,
    eio: bool,
}

#[test]
fn concurrent_writers_get_no_ok_in_or_after_the_failing_group() {
    let mut shared_failures = 0;
    for (round, fail_after) in [1u64, 3, 7, 12, 19, 25, 33, 40].into_iter().enumerate() {
        let eio = concurrent_round(fail_after);
        println!("round {round}: the sync failed under {eio} writer(s)");
        shared_failures += (eio > 1) as usize;
    }
    println!("{shared_failures} rounds had several writers in the failing group");
    assert!(shared_failures > 0, "slow syncs make commit groups form");
}

/// Makes every data sync take a while, so that concurrent writers queue up
/// behind the leader and commit groups of several writers form.
#[derive(Debug)]
struct SlowSync(Arc<dyn FileSystem>);

#[derive(Debug)]
struct SlowFile(Arc<dyn File>);

impl FileSystem for SlowSync {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.0.create_dir_all(dir)
    }
    fn create(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        Ok(Arc::new(SlowFile(self.0.create(path)?)))
    }
    fn open(&self, path: &Path, writable: bool) -> io::Result<Arc<dyn File>> {
        Ok(Arc::new(SlowFile(self.0.open(path, writable)?)))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.0.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.0.remove(path)
    }
    fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.0.link(from, to)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.0.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.exists(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.0.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        self.0.lock(path)
    }
}

impl File for SlowFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.0.write_at(offset, data)
    }
    fn sync_data(&self) -> io::Result<()> {
        std::thread::sleep(std::time::Duration::from_micros(300));
        self.0.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.0.sync_all()
    }
    fn len(&self) -> io::Result<u64> {
        self.0.len()
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        self.0.allocate(len)
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        self.0.truncate(len)
    }
}

/// Four threads write their own group with sync until the sync after
/// `fail_after` successful ones fails; returns how many writers got the EIO.
fn concurrent_round(fail_after: u64) -> usize {
    const THREADS: u64 = 4;
    const WRITES: u64 = 60;
    let mem = MemFs::new();
    let ffs = FaultFs::new(Arc::new(mem.clone()));
    let slow = SlowSync(Arc::new(ffs.clone()));
    let write_path_only = Config {
        // As in `faulty`: only the write path's syncs.
        prepare_next_file: false,
        ..config(RecoveryMode::TolerateTailCorruption)
    };
    let engine = Engine::open_with_fs(DIR, write_path_only, Arc::new(slow)).unwrap();
    let engine = Arc::new(engine);
    let clock = Arc::new(AtomicU64::new(0));
    let syncs_before = ffs.count(Op::SyncData);
    ffs.fail_after(Op::SyncData, fail_after, EIO);
    let entry = |group: u64, index: u64| format!("group {group} entry {index}").into_bytes();
    let start_line = Arc::new(std::sync::Barrier::new(THREADS as usize));
    let handles: Vec<_> = (1..=THREADS)
        .map(|group| {
            let (engine, clock, start_line) = (engine.clone(), clock.clone(), start_line.clone());
            std::thread::spawn(move || {
                let mut attempts = Vec::new();
                let mut next = 1;
                start_line.wait();
                for _ in 0..WRITES {
                    let mut b = LogBatch::new();
                    b.add_entries(group, next, &[entry(group, next)]);
                    let start = clock.fetch_add(1, Ordering::SeqCst);
                    let r = engine.write(&mut b, true);
                    let end = clock.fetch_add(1, Ordering::SeqCst);
                    attempts.push(Attempt {
                        index: next,
                        start,
                        end,
                        poisoned: matches!(r, Err(Error::Poisoned(_))),
                        eio: r.as_ref().is_err_and(is_eio_sync),
                        outcome: r.map(|_| ()).map_err(|e| e.to_string()),
                    });
                    if attempts.last().unwrap().outcome.is_ok() {
                        next += 1;
                    }
                }
                attempts
            })
        })
        .collect();
    let per_thread: Vec<Vec<Attempt>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let all: Vec<&Attempt> = per_thread.iter().flatten().collect();
    let first_err_end = all
        .iter()
        .filter(|a| a.outcome.is_err())
        .map(|a| a.end)
        .min()
        .expect("the sync fails");
    let eio = all.iter().filter(|a| a.eio).count();
    let oks = all.iter().filter(|a| a.outcome.is_ok()).count() as u64;
    assert!(eio >= 1, "the failing group gets the I/O error");
    // Only one commit group gets it: its writers' calls all overlap in time.
    let failed: Vec<&&Attempt> = all.iter().filter(|a| a.eio).collect();
    for a in &failed {
        for b in &failed {
            assert!(a.start < b.end, "EIO in two groups: {a:?} {b:?}");
        }
    }
    for a in &all {
        assert!(
            a.outcome.is_ok() || a.eio || a.poisoned,
            "unexpected error {:?}",
            a.outcome
        );
        if a.start > first_err_end {
            assert!(
                a.poisoned,
                "a write started after a failure returned: {a:?}"
            );
        }
    }
    for attempts in &per_thread {
        // A thread may have finished before the failure.
        let first_err = attempts
            .iter()
            .position(|a| a.outcome.is_err())
            .unwrap_or(attempts.len());
        assert!(
            attempts[first_err..].iter().all(|a| a.outcome.is_err()),
            "an Ok after a failure: {attempts:?}"
        );
    }
    // Each of the `fail_after` good syncs acknowledged at least one write (240
    // writes need at least 60 syncs, so the failure always comes).
    assert!(
        oks >= fail_after && oks <= fail_after * THREADS,
        "{oks} acknowledged"
    );
    assert_eq!(
        ffs.count(Op::SyncData),
        syncs_before + fail_after + 1,
        "the failed sync was never retried"
    );

    drop(engine);
    ffs.clear_faults();
    let crashed = mem.deep_clone();
    crashed.crash(CrashMode::DropUnsynced);
    for (case, fs) in [
        ("power loss", Arc::new(crashed) as Arc<dyn FileSystem>),
        ("restart", Arc::new(ffs.clone())),
    ] {
        let engine = open(fs, config(RecoveryMode::TolerateTailCorruption), case).unwrap();
        for (t, attempts) in per_thread.iter().enumerate() {
            let group = t as u64 + 1;
            let acked = attempts.iter().filter(|a| a.outcome.is_ok()).count() as u64;
            let last = engine.last_index(group).unwrap_or(0);
            // The failed write of each thread may or may not have reached the disk.
            assert!(
                last == acked || last == acked + 1,
                "{case}: group {group} holds {last}, {acked} acknowledged"
            );
            for i in 1..=last {
                assert_eq!(
                    engine.get_entry(group, i).unwrap(),
                    Some(entry(group, i)),
                    "{case}: group {group} entry {i}"
                );
            }
            if let Some(a) = attempts.iter().find(|a| a.poisoned) {
                assert!(a.index >= last, "{case}: a poisoned write was applied");
            }
        }
    }
    eio
}

/// A rotation that makes its own file syncs its header and then the
/// directory; if either fails, what is durable is unknown just as for a data
/// sync. (A file made ahead is synced by the preparer, whose failures leave
/// nothing made and the rotation to this path.)
#[test]
fn a_failed_sync_while_making_the_next_file_poisons() {
    for op in [Op::SyncAll, Op::SyncDir] {
        let config = Config {
            compression_threshold_bytes: 0,
            prepare_next_file: false,
            ..config(RecoveryMode::TolerateTailCorruption)
        };
        let (_mem, ffs, engine) = faulty(config);
        let mut rng = StdRng::seed_from_u64(9);
        let mut failed = false;
        for n in 1..=60u64 {
            let mut b = LogBatch::new();
            b.add_entries(1, n, &[incompressible(&mut rng, 3000)]);
            let rotates = engine.file_stats().append_bytes + 3100 > 64 << 10;
            if rotates && !failed {
                // Once: the fault is transient, the engine's reaction is not.
                ffs.fail_once_after(op, 0, EIO);
            }
            let before = engine.last_index(1);
            match (engine.write(&mut b, true), failed) {
                (Ok(_), false) => {}
                (Err(e), false) => {
                    assert!(rotates, "{op:?}: batch {n}: {e}");
                    assert!(
                        matches!(
                            &e,
                            Error::Io {
                                op: "sync" | "sync dir",
                                ..
                            }
                        ),
                        "{op:?}: {e}"
                    );
                    assert_eq!(engine.last_index(1), before);
                    failed = true;
                    break;
                }
                (r, true) => unreachable!("{r:?}"),
            }
        }
        assert!(failed, "{op:?}: the rotation happened");
        for n in 0..5u64 {
            let mut b = LogBatch::new();
            b.add_entries(1, engine.last_index(1).unwrap() + 1, &[vec![n as u8; 10]]);
            let r = engine.write(&mut b, true);
            assert!(
                matches!(r, Err(Error::Poisoned(_))),
                "{op:?}: write {n} after a failed sync: {r:?}"
            );
        }
    }
}
