//! `strata-bench lsm-ingest` end to end on Strata with tiny sizes: it exits
//! 0, prints one record per phase and run and one median each, the writers
//! wrote in both phases, files were ingested while they did, and Strata's
//! seqno hold and the ingesting / baseline ratios are reported. Naming
//! fjall, which cannot ingest, is refused before anything is written.

mod bench_cli;

use bench_cli::{json_lines, refused};

#[test]
fn both_phases_report_writes_and_the_ingesting_one_ingestions() {
    let dir = tempfile::tempdir().unwrap();
    let records = json_lines(
        &[
            "lsm-ingest",
            "--engines",
            "strata",
            "--writers",
            "2",
            "--seconds",
            "1",
            "--preload",
            "1M",
            "--ingest-file-bytes",
            "1M",
            "--ingest-files",
            "4",
            "--write-buffer",
            "1M",
            "--block-cache",
            "4M",
            "--runs",
            "1",
            "--json",
        ],
        dir.path(),
    );
    let phases: Vec<(&str, &str)> = records
        .iter()
        .map(|r| (r["kind"].as_str().unwrap(), r["phase"].as_str().unwrap()))
        .collect();
    assert_eq!(
        phases,
        [
            ("run", "baseline"),
            ("run", "ingesting"),
            ("median", "baseline"),
            ("median", "ingesting"),
        ]
    );
    for r in &records {
        assert_eq!(r["engine"], "strata", "{r}");
        assert!(r["writes"].as_u64().unwrap() > 0, "{r}");
        assert!(r["writes_per_sec"].as_f64().unwrap() > 0.0, "{r}");
        let p50 = r["latency_us_p50"].as_u64().unwrap();
        let p9999 = r["latency_us_p9999"].as_u64().unwrap();
        assert!(p50 >= 1 && p50 <= p9999, "{r}");
        assert!(p9999 <= r["latency_us_max"].as_u64().unwrap(), "{r}");
        assert!(r["stall_ms"].is_number(), "{r}");
        let ingesting = r["phase"] == "ingesting";
        assert_eq!(r["ingestions"].is_u64(), ingesting, "{r}");
        assert_eq!(r["p99_ratio"].is_number(), ingesting, "{r}");
        if ingesting {
            let n = r["ingestions"].as_u64().unwrap();
            assert!(n > 0 && n <= 4, "{r}");
            assert_eq!(r["ingest_files_prepared"].as_u64(), Some(4), "{r}");
            assert!(r["ingest_mb_per_sec"].as_f64().unwrap() > 0.0, "{r}");
            assert!(r["ingest_latency_us_max"].as_u64().unwrap() > 0, "{r}");
            assert!(r["seqno_hold_us_max"].is_u64(), "{r}");
            assert!(r["p9999_ratio"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    // Every run cleans up after itself: the engine's directory is empty
    // and the external files' directory gone.
    let left: Vec<_> = std::fs::read_dir(dir.path().join("strata"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(!dir.path().join("strata-external").exists());
}

#[test]
fn fjall_is_refused_before_anything_is_written() {
    refused(
        &["lsm-ingest", "--engines", "strata,fjall", "--seconds", "1"],
        "fjall",
    );
}
