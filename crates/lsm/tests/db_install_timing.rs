//! The install statistics move with the installs: a fresh engine reports
//! none, each flush counts one install whose critical section covers its
//! version build and manifest append, and an install into a second column
//! family counts in the same engine-wide figures. Compaction options stay at
//! their defaults, so that three small flushes trigger no compaction and
//! every install is a flush.

mod db_support;

use db_support::*;
use strata_fs::MemFs;
use strata_lsm::{CompactionOptions, TimeHistogram, WriteOptions};

fn sane(h: &TimeHistogram, count: u64) {
    assert_eq!(h.count, count, "{h:?}");
    assert_eq!(h.buckets.iter().sum::<u64>(), count, "{h:?}");
    assert!(h.max_nanos >= h.mean_nanos(), "{h:?}");
    assert!(h.quantile_nanos(0.999) <= h.max_nanos, "{h:?}");
}

#[test]
fn every_flush_counts_one_install_with_its_times() {
    let fs = MemFs::new();
    let mut options = small_options();
    options.default_column_family.compaction = CompactionOptions::default();
    let db = open(&fs, options).expect("open");
    let cf = db.default_column_family();
    let before = db.statistics().install;
    assert_eq!(before.installs, 0);
    sane(&before.lock_held, 0);

    for round in 0..3u64 {
        db.put(&WriteOptions::default(), &cf, &key(round as u32), b"v")
            .expect("put");
        db.flush(&cf, true).expect("flush");
        let stats = db.statistics();
        let t = &stats.install;
        assert_eq!(t.installs, round + 1, "{t:?}");
        assert_eq!(t.installs, stats.flushes, "{t:?}");
        for h in [&t.lock_wait, &t.lock_held, &t.build, &t.persist] {
            sane(h, t.installs);
        }
        // The critical section holds the build and the persist hook.
        assert!(
            t.lock_held.sum_nanos >= t.build.sum_nanos + t.persist.sum_nanos,
            "{t:?}"
        );
        assert!(t.lock_held.max_nanos > 0, "{t:?}");
        // The installs not preempted are among them (on Linux nearly all:
        // a flush of one key on an idle machine).
        let own = &t.lock_held_unpreempted;
        assert!(own.count <= t.lock_held.count, "{t:?}");
        assert!(own.max_nanos <= t.lock_held.max_nanos, "{t:?}");
        assert_eq!(own.buckets.iter().sum::<u64>(), own.count, "{t:?}");
    }

    let other = db.create_column_family("other").expect("create");
    let before = db.statistics().install;
    db.put(&WriteOptions::default(), &other, b"k", b"v")
        .expect("put");
    db.flush(&other, true).expect("flush");
    let delta = db.statistics().install.since(&before);
    assert_eq!(delta.installs, 1, "{delta:?}");
    sane(&delta.lock_held, delta.installs);
}
