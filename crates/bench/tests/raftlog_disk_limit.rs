//! `raftlog --json` on the real disk, small: the median record carries the
//! disk probe's limit at the engine's flush size and the engine's share of
//! it, and the probe leaves no file behind in --dir.

use std::process::Command;

#[test]
fn json_median_has_the_disk_limit_and_the_probe_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .args(["raftlog", "--engines", "strata", "--json", "--dir"])
        .arg(dir.path())
        .args(["--groups", "32", "--writers", "1", "--seconds", "1"])
        .args(["--purge-interval-ms", "300", "--probe-seconds", "0.5"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "raftlog failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let records: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let median = records
        .iter()
        .find(|r| r["kind"] == "median")
        .expect("a median record even for one run");
    let limit = median["disk_limit_mb_per_sec"].as_f64().expect("a limit");
    assert!(limit > 0.0, "{median}");
    let bpf = median["probe_bytes_per_flush"]
        .as_u64()
        .expect("a flush size");
    assert!(bpf >= 4096 && bpf % 4096 == 0, "{median}");
    assert!(
        median["device_pct_of_disk_limit"].as_f64().is_some(),
        "{median}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "strata")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
