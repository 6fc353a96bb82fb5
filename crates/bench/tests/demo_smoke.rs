//! The demo end to end on the real disk, small: 64 groups, 300 batches, 2
//! writers. Proves that the binary writes, closes, reopens and verifies every
//! live entry, exits 0 and says so, then does the same with the lsm
//! workload; and that neither half wipes a directory holding files its
//! engine did not write.

use std::process::Command;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_strata-bench"))
}

#[test]
fn demo_runs_and_verifies_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let lsm = tempfile::tempdir().unwrap();
    let out = bench()
        .args(["demo", "--dir"])
        .arg(dir.path())
        .args(["--groups", "64", "--batches", "300", "--writers", "2"])
        .arg("--lsm-dir")
        .arg(lsm.path().join("lsm"))
        .args(["--lsm-keys", "5000"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "demo failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("verified"),
        "no verification line:\n{stdout}"
    );
    // 300 batches of 16 groups x 1 entry, all written.
    assert!(
        stdout.contains("4,800"),
        "expected 4,800 entries written:\n{stdout}"
    );
    assert!(!stdout.contains("FAILURES"), "{stdout}");
    assert!(
        stdout.contains("5,000 keys OK"),
        "the lsm half must verify every key:\n{stdout}"
    );
}

#[test]
fn demo_refuses_to_wipe_a_foreign_directory() {
    let dir = tempfile::tempdir().unwrap();
    let precious = dir.path().join("precious.txt");
    std::fs::write(&precious, b"not a log file").unwrap();
    let out = bench()
        .args(["demo", "--dir"])
        .arg(dir.path())
        .args(["--groups", "4", "--batches", "10", "--writers", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "demo wiped a foreign directory");
    assert!(String::from_utf8_lossy(&out.stderr).contains("precious.txt"));
    assert!(precious.exists());
}

#[test]
fn the_lsm_demo_refuses_to_wipe_a_foreign_directory() {
    let dir = tempfile::tempdir().unwrap();
    let lsm = tempfile::tempdir().unwrap();
    let precious = lsm.path().join("precious.txt");
    std::fs::write(&precious, b"not an lsm file").unwrap();
    let out = bench()
        .args(["demo", "--dir"])
        .arg(dir.path())
        .args(["--groups", "4", "--batches", "10", "--writers", "1"])
        .arg("--lsm-dir")
        .arg(lsm.path())
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the lsm demo wiped a foreign directory"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("precious.txt"));
    assert!(precious.exists());
}
