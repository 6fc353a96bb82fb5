//! Running out of space (`ENOSPC` from `FaultFs`) fails a write but never
//! poisons the engine.
//!
//! Proves: when rotation cannot preallocate or create the next file, or an
//! append cannot grow a file that was not preallocated, the write returns an
//! error with `is_no_space()`, gives the batch back intact, and shows nothing
//! of it; batches that need no new space still succeed meanwhile; once space is
//! back the same batch succeeds; after a power loss (dropping unsynced bytes, or
//! keeping a torn prefix of them) every synced acknowledged batch is present and
//! no part of a failed one is, even for `AbsoluteConsistency`.

mod fault_support;

use std::sync::Arc;

use fault_support::{
    append_files, config, incompressible, open, BatchSpec, Change, Model, DIR, MODES,
};
use rand::rngs::StdRng;
use rand::SeedableRng;
use strata_fs::{CrashMode, FaultFs, FileSystem, MemFs, Op};
use strata_raftlog::format::FILE_HEADER_LEN;
use strata_raftlog::{Config, Engine, LogBatch, RecoveryMode, Result};

/// Linux's `ENOSPC`: libc is not a dependency of this crate's tests.
const ENOSPC: i32 = 28;

const TARGET: u64 = 64 << 10;

/// An engine over `FaultFs` over `MemFs`, and the test's view of its log.
struct Harness {
    mem: MemFs,
    ffs: FaultFs,
    engine: Engine,
    /// The state made by the acknowledged batches (all synced).
    model: Model,
    rng: StdRng,
    /// Where the next record goes in the active file, and that file's sequence.
    offset: u64,
    seq: u64,
}

impl Harness {
    fn new(preallocate: bool) -> Self {
        let mem = MemFs::new();
        let ffs = FaultFs::new(Arc::new(mem.clone()));
        let engine =
            Engine::open_with_fs(DIR, config_for(preallocate), Arc::new(ffs.clone())).unwrap();
        Harness {
            mem,
            ffs,
            engine,
            model: Model::default(),
            rng: StdRng::seed_from_u64(17),
            offset: FILE_HEADER_LEN as u64,
            seq: 1,
        }
    }

    /// A batch appending one incompressible entry of `len` bytes to `group`.
    fn next(&mut self, group: u64, len: usize) -> BatchSpec {
        let first = self.model.last(group) + 1;
        BatchSpec(vec![
            Change::Entries {
                group,
                first,
                data: vec![incompressible(&mut self.rng, len)],
            },
            Change::Put {
                group,
                key: b"applied".to_vec(),
                value: format!("{first}").into_bytes(),
            },
        ])
    }

    /// Writes `spec` with sync; on success records it as acknowledged, on
    /// failure checks that the batch came back whole and nothing of it shows.
    fn write(&mut self, spec: &BatchSpec) -> Result<usize> {
        let mut batch = spec.to_batch();
        let size = batch.approximate_size();
        match self.engine.write(&mut batch, true) {
            Ok(len) => {
                let seq = self.engine.file_stats().active_append_seq;
                if seq != self.seq {
                    self.seq = seq;
                    self.offset = FILE_HEADER_LEN as u64;
                }
                self.offset += len as u64;
                self.model.apply(spec);
                Ok(len)
            }
            Err(e) => {
                assert_eq!(batch.approximate_size(), size, "the batch is given back");
                self.model
                    .check(&self.engine)
                    .unwrap_or_else(|m| panic!("after a failed write ({e}): {m}"));
                Err(e)
            }
        }
    }

    /// Bytes left in the active file before the target size.
    fn room(&self) -> u64 {
        TARGET - self.offset
    }

    /// Checks that a power loss now (in `mode`) leaves exactly the
    /// acknowledged state, for every recovery mode that must accept it.
    fn check_after_crash(&self, crash: CrashMode, modes: &[RecoveryMode], case: &str) {
        for &mode in modes {
            let fs = self.mem.deep_clone();
            fs.crash(crash);
            let case = format!("{case}, {crash:?}, {mode:?}");
            let engine = open(Arc::new(fs), config(mode), &case)
                .unwrap_or_else(|e| panic!("{case}: open failed: {e}"));
            self.model
                .check(&engine)
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            if mode == RecoveryMode::AbsoluteConsistency {
                assert!(engine.recovery_report().damage.is_empty(), "{case}");
            }
        }
    }
}

fn config_for(preallocate: bool) -> Config {
    Config {
        compression_threshold_bytes: 0,
        preallocate,
        // Rotations make their own files: the cases below are the creation's
        // (`no_space_for_files_made_ahead_...` has the preparer's).
        prepare_next_file: false,
        ..config(RecoveryMode::TolerateTailCorruption)
    }
}

/// With files made ahead, running out of space fails no write while the
/// file made ahead lasts; the rotation after it, which must make its own
/// file, fails with `ENOSPC` (not poisoned), and writes go on once space is
/// back.
#[test]
fn no_space_for_files_made_ahead_fails_writes_after_the_spare_until_space_is_back() {
    let mem = MemFs::new();
    let ffs = FaultFs::new(Arc::new(mem.clone()));
    let fs: Arc<dyn FileSystem> = Arc::new(ffs.clone());
    let config = Config {
        prepare_next_file: true,
        ..config_for(true)
    };
    let engine = Engine::open_with_fs(DIR, config, fs).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while engine.metrics().files_prepared == 0 {
        assert!(std::time::Instant::now() < deadline, "nothing prepared");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    ffs.set_space_left(Some(0));
    let mut next = 1;
    let write = |next: &mut u64| {
        let mut b = LogBatch::new();
        b.add_entries(1, *next, &[vec![7u8; 2000]]);
        let r = engine.write(&mut b, true);
        if r.is_ok() {
            *next += 1;
        }
        r
    };
    let e = loop {
        match write(&mut next) {
            Ok(_) => assert!(next < 10_000, "space never ran out"),
            Err(e) => break e,
        }
    };
    assert!(e.is_no_space(), "{e}");
    let m = engine.metrics();
    assert_eq!(m.rotations_prepared, 1, "{m:?}");
    assert_eq!(m.files_rotated, 1, "{m:?}");
    ffs.set_space_left(None);
    for _ in 0..100 {
        write(&mut next).unwrap();
    }
    assert!(engine.metrics().files_rotated >= 2);
    for i in 1..next {
        assert_eq!(engine.get_entry(1, i).unwrap().map(|e| e.len()), Some(2000));
    }
}

#[test]
fn no_space_for_the_next_file_fails_writes_until_space_is_back() {
    let mut h = Harness::new(true);
    // Fill the first file until it has room for a small batch but not a big one.
    while h.room() >= 4000 {
        let spec = h.next(1, 2000);
        h.write(&spec).unwrap();
    }
    let big = h.next(1, 5000);
    let files = append_files(&h.mem);

    // Preallocating the next file runs out of space.
    h.ffs.set_space_left(Some(100));
    let e = h.write(&big).expect_err("rotation needs a new file");
    assert!(e.is_no_space(), "{e}");
    assert_eq!(append_files(&h.mem), files, "no half-made file is left");
    // Not poisoned: a batch that fits the preallocated file needs no space.
    let small = h.next(2, 100);
    h.write(&small).unwrap();
    let e = h.write(&big).expect_err("still no space");
    assert!(e.is_no_space(), "{e}");

    // Space is back, but creating the file fails once with ENOSPC.
    h.ffs.set_space_left(None);
    h.ffs.fail_once_after(Op::Create, 0, ENOSPC);
    let e = h.write(&big).expect_err("create fails");
    assert!(e.is_no_space(), "{e}");
    h.write(&big).expect("space is back");
    assert_eq!(h.seq, 2, "the big batch went into a new file");
    for n in 0..10 {
        let spec = h.next(n % 3 + 1, 1500);
        h.write(&spec).unwrap();
    }
    h.check_after_crash(CrashMode::DropUnsynced, &MODES, "after space came back");
}

#[test]
fn no_space_mid_append_leaves_no_half_batch() {
    let mut h = Harness::new(false);
    for n in 0..10 {
        let spec = h.next(n % 2 + 1, 2000);
        h.write(&spec).unwrap();
    }
    // The append gets 1000 of its 3000-odd bytes: a whole record header and
    // part of the payload reach the file.
    let big = h.next(1, 3000);
    h.ffs.set_space_left(Some(1000));
    let e = h.write(&big).expect_err("the append runs out of space");
    assert!(e.is_no_space(), "{e}");

    // A power loss right now: no trace of the failed batch, whatever part of
    // the unsynced bytes survives.
    h.check_after_crash(CrashMode::DropUnsynced, &MODES, "right after ENOSPC");
    for seed in 0..16 {
        h.check_after_crash(
            CrashMode::KeepRandomPrefix { seed },
            &[RecoveryMode::TolerateTailCorruption],
            "right after ENOSPC",
        );
    }

    h.ffs.set_space_left(Some(500));
    let e = h.write(&big).expect_err("still short of space");
    assert!(e.is_no_space(), "{e}");
    h.ffs.set_space_left(None);
    // A batch shorter than the partial bytes first: it must not leave any of
    // them after itself.
    let short = h.next(2, 50);
    h.write(&short).unwrap();
    h.check_after_crash(CrashMode::DropUnsynced, &MODES, "after a shorter batch");
    h.write(&big).expect("space is back");
    // Seal the file with the ENOSPC history, so damage in it would be
    // damage in the middle of the log.
    while h.seq == 1 {
        let spec = h.next(3, 2000);
        h.write(&spec).unwrap();
    }
    let spec = h.next(1, 700);
    h.write(&spec).unwrap();
    h.check_after_crash(CrashMode::DropUnsynced, &MODES, "after a rotation");
    for seed in 0..16 {
        h.check_after_crash(
            CrashMode::KeepRandomPrefix { seed },
            &MODES,
            "after a rotation",
        );
    }
}

#[test]
fn no_space_at_open_fails_open_until_space_is_back() {
    for preallocate in [true, false] {
        let mut h = Harness::new(preallocate);
        for n in 0..40 {
            let spec = h.next(n % 4 + 1, 2000);
            h.write(&spec).unwrap();
        }
        let Harness {
            engine, ffs, model, ..
        } = h;
        engine.close().unwrap();
        let files = append_files(&h.mem);
        let fs: Arc<dyn FileSystem> = Arc::new(ffs.clone());
        ffs.set_space_left(Some(0));
        let e = Engine::open_with_fs(DIR, config_for(preallocate), fs.clone())
            .expect_err("no space for the new active file");
        assert!(e.is_no_space(), "preallocate={preallocate}: {e}");
        ffs.set_space_left(None);
        let engine = Engine::open_with_fs(DIR, config_for(preallocate), fs).unwrap();
        model.check(&engine).unwrap();
        assert!(
            engine.recovery_report().damage.is_empty(),
            "preallocate={preallocate}"
        );
        let mut after = append_files(&h.mem);
        after.pop();
        assert_eq!(after, files, "preallocate={preallocate}: one new file");
    }
}

#[test]
fn no_space_for_a_new_files_header_is_recovered_once_space_is_back() {
    let mut h = Harness::new(false);
    let mut big = h.next(1, 2000);
    while h.offset + 2100 <= TARGET {
        h.write(&big).unwrap();
        big = h.next(1, 2000);
    }
    // The next write rotates; the new file gets 10 of its 24 header bytes.
    h.ffs.set_space_left(Some(10));
    let e = h.write(&big).expect_err("no space for the header");
    assert!(e.is_no_space(), "{e}");
    h.ffs.set_space_left(None);
    h.write(&big).expect("space is back");
    assert_eq!(h.seq, 2);
    h.check_after_crash(CrashMode::DropUnsynced, &MODES, "after space came back");
}
