//! The engine against a `BTreeMap` model, on `MemFs`, under random operations:
//! appends (some replacing a suffix), puts, deletes, compactions, group removals,
//! multi-group batches, refused batches, purges, clean reopens and crashes.
//!
//! After every operation every read path must agree with the model. After a
//! crash that drops unsynced data the recovered state must equal the model after
//! some prefix of the writes since the last synced one (rotation can make
//! unsynced writes durable early, so any prefix is allowed, but nothing else).
//! Small files, a low purge threshold and a low rewrite limit make purge rewrite
//! lagging groups, report others for compaction, compact the rewrite queue and
//! recycle files; the run asserts each of these actually happened.
//!
//! A long deterministic run checks that purge keeps the number of append files
//! bounded; the other tests are regressions found by these two, each reduced to
//! the few writes that show it.

mod model_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use strata_fs::{CrashMode, FileSystem, MemFs};
use strata_raftlog::{Engine, Error, LogBatch};

use model_support::{
    check_engine, explain_no_prefix, find_prefix, log_batch, mix, noise, payload, read_state,
    small_config, Change, Model,
};

const DIR: &str = "/db";
/// Groups the operations touch; every check also probes all of them.
const GROUPS: [u64; 5] = [1, 2, 3, 4, 5];

/// One change of a batch, resolved against the model's state when it runs.
#[derive(Clone, Debug)]
enum ChangeSpec {
    /// `n` entries from `last + 1 - back` (from `1 + back` in an empty group).
    Append {
        group: u64,
        back: u8,
        n: u8,
        seed: u64,
    },
    Put {
        group: u64,
        key: u8,
        seed: u64,
        len: u16,
    },
    Delete {
        group: u64,
        key: u8,
    },
    /// Compacts to `first + ahead`.
    CompactTo {
        group: u64,
        ahead: u8,
    },
    RemoveGroup {
        group: u64,
    },
}

#[derive(Clone, Debug)]
enum Op {
    Write {
        changes: Vec<ChangeSpec>,
        sync: bool,
    },
    /// `Engine::compact_to(group, first + ahead)`.
    Compact {
        group: u64,
        ahead: u8,
    },
    /// A batch leaving a gap after the last index: must be refused.
    Gap {
        group: u64,
    },
    /// Sixteen unsynced batches of 32 incompressible 250-byte entries, then (if
    /// `compact`) a compaction keeping the last 8: volume that fills files.
    Flood {
        group: u64,
        seed: u64,
        compact: bool,
    },
    Purge,
    Sync,
    Reopen,
    Crash,
}

fn group() -> impl Strategy<Value = u64> {
    1u64..6
}

fn change_spec() -> impl Strategy<Value = ChangeSpec> {
    let back = prop_oneof![6 => Just(0u8), 3 => 1u8..6, 1 => 6u8..40];
    let ahead = prop_oneof![3 => 0u8..4, 2 => 4u8..30, 1 => 30u8..=255];
    prop_oneof![
        6 => (group(), back, 1u8..12, any::<u64>())
            .prop_map(|(group, back, n, seed)| ChangeSpec::Append { group, back, n, seed }),
        3 => (group(), 0u8..6, any::<u64>(), 0u16..300)
            .prop_map(|(group, key, seed, len)| ChangeSpec::Put { group, key, seed, len }),
        2 => (group(), 0u8..6).prop_map(|(group, key)| ChangeSpec::Delete { group, key }),
        1 => (group(), ahead).prop_map(|(group, ahead)| ChangeSpec::CompactTo { group, ahead }),
        1 => group().prop_map(|group| ChangeSpec::RemoveGroup { group }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let ahead = prop_oneof![3 => 0u8..4, 2 => 4u8..30, 1 => 30u8..=255];
    prop_oneof![
        60 => (prop::collection::vec(change_spec(), 1..5), prop::bool::weighted(0.25))
            .prop_map(|(changes, sync)| Op::Write { changes, sync }),
        6 => (group(), ahead).prop_map(|(group, ahead)| Op::Compact { group, ahead }),
        2 => group().prop_map(|group| Op::Gap { group }),
        8 => (group(), any::<u64>(), prop::bool::weighted(0.8))
            .prop_map(|(group, seed, compact)| Op::Flood { group, seed, compact }),
        8 => Just(Op::Purge),
        3 => Just(Op::Sync),
        3 => Just(Op::Reopen),
        4 => Just(Op::Crash),
    ]
}

fn key(k: u8) -> Vec<u8> {
    format!("key-{k}").into_bytes()
}

/// Turns specs into changes, tracking each group's range as the batch goes.
fn resolve(specs: &[ChangeSpec], model: &Model) -> Vec<Change> {
    let mut ranges: BTreeMap<u64, Option<(u64, u64)>> = BTreeMap::new();
    let range_of = |ranges: &mut BTreeMap<u64, Option<(u64, u64)>>, g: u64| {
        *ranges
            .entry(g)
            .or_insert_with(|| model.first_index(g).zip(model.last_index(g)))
    };
    let mut out = Vec::new();
    for spec in specs {
        match *spec {
            ChangeSpec::Append {
                group,
                back,
                n,
                seed,
            } => {
                let cur = range_of(&mut ranges, group);
                let first = match cur {
                    None => 1 + back as u64,
                    Some((_, l)) => (l + 1).saturating_sub(back as u64).max(1),
                };
                let last = first + n as u64 - 1;
                let new = match cur {
                    Some((f, _)) if f < first => (f, last),
                    _ => (first, last),
                };
                ranges.insert(group, Some(new));
                let data = (0..n as u64)
                    .map(|i| {
                        let s = seed.wrapping_add(i);
                        payload(s, (mix(s ^ 0x5555) % 300) as usize)
                    })
                    .collect();
                out.push(Change::Entries { group, first, data });
            }
            ChangeSpec::Put {
                group,
                key: k,
                seed,
                len,
            } => out.push(Change::Put {
                group,
                key: key(k),
                value: payload(seed, len as usize),
            }),
            ChangeSpec::Delete { group, key: k } => out.push(Change::Delete { group, key: key(k) }),
            ChangeSpec::CompactTo { group, ahead } => {
                let index = match range_of(&mut ranges, group) {
                    Some((f, l)) => {
                        let index = f + ahead as u64;
                        if index > l {
                            ranges.insert(group, None);
                        } else {
                            ranges.insert(group, Some((index, l)));
                        }
                        index
                    }
                    None => 1 + ahead as u64,
                };
                out.push(Change::CompactTo { group, index });
            }
            ChangeSpec::RemoveGroup { group } => {
                ranges.insert(group, None);
                out.push(Change::RemoveGroup { group });
            }
        }
    }
    out
}

/// What the whole run exercised, so that it cannot pass by testing nothing.
#[derive(Debug, Default)]
struct Coverage {
    ops: u64,
    compressed_batches: u64,
    entries_rewritten: u64,
    files_purged: u64,
    files_recycled: u64,
    force_compactions: u64,
    rewrite_queue_compactions: u64,
    refused_batches: u64,
    crashes: u64,
    crashes_losing_writes: u64,
    crashes_keeping_unsynced: u64,
    max_append_files: u64,
}

/// One engine, its file system and the model of what it holds.
struct Harness {
    fs: MemFs,
    engine: Option<Engine>,
    model: Model,
    /// The state as of the last synced write: all a crash may go back to.
    durable: Model,
    /// Writes since then, in order.
    pending: Vec<Vec<Change>>,
}

impl Harness {
    fn new() -> Self {
        let fs = MemFs::new();
        let engine = Self::open(&fs);
        Harness {
            fs,
            engine: Some(engine),
            model: Model::default(),
            durable: Model::default(),
            pending: Vec::new(),
        }
    }

    fn open(fs: &MemFs) -> Engine {
        let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
        Engine::open_with_fs(DIR, small_config(), dyn_fs).expect("open")
    }

    fn engine(&self) -> &Engine {
        self.engine.as_ref().expect("engine is open")
    }

    /// Writes `changes`, expecting success exactly when the model accepts them.
    fn write(&mut self, changes: Vec<Change>, sync: bool, cov: &mut Coverage) {
        let result = self.engine().write(&mut log_batch(&changes), sync);
        if !self.model.accepts(&changes) {
            assert!(
                matches!(result, Err(Error::InvalidArgument(_))),
                "batch {changes:?} leaves a gap but got {result:?}"
            );
            cov.refused_batches += 1;
            return;
        }
        result.unwrap_or_else(|e| panic!("write {changes:?}: {e}"));
        self.model.apply(&changes);
        if sync {
            self.synced();
        } else {
            self.pending.push(changes);
        }
    }

    /// Everything written so far is durable.
    fn synced(&mut self) {
        self.durable = self.model.clone();
        self.pending.clear();
    }

    /// `Engine::compact_to`, which logs a compaction without sync when it drops
    /// anything.
    fn compact(&mut self, group: u64, index: u64) {
        let Some(first) = self.model.first_index(group) else {
            assert_eq!(self.engine().compact_to(group, index).unwrap(), 0);
            return;
        };
        let expected = self.model.groups[&group].entries.range(..index).count() as u64;
        let dropped = self.engine().compact_to(group, index).unwrap();
        assert_eq!(dropped, expected, "compact_to(g{group}, {index}) dropped");
        if index > first {
            let changes = vec![Change::CompactTo { group, index }];
            self.model.apply(&changes);
            self.pending.push(changes);
        }
    }

    fn absorb_metrics(&self, cov: &mut Coverage) {
        let m = self.engine().metrics();
        cov.compressed_batches += m.compressed_batches;
        cov.files_recycled += m.files_recycled;
    }

    fn run(&mut self, op: &Op, cov: &mut Coverage) {
        cov.ops += 1;
        match op {
            Op::Write { changes, sync } => {
                let changes = resolve(changes, &self.model);
                self.write(changes, *sync, cov);
            }
            Op::Compact { group, ahead } => {
                let index = self.model.first_index(*group).unwrap_or(1) + *ahead as u64;
                self.compact(*group, index);
            }
            Op::Gap { group } => {
                if let Some(last) = self.model.last_index(*group) {
                    let changes = vec![Change::Entries {
                        group: *group,
                        first: last + 2,
                        data: vec![b"gap".to_vec()],
                    }];
                    self.write(changes, false, cov);
                }
            }
            Op::Flood {
                group,
                seed,
                compact,
            } => {
                for b in 0..16u64 {
                    let first = self.model.last_index(*group).map_or(1, |l| l + 1);
                    let data = (0..32u64)
                        .map(|i| noise(seed ^ (b << 8 | i), 250))
                        .collect();
                    let changes = vec![Change::Entries {
                        group: *group,
                        first,
                        data,
                    }];
                    self.write(changes, false, cov);
                }
                if *compact {
                    let last = self.model.last_index(*group).expect("just written");
                    self.compact(*group, last - 7);
                }
            }
            Op::Purge => {
                let out = self.engine().purge().expect("purge");
                cov.entries_rewritten += out.entries_rewritten;
                cov.files_purged += out.files_purged;
                cov.rewrite_queue_compactions += out.rewrite_queue_compacted as u64;
                // Force-compact what purge asks for, as a Raft node would.
                for g in out.groups_to_compact {
                    cov.force_compactions += 1;
                    if let Some(last) = self.model.last_index(g) {
                        self.compact(g, last);
                    }
                }
                let files = self.engine().file_stats().append_files;
                cov.max_append_files = cov.max_append_files.max(files);
            }
            Op::Sync => {
                assert_eq!(self.engine().write(&mut LogBatch::new(), true).unwrap(), 0);
                self.synced();
            }
            Op::Reopen => {
                self.absorb_metrics(cov);
                self.engine.take().expect("open").close().expect("close");
                self.synced();
                let engine = Self::open(&self.fs);
                let report = engine.recovery_report();
                assert!(
                    report.damage.is_empty(),
                    "a clean close left damage: {:?}",
                    report.damage
                );
                self.engine = Some(engine);
            }
            Op::Crash => {
                self.absorb_metrics(cov);
                drop(self.engine.take());
                self.fs.crash(CrashMode::DropUnsynced);
                let engine = Self::open(&self.fs);
                assert!(
                    engine.recovery_report().damage.is_empty(),
                    "dropping unsynced writes tore nothing, yet recovery reports {:?}",
                    engine.recovery_report().damage
                );
                let recovered = read_state(&engine);
                let Some(k) = find_prefix(&self.durable, &self.pending, 0, &recovered) else {
                    panic!(
                        "after a crash: {}",
                        explain_no_prefix(&self.durable, &self.pending, 0, &recovered)
                    );
                };
                cov.crashes += 1;
                if k < self.pending.len() {
                    cov.crashes_losing_writes += 1;
                }
                if k > 0 {
                    cov.crashes_keeping_unsynced += 1;
                }
                self.model = recovered;
                self.synced();
                self.engine = Some(engine);
            }
        }
    }
}

fn run_case(ops: &[Op], cov: &mut Coverage) {
    let mut h = Harness::new();
    for (i, op) in ops.iter().enumerate() {
        h.run(op, cov);
        check_engine(
            h.engine(),
            &h.model,
            &GROUPS,
            1,
            &format!("after op {i} {op:?}"),
        );
    }
    // A final clean reopen must show the same state.
    h.run(&Op::Reopen, cov);
    check_engine(h.engine(), &h.model, &GROUPS, 1, "after the final reopen");
}

/// Runs `f` with the panic messages of this thread silenced: proptest catches
/// each failing case's panic and shrinks by replaying hundreds of them, and
/// printing (with a backtrace) every one would bury the final report.
fn quietly<T>(f: impl FnOnce() -> T) -> T {
    let me = std::thread::current().id();
    let default: Arc<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync> =
        Arc::from(std::panic::take_hook());
    let other = default.clone();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() != me {
            other(info);
        }
    }));
    let out = f();
    drop(std::panic::take_hook());
    std::panic::set_hook(Box::new(move |info| default(info)));
    out
}

#[test]
fn engine_matches_btreemap_model() {
    // `PROPTEST_CASES` runs more cases than CI's (a soak).
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64);
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_time: 60_000,
        ..ProptestConfig::default()
    };
    let coverage = Mutex::new(Coverage::default());
    let mut runner = TestRunner::new(config);
    let result = quietly(|| {
        runner.run(&prop::collection::vec(op(), 100..300), |ops| {
            run_case(
                &ops,
                &mut coverage.lock().unwrap_or_else(|e| e.into_inner()),
            );
            Ok(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let cov = coverage.into_inner().unwrap();
    eprintln!("model test coverage: {cov:?}");
    // The run must have exercised every path it exists to test.
    assert!(cov.compressed_batches > 0, "{cov:?}");
    assert!(cov.entries_rewritten > 0, "{cov:?}");
    assert!(cov.force_compactions > 0, "{cov:?}");
    assert!(cov.rewrite_queue_compactions > 0, "{cov:?}");
    assert!(cov.files_purged > 0, "{cov:?}");
    assert!(cov.files_recycled > 0, "{cov:?}");
    assert!(cov.refused_batches > 0, "{cov:?}");
    assert!(cov.crashes_losing_writes > 0, "{cov:?}");
    assert!(cov.crashes_keeping_unsynced > 0, "{cov:?}");
}

/// A long run where busy groups are compacted as they go, one lagging group is
/// small enough to be rewritten and another too big and so force-compacted: purge
/// must keep the append queue near its threshold, not let it grow with the data.
#[test]
fn purge_keeps_append_files_bounded() {
    let fs = MemFs::new();
    let mut h = Harness {
        engine: Some(Harness::open(&fs)),
        fs,
        model: Model::default(),
        durable: Model::default(),
        pending: Vec::new(),
    };
    let mut cov = Coverage::default();
    // Group 6 lags with little data, group 7 with more than the rewrite limit.
    let small: Vec<Vec<u8>> = (0..3).map(|i| payload(600 + i, 100)).collect();
    let big: Vec<Vec<u8>> = (0..60).map(|i| noise(i, 250)).collect();
    // Separate batches: see `small_group_in_a_big_batch_is_rewritten`.
    h.write(
        vec![
            Change::Entries {
                group: 6,
                first: 1,
                data: small,
            },
            Change::Put {
                group: 6,
                key: b"state".to_vec(),
                value: b"lagging".to_vec(),
            },
        ],
        true,
        &mut cov,
    );
    let big = vec![Change::Entries {
        group: 7,
        first: 1,
        data: big,
    }];
    h.write(big, true, &mut cov);
    let (mut rewritten, mut forced, mut purged) = (0, false, 0);
    for round in 1..=1000u64 {
        let changes = GROUPS
            .iter()
            .map(|&g| Change::Entries {
                group: g,
                first: h.model.last_index(g).map_or(1, |l| l + 1),
                data: (0..4)
                    .map(|i| noise((round * 8 + i) * 8 + g, 200))
                    .collect(),
            })
            .collect();
        h.write(changes, round % 16 == 0, &mut cov);
        if round % 20 == 0 {
            for g in GROUPS {
                let last = h.model.last_index(g).expect("written");
                h.compact(g, last - 30);
            }
        }
        if round % 10 == 0 {
            let out = h.engine().purge().expect("purge");
            rewritten += out.entries_rewritten;
            purged += out.files_purged;
            for g in out.groups_to_compact {
                assert_eq!(g, 7, "only group 7 lags with too much data");
                forced = true;
                let last = h.model.last_index(g).expect("group 7 has entries");
                h.compact(g, last);
            }
            let stats = h.engine().file_stats();
            // 1 MiB threshold / 64 KiB files = 16 sealed files, plus the active
            // one and what a purge cycle lets accumulate.
            assert!(
                stats.append_files <= 24,
                "round {round}: {stats:?}, metrics {:?}",
                h.engine().metrics()
            );
            assert_eq!(
                stats.active_append_seq - stats.first_append_seq + 1,
                stats.append_files,
                "{stats:?}"
            );
        }
    }
    eprintln!(
        "long run: {purged} files purged, {rewritten} entries rewritten, {:?}",
        h.engine().file_stats()
    );
    assert!(rewritten >= 3, "group 6 was never rewritten");
    assert!(forced, "group 7 was never reported for compaction");
    let m = h.engine().metrics();
    assert!(purged > 40, "only {purged} files purged; {m:?}");
    assert!(m.files_recycled > 0, "{m:?}");
    assert!(h.engine().file_stats().rewrite_files >= 1);
    check_engine(h.engine(), &h.model, &[6, 7], 1, "end of the long run");
    h.run(&Op::Reopen, &mut cov);
    check_engine(h.engine(), &h.model, &[6, 7], 1, "after reopen");
    assert_eq!(
        h.engine().get(6, b"state").as_deref(),
        Some(&b"lagging"[..])
    );
}

/// Appends `len`-byte entries to group 1 from `next` until the active file
/// changes; returns the next index.
fn fill_active_file(engine: &Engine, mut next: u64, len: usize) -> u64 {
    let seq = engine.file_stats().active_append_seq;
    while engine.file_stats().active_append_seq == seq {
        let mut b = LogBatch::new();
        b.add_entries(1, next, &[vec![next as u8; len]]);
        engine.write(&mut b, false).expect("write");
        next += 1;
    }
    next
}

/// Makes file 3 a recycled file 1 (1000-byte records under 700-byte ones) and
/// returns the engine with file 3 active, and the next index.
fn engine_with_recycled_active_file(fs: &MemFs) -> (Engine, u64) {
    // Each rotation makes its own file, so that file 3 is the recycled 1.
    let config = strata_raftlog::Config {
        prepare_next_file: false,
        ..small_config()
    };
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let engine = Engine::open_with_fs(DIR, config, dyn_fs).expect("open");
    let next = fill_active_file(&engine, 1, 1000);
    engine.compact_to(1, next).expect("compact");
    assert_eq!(engine.purge().expect("purge").files_purged, 1);
    let next = fill_active_file(&engine, next, 700);
    let stats = engine.file_stats();
    assert_eq!((stats.active_append_seq, stats.recycled_files), (3, 0));
    assert_eq!(engine.metrics().files_recycled, 1);
    (engine, next)
}

/// Regression (found by the model test, fixed by the end marker): a recycled
/// file keeps its old records past the new ones, so in the last file a clean
/// close looked like a torn write: reported as damage, and refused by
/// `AbsoluteConsistency`. (`regressions_purge_recovery.rs` covers the sealed
/// file, which failed `open` outright.)
#[test]
fn recycled_last_file_shows_no_damage_after_close() {
    let fs = MemFs::new();
    let (engine, next) = engine_with_recycled_active_file(&fs);
    let mut b = LogBatch::new();
    b.add_entries(1, next, &[vec![1u8; 700]]);
    engine.write(&mut b, false).expect("write");
    engine.close().expect("close");
    let strict = strata_raftlog::Config {
        recovery_mode: strata_raftlog::RecoveryMode::AbsoluteConsistency,
        ..small_config()
    };
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.deep_clone());
    if let Err(e) = Engine::open_with_fs(DIR, strict, dyn_fs) {
        panic!("AbsoluteConsistency refuses a cleanly closed engine: {e}");
    }
    let engine = Harness::open(&fs);
    assert_eq!(engine.last_index(1), Some(next));
    assert!(
        engine.recovery_report().damage.is_empty(),
        "{:?}",
        engine.recovery_report().damage
    );
}

/// Regression (found by the model test): group 5's entries 1..=9 are rewritten
/// out of the oldest file while the record of 11..=18, whose 11.. were since
/// replaced by a new entry 10, stays in a newer file. Replaying that dead record
/// after the rewritten copy (1..=9) leaves a gap, which recovery takes for a new
/// start of the log: entries 1..=9 vanish on reopen.
#[test]
fn rewritten_prefix_survives_replay_of_a_replaced_record() {
    let fs = MemFs::new();
    let engine = Harness::open(&fs);
    let write = |group: u64, first: u64, n: u64, len: usize| {
        let data: Vec<Vec<u8>> = (first..first + n).map(|i| noise(i, len)).collect();
        let mut b = LogBatch::new();
        b.add_entries(group, first, &data);
        engine.write(&mut b, false).expect("write");
    };
    write(5, 1, 8, 100);
    write(5, 9, 2, 100);
    // More than the purge threshold of another group's data, which it compacts.
    for i in 0..80 {
        write(1, 1 + 16 * i, 16, 1000);
    }
    engine.compact_to(1, 16 * 80).expect("compact");
    write(5, 11, 8, 100);
    write(5, 10, 1, 100); // replaces 10..=18 by a new 10
    let out = engine.purge().expect("purge");
    assert!(out.entries_rewritten >= 9, "{out:?}");
    assert_eq!(
        (engine.first_index(5), engine.last_index(5)),
        (Some(1), Some(10))
    );
    engine.close().expect("close");
    let engine = Harness::open(&fs);
    assert_eq!(
        (engine.first_index(5), engine.last_index(5)),
        (Some(1), Some(10)),
        "group 5 after reopen"
    );
    assert_eq!(engine.get_entry(5, 1).expect("read"), Some(noise(1, 100)));
}

/// Regression (found by `purge_keeps_append_files_bounded`): purge estimates a
/// lagging group's bytes from its entries item's share of the record, counting
/// the whole record as that item's. A group with 300 bytes left in a batch that
/// also carried 15 KB for another group is then reported for force compaction
/// instead of being rewritten.
#[test]
fn small_group_in_a_big_batch_is_rewritten() {
    let fs = MemFs::new();
    let engine = Harness::open(&fs);
    let small: Vec<Vec<u8>> = (0..3).map(|i| noise(i, 100)).collect();
    let big: Vec<Vec<u8>> = (0..60).map(|i| noise(100 + i, 250)).collect();
    let mut b = LogBatch::new();
    b.add_entries(6, 1, &small);
    b.add_entries(7, 1, &big);
    engine.write(&mut b, true).expect("write");
    engine.compact_to(7, 61).expect("compact");
    // Another group fills the purge threshold and keeps only its tail.
    for i in 0..80u64 {
        let data: Vec<Vec<u8>> = (0..16).map(|j| noise(1000 + 16 * i + j, 1000)).collect();
        let mut b = LogBatch::new();
        b.add_entries(1, 1 + 16 * i, &data);
        engine.write(&mut b, false).expect("write");
    }
    engine.compact_to(1, 16 * 80).expect("compact");
    let out = engine.purge().expect("purge");
    assert!(
        out.groups_to_compact.is_empty() && out.entries_rewritten == 3,
        "group 6 holds 300 bytes, under the 8 KiB rewrite limit: {out:?}"
    );
}
