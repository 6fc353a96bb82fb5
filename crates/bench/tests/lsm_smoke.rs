//! `strata-bench lsm` end to end on a tiny key space: every workload but the
//! cold read (which drops the machine's page cache) runs on Strata, and the
//! JSON output carries one median per workload, with write and space
//! amplification for the workloads that write. A build without fjall
//! refuses to run it, before writing anything, and says how to build it.

use std::process::Command;

const WORKLOADS: &str =
    "fillseq,overwrite,readrandom,readmissing,seekrandom,readwhilewriting,deleterandom,scan";

#[test]
fn every_workload_reports_a_median_on_strata() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .args([
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
            "--write-buffer",
            "256K",
            "--target-file",
            "256K",
            "--block-cache",
            "1M",
            "--json",
        ])
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "lsm failed: {stderr}");
    let medians: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v["kind"] == "median")
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
}

#[cfg(not(feature = "peer-fjall"))]
#[test]
fn naming_fjall_without_its_feature_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .args(["lsm", "--engines", "strata,fjall", "--keys", "10"])
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--features peer-fjall"), "{stderr}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
