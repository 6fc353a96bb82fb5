//! A build without the peer engines refuses to run one, before writing
//! anything, and says how to build it: `raftlog` and `recovery` both exit
//! non-zero with the `--features peers` hint on stderr. Compiled only when the
//! peers are left out (the default and CI build).
#![cfg(not(any(feature = "peer-raft-engine", feature = "peer-rocksdb")))]

mod bench_cli;

use bench_cli::refused;

fn refuses(args: &[&str]) {
    refused(args, "--features peers");
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
