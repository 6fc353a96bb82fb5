//! A build without the peer engines refuses to run one, before writing
//! anything, and says how to build it: `raftlog` and `recovery` both exit
//! non-zero with the `--features peers` hint on stderr. Compiled only when the
//! peers are left out (the default and CI build).
#![cfg(not(any(feature = "peer-raft-engine", feature = "peer-rocksdb")))]

use std::process::Command;

fn refuses(args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .args(args)
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} ran without the peers");
    assert!(
        stderr.contains("--features peers"),
        "no build hint: {stderr}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "{args:?} wrote before refusing"
    );
}

#[test]
fn naming_a_peer_without_the_feature_is_a_clear_error() {
    refuses(&[
        "raftlog",
        "--engines",
        "strata,raft-engine",
        "--seconds",
        "1",
    ]);
    refuses(&["raftlog", "--engines", "rocksdb", "--seconds", "1"]);
    refuses(&[
        "recovery",
        "--engines",
        "strata,rocksdb",
        "--total-bytes",
        "1M",
    ]);
}
