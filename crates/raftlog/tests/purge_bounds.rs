//! Purge's copies stay bounded. Proves that:
//! - no rewrite record's payload passes a megabyte (`docs/raftlog.md`,
//!   "Purge and the rewrite queue"), even for a group whose copies grow over
//!   many purges and are carried at every compaction of the rewrite queue,
//!   or a group with more than a megabyte to copy at once: a group's copy is
//!   split over several records, and replaying them gives the same log;
//! - a group's copies already in the rewrite queue count toward
//!   `purge_rewrite_group_bytes_max`, so a group that lags a little further
//!   at every purge is reported in `groups_to_compact` once its copies pass
//!   the limit, rather than copied for ever;
//! - everything survives reopen, from the files' records and from their
//!   index sections.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};
use strata_raftlog::format::RECORD_HEADER_LEN;
use strata_raftlog::reader::scan_file;
use strata_raftlog::{Config, Engine, LogBatch};

const DIR: &str = "/db";
/// The payload a rewrite record may hold, unless one entry alone is larger.
const REWRITE_RECORD_BYTES: usize = 1 << 20;
/// The group that lags.
const LAGGING: u64 = 1;
/// Groups that write a lot and are compacted often.
const CHURNING: std::ops::RangeInclusive<u64> = 2..=9;

fn open(fs: &MemFs, config: &Config) -> Engine {
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    Engine::open_with_fs(DIR, config.clone(), dyn_fs).expect("open")
}

/// Entry `index` of `group`: `len` bytes that do not compress.
fn entry(group: u64, index: u64, len: usize) -> Vec<u8> {
    let mut x =
        group.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// What the engine must hold: per group its live entries (index, length)
/// and its keys.
#[derive(Default)]
struct Model {
    entries: BTreeMap<u64, BTreeMap<u64, usize>>,
    keys: BTreeMap<u64, BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl Model {
    fn last(&self, group: u64) -> u64 {
        self.entries
            .get(&group)
            .and_then(|e| e.keys().next_back().copied())
            .unwrap_or(0)
    }

    fn live_bytes(&self, group: u64) -> u64 {
        self.entries
            .get(&group)
            .map_or(0, |e| e.values().map(|l| *l as u64).sum())
    }

    /// Appends `n` entries of `len` bytes to `group` in one batch, with a put
    /// of the group's state.
    fn append(&mut self, engine: &Engine, group: u64, n: u64, len: usize) {
        let first = self.last(group) + 1;
        let entries: Vec<Vec<u8>> = (first..first + n).map(|i| entry(group, i, len)).collect();
        let state = format!("last={}", first + n - 1).into_bytes();
        let mut batch = LogBatch::new();
        batch.add_entries(group, first, &entries);
        batch.put(group, b"state", &state);
        engine.write(&mut batch, false).expect("write");
        let log = self.entries.entry(group).or_default();
        for i in first..first + n {
            log.insert(i, len);
        }
        self.keys
            .entry(group)
            .or_default()
            .insert(b"state".to_vec(), state);
    }

    fn compact(&mut self, engine: &Engine, group: u64, to: u64) {
        engine.compact_to(group, to).expect("compact");
        if let Some(log) = self.entries.get_mut(&group) {
            *log = log.split_off(&to);
        }
    }

    fn check(&self, engine: &Engine, ctx: &str) {
        for (&g, log) in &self.entries {
            let (Some((&first, _)), Some((&last, _))) =
                (log.first_key_value(), log.last_key_value())
            else {
                continue;
            };
            assert_eq!(engine.first_index(g), Some(first), "{ctx}: group {g} first");
            assert_eq!(engine.last_index(g), Some(last), "{ctx}: group {g} last");
            let got = engine
                .fetch_entries(g, first, last + 1, usize::MAX)
                .unwrap_or_else(|e| panic!("{ctx}: fetch group {g}: {e}"));
            assert_eq!(got.len() as u64, last + 1 - first, "{ctx}: group {g}");
            for ((&i, &len), data) in log.iter().zip(&got) {
                assert!(
                    *data == entry(g, i, len),
                    "{ctx}: group {g} entry {i} differs"
                );
            }
        }
        for (&g, keys) in &self.keys {
            let want: Vec<(Vec<u8>, Vec<u8>)> =
                keys.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(engine.scan_keys(g), want, "{ctx}: keys of group {g}");
        }
    }
}

/// Returns the length of the largest record in the rewrite queue's files,
/// and how many records they hold.
fn largest_rewrite_record(fs: &MemFs) -> (usize, usize) {
    let mut largest = 0;
    let mut records = 0;
    for name in fs.list(Path::new(DIR)).expect("list") {
        if !name.ends_with(".rewrite") {
            continue;
        }
        let file = fs.open(&Path::new(DIR).join(&name), false).expect("open");
        let mut bytes = vec![0u8; file.len().expect("len") as usize];
        file.read_exact_at(0, &mut bytes).expect("read");
        let scan = scan_file(&bytes).expect("scan");
        for record in &scan.records {
            largest = largest.max(record.len as usize);
            records += 1;
        }
    }
    (largest, records)
}

/// One round of churn: every churning group writes `batches` batches of one
/// 4 KiB entry and is compacted to its last 4 entries.
fn churn(engine: &Engine, model: &mut Model, batches: u64) {
    for _ in 0..batches {
        for g in CHURNING {
            model.append(engine, g, 1, 4 << 10);
        }
    }
    for g in CHURNING {
        let last = model.last(g);
        model.compact(engine, g, last.saturating_sub(3).max(1));
    }
}

#[test]
fn rewrite_records_stay_bounded_for_a_slowly_lagging_group() {
    let config = Config {
        target_file_size_bytes: 256 << 10,
        purge_threshold_bytes: 1 << 20,
        purge_rewrite_group_bytes_max: 2 << 20,
        preallocate: false,
        ..Config::default()
    };
    let limit = config.purge_rewrite_group_bytes_max;
    let fs = MemFs::new();
    let engine = open(&fs, &config);
    let mut model = Model::default();
    let mut reported_at = None;
    let mut rewritten_rounds = 0;
    for round in 0..120 {
        // The lagging group writes 32 KiB and puts its state: the put
        // replaces its copied state, so every purge compacts the rewrite
        // queue and carries the group's whole copy again.
        model.append(&engine, LAGGING, 8, 4 << 10);
        churn(&engine, &mut model, 48);
        let out = engine.purge().expect("purge");
        rewritten_rounds += u64::from(out.entries_rewritten > 0);
        let (largest, _) = largest_rewrite_record(&fs);
        assert!(
            largest <= RECORD_HEADER_LEN + REWRITE_RECORD_BYTES,
            "round {round}: a rewrite record of {largest} bytes"
        );
        let live = model.live_bytes(LAGGING);
        let reported = out.groups_to_compact.contains(&LAGGING);
        if reported {
            // Its copies plus what purge wanted to copy passed the limit.
            assert!(live > limit, "round {round}: reported with {live} bytes");
            reported_at.get_or_insert(round);
        } else {
            assert!(
                reported_at.is_none(),
                "round {round}: reported at round {reported_at:?}, no longer now"
            );
            // Data newer than the cutoff (half the threshold, and the active
            // file) is not copied yet: beyond that, the copies are over.
            assert!(
                live <= limit + (1 << 20),
                "round {round}: {live} bytes and not reported"
            );
        }
        if round % 16 == 0 {
            model.check(&engine, &format!("round {round}"));
        }
        if reported_at.is_some_and(|at| round >= at + 3) {
            break;
        }
    }
    assert!(rewritten_rounds > 10, "purge hardly copied anything");
    let at = reported_at.expect("the lagging group was never reported");
    eprintln!("reported at round {at}");

    // The caller compacts the reported group: its copies are dropped, later
    // purges no longer report it, and free the files it held.
    let last = model.last(LAGGING);
    model.compact(&engine, LAGGING, last - 7);
    let first_seq = engine.file_stats().first_append_seq;
    for round in 0..4 {
        churn(&engine, &mut model, 48);
        let out = engine.purge().expect("purge");
        assert!(!out.groups_to_compact.contains(&LAGGING), "{out:?}");
        let (largest, _) = largest_rewrite_record(&fs);
        assert!(largest <= RECORD_HEADER_LEN + REWRITE_RECORD_BYTES);
        model.check(&engine, &format!("after the compaction, round {round}"));
    }
    assert!(engine.file_stats().first_append_seq > first_seq);

    // From the records of the last files (no close: no index sections)...
    drop(engine);
    let engine = open(&fs, &config);
    model.check(&engine, "reopen without close");
    // ...and from the index sections.
    engine.close().expect("close");
    let engine = open(&fs, &config);
    model.check(&engine, "reopen after close");
}

/// A group with more than a megabyte to copy in one purge, part of it in one
/// entries item larger than a record may be: its copy is split over several
/// records (the large item over several), and the log reads back the same,
/// before and after reopen.
#[test]
fn a_copy_split_over_several_records_reads_back_the_same_log() {
    let config = Config {
        target_file_size_bytes: 512 << 10,
        purge_threshold_bytes: 1 << 20,
        purge_rewrite_group_bytes_max: 16 << 20,
        preallocate: false,
        ..Config::default()
    };
    let fs = MemFs::new();
    let engine = open(&fs, &config);
    let mut model = Model::default();
    // Runs of every shape: single entries, small batches, and one batch of
    // 1.5 MiB (one item that no record may hold whole).
    model.append(&engine, LAGGING, 1, 100);
    model.append(&engine, LAGGING, 40, 3000);
    model.append(&engine, LAGGING, 96, 16 << 10);
    for _ in 0..30 {
        model.append(&engine, LAGGING, 1, 20_000);
    }
    model.append(&engine, LAGGING, 5, 0);
    churn(&engine, &mut model, 64);
    let out = engine.purge().expect("purge");
    assert!(out.groups_to_compact.is_empty(), "{out:?}");
    assert!(out.entries_rewritten >= 172, "{out:?}");
    let (largest, records) = largest_rewrite_record(&fs);
    assert!(
        largest <= RECORD_HEADER_LEN + REWRITE_RECORD_BYTES,
        "{largest}"
    );
    assert!(records >= 3, "{records} rewrite records");
    model.check(&engine, "after the purge");

    // A compaction inside the copied items, then a purge that carries the
    // rest into a new generation.
    model.compact(&engine, LAGGING, 60);
    churn(&engine, &mut model, 64);
    let out = engine.purge().expect("purge");
    assert!(out.rewrite_queue_compacted, "{out:?}");
    let (largest, _) = largest_rewrite_record(&fs);
    assert!(
        largest <= RECORD_HEADER_LEN + REWRITE_RECORD_BYTES,
        "{largest}"
    );
    model.check(&engine, "after the second purge");

    drop(engine);
    let engine = open(&fs, &config);
    model.check(&engine, "reopen without close");
    engine.close().expect("close");
    let engine = open(&fs, &config);
    model.check(&engine, "reopen after close");
}
