//! Power cuts with key-value separation on and blob GC busy: values on
//! both sides of the threshold, a small key space overwritten again and
//! again (so compactions relocate and in-place rewrites collect blob
//! files while the writes go on), the threshold switched off and on
//! between rounds (re-inlining), and manual compactions. After each cut
//! (any subset of the unsynced pages kept), the default recovery mode
//! opens; every write acknowledged with `sync` is there; what is there is
//! exactly a prefix of the writes; and no reference points into a blob
//! file that is gone (a read would fail).
//!
//! `STRATA_BLOB_CUT_SEEDS` runs more seeds than CI's few (a soak).

mod db_support;

use db_support::*;
use strata_fs::{CrashMode, MemFs};
use strata_lsm::{Options, ReadOptions, WriteBatch};

const RING: u64 = 120;

fn options() -> Options {
    let mut o = small_options();
    let cf = &mut o.default_column_family;
    cf.blob.min_blob_size = Some(200);
    cf.blob.block_size_bytes = 512;
    cf.blob.target_file_bytes = 64 << 10;
    cf.blob.garbage_ratio = 0.1;
    cf.blob.space_amp_target = 1.05;
    cf.blob.space_amp_limit = 1.1;
    cf.blob.max_relocate_bytes = 1 << 20;
    o
}

fn value_len(i: u64) -> usize {
    // Both sides of the threshold (200), most above it.
    [40, 150, 199, 200, 320, 700, 1500][(i % 7) as usize]
}

/// Write `i`: the value of `i` under key `i * 7 % RING` (so the ring is
/// overwritten in a scattered order), sometimes a delete, and `i` under
/// "last", in one batch.
fn write(db: &strata_lsm::Db, i: u64, sync: bool) {
    let cf = db.default_column_family();
    let mut b = WriteBatch::new();
    b.put(
        cf.id(),
        &key(((i * 7) % RING) as u32),
        &value(i, value_len(i)),
    );
    if i % 11 == 3 {
        b.delete(cf.id(), &key(((i * 13) % RING) as u32));
    }
    write_counted(db, b, i, sync);
}

fn model_after(n: u64) -> Model {
    let mut m = Model::new();
    for i in 0..n {
        m.maps[0].insert(key(((i * 7) % RING) as u32), value(i, value_len(i)));
        if i % 11 == 3 {
            m.maps[0].remove(&key(((i * 13) % RING) as u32));
        }
        m.maps[0].insert(b"last".to_vec(), i.to_le_bytes().to_vec());
    }
    m
}

/// A reference into a removed blob file fails the read with an error, on
/// which `check_db` panics with the key.
fn check(db: &strata_lsm::Db, n: u64) {
    check_db(
        db,
        &model_after(n),
        &ReadOptions::default(),
        &keys_and_last(RING as u32),
    );
}

fn crash_rounds(seed: u64, rounds: u64) {
    let mut fs = MemFs::new();
    let mut written = 0u64;
    for round in 0..rounds {
        let db = open(&fs, options()).expect("open after a power cut");
        let have = recovered_count(&db);
        assert!(have <= written, "more writes recovered than made");
        check(&db, have);
        written = have;
        let mut synced = have;
        let cf = db.default_column_family();
        // Separation off for a round now and then: compactions re-inline.
        let threshold = if (seed + round) % 4 == 3 {
            None
        } else {
            Some(100 + (seed * 37 + round * 11) % 400)
        };
        db.set_min_blob_size(&cf, threshold).expect("threshold");
        let n = 300 + (seed * 131 + round * 17) % 500;
        for j in 0..n {
            let sync = (written + seed).is_multiple_of(23);
            write(&db, written, sync);
            written += 1;
            if sync {
                synced = written;
            }
            if j == n / 2 && (seed + round).is_multiple_of(3) {
                db.compact_range(&cf, None, None).expect("compact");
            }
        }
        if threshold.is_some() {
            // The round separated values: the cut lands among blob files.
            let st = db.blob_file_stats(&cf).expect("blob stats");
            assert!(st.files > 0, "seed {seed} round {round}: no blob file");
        }
        let cut = power_cut(
            &fs,
            CrashMode::KeepRandomPages {
                seed: seed * 1000 + round,
            },
        );
        drop(db);
        fs = cut;
        let db = open(&fs, options()).expect("open after a power cut");
        let have = recovered_count(&db);
        assert!(
            have >= synced,
            "seed {seed} round {round}: {have} writes recovered, {synced} were synced"
        );
        assert!(have <= written);
        check(&db, have);
        written = have;
        db.close().expect("close");
    }
}

#[test]
fn power_cuts_during_blob_gc_lose_nothing_synced_and_recover_a_prefix() {
    let seeds: u64 = std::env::var("STRATA_BLOB_CUT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let first: u64 = std::env::var("STRATA_BLOB_CUT_FIRST")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    for seed in first..first + seeds {
        crash_rounds(seed, 4);
    }
}
