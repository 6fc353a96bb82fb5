//! Purge reads each record it copies from once, however many groups share it.
//! Proves that a purge copying the live data of many lagging groups, written
//! 16 groups to a batch (one record), reads each record once, not once per
//! group: its work follows the bytes it copies, not groups times records.

use std::sync::Arc;

use strata_fs::{FaultFs, FileSystem, MemFs, Op};
use strata_raftlog::{Config, Engine, LogBatch};

const GROUPS: u64 = 64;
const GROUPS_PER_BATCH: u64 = 16;
const BUSY: u64 = GROUPS + 1;

fn entry(group: u64, index: u64) -> Vec<u8> {
    let mut x = group.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index;
    let mut v = Vec::with_capacity(1024);
    while v.len() < 1024 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

#[test]
fn purge_reads_each_record_it_copies_from_once() {
    let config = Config {
        target_file_size_bytes: 256 << 10,
        purge_threshold_bytes: 1 << 20,
        preallocate: false,
        ..Config::default()
    };
    let fs = FaultFs::new(Arc::new(MemFs::new()));
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let engine = Engine::open_with_fs("/db", config.clone(), dyn_fs.clone()).unwrap();
    // 200 records, each with one entry and a state put of 16 groups.
    let batches = 200;
    for b in 0..batches {
        let mut batch = LogBatch::new();
        for k in 0..GROUPS_PER_BATCH {
            let group = 1 + (b * GROUPS_PER_BATCH + k) % GROUPS;
            let index = 1 + (b * GROUPS_PER_BATCH + k) / GROUPS;
            batch.add_entries(group, index, &[entry(group, index)]);
            batch.put(group, b"state", &index.to_le_bytes());
        }
        engine.write(&mut batch, false).unwrap();
    }
    // A busy group pushes all of them into the files purge frees.
    for i in 1..=3000 {
        let mut batch = LogBatch::new();
        batch.add_entries(BUSY, i, &[entry(BUSY, i)]);
        engine.write(&mut batch, false).unwrap();
    }
    engine.compact_to(BUSY, 2990).unwrap();
    let reads = fs.count(Op::Read);
    let out = engine.purge().unwrap();
    let reads = fs.count(Op::Read) - reads;
    assert_eq!(out.entries_rewritten, batches * GROUPS_PER_BATCH, "{out:?}");
    assert!(reads <= batches, "{reads} reads for {batches} records");

    let per_group = batches * GROUPS_PER_BATCH / GROUPS;
    let check = |engine: &Engine, ctx: &str| {
        for group in 1..=GROUPS {
            let got = engine
                .fetch_entries(group, 1, per_group + 1, usize::MAX)
                .unwrap();
            assert_eq!(got.len() as u64, per_group, "{ctx}: group {group}");
            for (i, data) in (1..).zip(&got) {
                assert!(*data == entry(group, i), "{ctx}: group {group} entry {i}");
            }
            let state = engine.get(group, b"state");
            assert_eq!(state, Some(per_group.to_le_bytes().to_vec()), "{ctx}");
        }
    };
    check(&engine, "after the purge");
    engine.close().unwrap();
    let engine = Engine::open_with_fs("/db", config, dyn_fs).unwrap();
    check(&engine, "after reopen");
}
