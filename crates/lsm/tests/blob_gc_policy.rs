//! Which blob files GC collects, and when: cheap collections (files at
//! least `garbage_ratio` garbage) at any time once over the space target,
//! dearer ones only when writers pause or past the hard limit, the worst
//! files first within the relocation budget.

use std::collections::BTreeSet;
use std::sync::Arc;

use strata_lsm::compaction::{blob_gc_candidates, blob_space_amp, pick_blob_gc, GcPolicy};
use strata_lsm::version::BlobFileDesc;
use strata_lsm::{
    FileDesc, FileNumber, InternalKey, ObsoleteFiles, ValueKind, Version, VersionBuilder,
    VersionEdit,
};

fn blob(number: FileNumber, value_bytes: u64) -> BlobFileDesc {
    BlobFileDesc {
        number,
        size: value_bytes + 1000,
        record_count: value_bytes / 100,
        value_bytes,
    }
}

fn sst(number: FileNumber, lo: &str, hi: &str, blob_refs: Vec<(FileNumber, u64)>) -> FileDesc {
    FileDesc {
        number,
        size: 4096,
        smallest: InternalKey::new(lo.as_bytes(), 5, ValueKind::Put),
        largest: InternalKey::new(hi.as_bytes(), 5, ValueKind::Put),
        smallest_seqno: 5,
        largest_seqno: 5,
        blob_refs,
        range_tombstones: false,
    }
}

fn version(blobs: Vec<BlobFileDesc>, files: Vec<(u8, FileDesc)>) -> Arc<Version> {
    let (queue, _rx) = ObsoleteFiles::channel();
    let base = Arc::new(Version::new(0, 7, queue).unwrap());
    let mut b = VersionBuilder::new(&base);
    b.apply(&VersionEdit {
        next_file_number: Some(1000),
        added: files,
        added_blob_files: blobs,
        ..VersionEdit::default()
    })
    .unwrap();
    b.build().version
}

fn policy(writers_idle: bool) -> GcPolicy {
    GcPolicy {
        garbage_ratio: 0.5,
        space_amp_target: 1.25,
        space_amp_limit: 2.0,
        max_relocate_bytes: 1 << 30,
        writers_idle,
        all: false,
    }
}

/// Three blob files of 1000 value bytes, 0.7, 0.4 and 0.1 garbage, all
/// referenced by one L6 SST: 3000 bytes for 1800 live, 1.67 (over the
/// 1.25 target, under the 2.0 limit).
fn over_target() -> Arc<Version> {
    version(
        vec![blob(100, 1000), blob(101, 1000), blob(102, 1000)],
        vec![(
            6,
            sst(7, "a", "z", vec![(100, 300), (101, 600), (102, 900)]),
        )],
    )
}

fn collected(v: &Version, p: &GcPolicy) -> BTreeSet<FileNumber> {
    let c = pick_blob_gc(v, p, &|_| false).expect("over the target: an in-place pick");
    assert_eq!(c.inputs.len(), 1);
    assert_eq!(c.inputs[0].number(), 7);
    blob_gc_candidates(v, &c, p)
}

#[test]
fn under_writes_only_files_at_least_the_garbage_ratio_are_collected() {
    let v = over_target();
    assert!((blob_space_amp(&v) - 3000.0 / 1800.0).abs() < 1e-9);
    assert_eq!(collected(&v, &policy(false)), BTreeSet::from([100]));
}

#[test]
fn paused_writers_let_files_over_the_target_share_of_garbage_go_too() {
    let v = over_target();
    // 0.2 = 1 - 1/1.25: file 102 (0.1 garbage) stays.
    assert_eq!(collected(&v, &policy(true)), BTreeSet::from([100, 101]));
}

#[test]
fn past_the_hard_limit_dear_collections_run_under_writes() {
    let v = over_target();
    let p = GcPolicy {
        space_amp_limit: 1.5,
        ..policy(false)
    };
    assert_eq!(collected(&v, &p), BTreeSet::from([100, 101]));
}

#[test]
fn the_relocation_budget_takes_the_worst_files_first_and_always_one() {
    let v = over_target();
    // Past the hard limit, under writes: the budget is `max_relocate_bytes`.
    let p = GcPolicy {
        max_relocate_bytes: 700,
        space_amp_limit: 1.5,
        ..policy(false)
    };
    // 100 (300 live bytes here) fits; 101 (600 more) would not.
    assert_eq!(collected(&v, &p), BTreeSet::from([100]));
    let p = GcPolicy {
        max_relocate_bytes: 10,
        ..p
    };
    assert_eq!(collected(&v, &p), BTreeSet::from([100]));
}

#[test]
fn an_in_place_rewrite_relocates_four_budgets_while_writers_pause() {
    let v = over_target();
    // 4 x 200 = 800: 100 (300) fits, 101 (600 more) would not.
    let p = GcPolicy {
        max_relocate_bytes: 200,
        ..policy(true)
    };
    assert_eq!(collected(&v, &p), BTreeSet::from([100]));
    // 4 x 250 = 1000: both.
    let p = GcPolicy {
        max_relocate_bytes: 250,
        ..policy(true)
    };
    assert_eq!(collected(&v, &p), BTreeSet::from([100, 101]));
    // The same pick under writes past the limit: one budget, one file.
    let p = GcPolicy {
        max_relocate_bytes: 250,
        space_amp_limit: 1.5,
        ..policy(false)
    };
    assert_eq!(collected(&v, &p), BTreeSet::from([100]));
}

#[test]
fn within_the_target_nothing_is_picked_even_with_writers_paused() {
    // 2000 bytes for 1700 live: 1.18.
    let v = version(
        vec![blob(100, 1000), blob(101, 1000)],
        vec![(6, sst(7, "a", "z", vec![(100, 800), (101, 900)]))],
    );
    assert!(pick_blob_gc(&v, &policy(true), &|_| false).is_none());
}

#[test]
fn under_writes_nothing_is_picked_while_no_file_is_half_garbage() {
    // 2000 bytes for 1300 live: 1.54, but no file is 0.5 garbage.
    let v = version(
        vec![blob(100, 1000), blob(101, 1000)],
        vec![(6, sst(7, "a", "z", vec![(100, 600), (101, 700)]))],
    );
    assert!(pick_blob_gc(&v, &policy(false), &|_| false).is_none());
    assert!(pick_blob_gc(&v, &policy(true), &|_| false).is_some());
}

#[test]
fn the_pick_takes_the_sst_holding_most_of_the_worst_file() {
    let v = version(
        vec![blob(100, 1000)],
        vec![
            (6, sst(7, "a", "f", vec![(100, 50)])),
            (6, sst(8, "g", "m", vec![(100, 150)])),
            (6, sst(9, "n", "z", vec![(100, 100)])),
        ],
    );
    let c = pick_blob_gc(&v, &policy(false), &|_| false).unwrap();
    assert_eq!(c.inputs[0].number(), 8);
    // Busy, the next best.
    let c = pick_blob_gc(&v, &policy(false), &|n| n == 8).unwrap();
    assert_eq!(c.inputs[0].number(), 9);
}
