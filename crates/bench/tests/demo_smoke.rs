//! The demo end to end on the real disk, small: 64 groups, 300 batches, 2
//! writers. Proves that the binary writes, closes, reopens and verifies every
//! live entry, exits 0 and says so; and that it refuses to wipe a directory
//! holding files the engine did not write.

use std::process::Command;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_strata-bench"))
}

#[test]
fn demo_runs_and_verifies_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let out = bench()
        .args(["demo", "--dir"])
        .arg(dir.path())
        .args(["--groups", "64", "--batches", "300", "--writers", "2"])
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
