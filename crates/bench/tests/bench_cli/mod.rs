//! What the bench's end-to-end tests share: running `strata-bench` in a
//! directory of the test's own, and reading what it printed.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// Runs `strata-bench args --dir dir`.
fn run(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .expect("run strata-bench")
}

/// Runs `strata-bench args --dir dir`, asserts it exits 0 and returns the
/// JSON lines it printed (the bench's `--json` output).
pub fn json_lines(args: &[&str], dir: &Path) -> Vec<Value> {
    let out = run(args, dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} failed: {stderr}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Runs `strata-bench args` in a fresh directory and asserts it is refused:
/// a non-zero exit, before anything was written, with `hint` on stderr.
pub fn refused(args: &[&str], hint: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = run(args, dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} ran");
    assert!(stderr.contains(hint), "{args:?}: no {hint:?} in {stderr}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "{args:?} wrote before refusing"
    );
}
