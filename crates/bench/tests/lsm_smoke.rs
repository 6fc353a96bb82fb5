//! `strata-bench lsm` end to end on a tiny key space: every workload but the
//! cold ones (which drop the machine's page cache) runs on Strata, with
//! some values separated into blob files, and the JSON output carries one
//! median per workload, with write and space amplification for the
//! workloads that write; a range scan reads the keys before its bound. A build without fjall
//! refuses to run it, before writing anything, and says how to build it.

mod bench_cli;

use bench_cli::json_lines;

const WORKLOADS: &str = "fillseq,overwrite,readrandom,readmissing,seekrandom,seekrange,\
     readwhilewriting,deleterandom,scan";

#[test]
fn every_workload_reports_a_median_on_strata() {
    let dir = tempfile::tempdir().unwrap();
    let medians: Vec<serde_json::Value> = json_lines(
        &[
            "lsm",
            "--engines",
            "strata",
            "--workloads",
            WORKLOADS,
            "--keys",
            "2000",
            "--ops",
            "500",
            "--value-bytes",
            "100:300",
            "--blob-min-size",
            "200",
            "--scan-length",
            "50",
            "--seeks",
            "40",
            "--write-buffer",
            "256K",
            "--target-file",
            "256K",
            "--block-cache",
            "1M",
            "--json",
        ],
        dir.path(),
    )
    .into_iter()
    .filter(|v| v["kind"] == "median")
    .collect();
    let names: Vec<&str> = medians
        .iter()
        .map(|m| m["workload"].as_str().unwrap())
        .collect();
    assert_eq!(names, WORKLOADS.split(',').collect::<Vec<_>>());
    for m in &medians {
        let writes = ["fillseq", "overwrite", "readwhilewriting", "deleterandom"]
            .contains(&m["workload"].as_str().unwrap());
        assert_eq!(m["space_amplification"].is_number(), writes, "{m}");
        assert!(m["ops"].as_u64().unwrap() > 0, "{m}");
    }
    let read = medians
        .iter()
        .find(|m| m["workload"] == "readrandom")
        .unwrap();
    assert_eq!(read["hit_ratio"].as_f64(), Some(1.0));
    let missing = medians
        .iter()
        .find(|m| m["workload"] == "readmissing")
        .unwrap();
    assert_eq!(missing["hit_ratio"].as_f64(), Some(0.0));
    // Every key is there before deleterandom: a range reads the 50 keys
    // before its bound, fewer only where the key space ends first.
    let range = medians
        .iter()
        .find(|m| m["workload"] == "seekrange")
        .unwrap();
    assert_eq!(range["ops"].as_u64(), Some(40), "{range}");
    let per_seek = range["entries_per_seek"].as_f64().unwrap();
    assert!((40.0..=50.0).contains(&per_seek), "{range}");
}

#[cfg(not(feature = "peer-fjall"))]
#[test]
fn naming_fjall_without_its_feature_is_a_clear_error() {
    bench_cli::refused(
        &["lsm", "--engines", "strata,fjall", "--keys", "10"],
        "--features peer-fjall",
    );
}
