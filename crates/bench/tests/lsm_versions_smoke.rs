//! `strata-bench lsm-versions` end to end on Strata at tiny sizes: the
//! database grows to 20 and then 50 files, each size measured for a second
//! and the second followed by a full compaction under the same readers, and
//! the JSON carries one record per size and phase with read-path latencies
//! (all calls, and those not preempted), versions installed and Strata's own
//! install timing, then the acceptance targets. A build without RocksDB refuses to run it, before writing
//! anything, and says how to build it.

mod bench_cli;

use bench_cli::json_lines;
use serde_json::Value;

#[test]
fn strata_reports_every_size_with_its_install_timing() {
    let dir = tempfile::tempdir().unwrap();
    let lines = run_strata(
        dir.path(),
        &["--files", "20,50", "--full-compaction-at", "50"],
    );
    let sizes: Vec<&Value> = lines.iter().filter(|v| v["kind"] == "size").collect();
    let targets: Vec<(u64, &str)> = sizes
        .iter()
        .map(|s| {
            (
                s["target_files"].as_u64().unwrap(),
                s["phase"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        targets,
        [(20, "churn"), (50, "churn"), (50, "full compaction")]
    );
    assert_eq!(sizes[2]["writer_keys"].as_u64(), Some(0));
    for s in &sizes {
        assert_eq!(s["engine"], "strata", "{s}");
        assert!(s["error"].is_null(), "{s}");
        assert!(s["files_at_start"].as_u64().unwrap() >= s["target_files"].as_u64().unwrap());
        assert!(s["reader_loops"].as_u64().unwrap() > 0, "{s}");
        assert!(s["versions_installed"].as_u64().unwrap() > 0, "{s}");
        for op in ["snapshot", "iter_create", "bounded_iter_create", "get"] {
            let o = &s[op];
            assert!(o["count"].as_u64().unwrap() > 0, "{op}: {s}");
            let (p50, max) = (o["p50_us"].as_f64().unwrap(), o["max_us"].as_f64().unwrap());
            assert!(p50 > 0.0 && p50 <= max, "{op}: {s}");
            let own = o["own_count"].as_u64().unwrap();
            assert!(own <= o["count"].as_u64().unwrap(), "{op}: {s}");
            if own > 0 {
                assert!(o["own_max_us"].as_f64().unwrap() <= max, "{op}: {s}");
            }
        }
        let held = &s["install"]["lock_held"];
        assert_eq!(
            held["count"].as_u64(),
            s["versions_installed"].as_u64(),
            "{s}"
        );
        assert!(held["max_us"].as_f64().unwrap() >= held["mean_us"].as_f64().unwrap());
        let own = &s["install"]["lock_held_unpreempted"];
        assert!(own["count"].as_u64() <= held["count"].as_u64(), "{s}");
        assert!(own["max_us"].as_f64().unwrap() <= held["max_us"].as_f64().unwrap());
        assert!(
            s["install"]["version_build"]["count"].as_u64().unwrap() > 0,
            "{s}"
        );
        assert!(
            s["growth_seconds_per_1k_files"].as_f64().unwrap() >= 0.0,
            "{s}"
        );
    }
    let checks = lines.iter().filter(|v| v["kind"] == "acceptance").count();
    // Flat installs (all and those not preempted), p99.9 (all calls and
    // those not preempted), no stall at any size, none during the full
    // compaction.
    assert_eq!(checks, 6);
    assert_eq!(
        std::fs::read_dir(dir.path().join("strata")).map_or(0, |d| d.count()),
        0
    );
}

/// Paced readers make no more loops than their pace allows (unpaced ones
/// make thousands a second), and the records say the pace.
#[test]
fn paced_readers_keep_to_their_pace() {
    let dir = tempfile::tempdir().unwrap();
    let lines = run_strata(
        dir.path(),
        &["--files", "20", "--reader-loops-per-sec", "50"],
    );
    let size = lines
        .iter()
        .find(|v| v["kind"] == "size")
        .expect("a size record");
    let seconds = size["seconds"].as_f64().unwrap();
    let loops = size["reader_loops"].as_u64().unwrap() as f64;
    // Each reader: one loop at once, then one every 1/50 s.
    assert!(
        loops > 0.0 && loops <= 2.0 * (50.0 * seconds + 1.0),
        "{size}"
    );
    assert_eq!(
        size["params"]["reader_loops_per_sec_limit"].as_u64(),
        Some(50)
    );
}

#[cfg(not(feature = "peer-rocksdb"))]
#[test]
fn naming_rocksdb_without_its_feature_is_a_clear_error() {
    bench_cli::refused(
        &["lsm-versions", "--engines", "strata,rocksdb"],
        "--features peer-rocksdb",
    );
}

/// Runs `lsm-versions` on Strata alone at tiny settings (1 s per size, 2
/// readers, 4 KiB files) with `flags` added, in `dir`; asserts it exits 0
/// and returns its JSON lines.
fn run_strata(dir: &std::path::Path, flags: &[&str]) -> Vec<Value> {
    let mut args = vec![
        "lsm-versions",
        "--engines",
        "strata",
        "--seconds",
        "1",
        "--readers",
        "2",
        "--target-file-bytes",
        "4K",
        "--write-buffer-bytes",
        "16K",
        "--block-cache",
        "1M",
        "--json",
    ];
    args.extend_from_slice(flags);
    json_lines(&args, dir)
}
