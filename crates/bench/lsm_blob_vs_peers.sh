#!/usr/bin/env bash
# Runs the key-value separation matrix of docs/bench/lsm-blob.md: Strata,
# RocksDB's BlobDB and fjall's blobs with separation on, in one invocation
# (interleaved, the first engine rotating per run), then Strata and RocksDB
# with every value inline, for the inline baseline. 16-byte keys, VALUE-byte
# values, TOTAL of user data, the shared settings of docs/bench/lsm-vs-peers.md:
#   fillrandom, overwrite, readrandom (warm), readrandom-cold (page cache
#   dropped, engine reopened), scan (every key in order once), scan-cold
#   (the scan after a dropped page cache and a reopen).
# Writes separated.txt and inline.txt (the text tables, medians of RUNS) and
# the commands into $OUT. Run from the workspace root.
#
# Environment (defaults in brackets):
#   B          the binary [target/release/strata-bench]; BUILD=1 builds it first
#   RUNS       runs per configuration [3]
#   TOTAL      user bytes of the key space [4G]
#   VALUE      value bytes [16K]
#   MIN_BLOB   separation threshold of every engine [4K]
#   MAX_SECONDS  longest time one workload runs [600]
#   DIR        data directory, on the disk to measure [./strata-data/lsm-blob]
#   OUT        output directory [target/lsm-blob/<date>-<time>]

set -uo pipefail

B=${B:-target/release/strata-bench}
RUNS=${RUNS:-3}
TOTAL=${TOTAL:-4G}
VALUE=${VALUE:-16K}
MIN_BLOB=${MIN_BLOB:-4K}
MAX_SECONDS=${MAX_SECONDS:-600}
DIR=${DIR:-./strata-data/lsm-blob}
OUT=${OUT:-target/lsm-blob/$(date +%Y%m%d-%H%M%S)}

if [[ ${BUILD:-0} == 1 ]]; then
    cargo build --release -p strata-bench --features peers || exit 2
fi
if [[ ! -x $B ]]; then
    echo "lsm_blob_vs_peers: no binary at $B; build it with (RocksDB needs libclang-dev)" >&2
    echo "  cargo build --release -p strata-bench --features peers" >&2
    exit 2
fi
mkdir -p "$OUT" "$DIR"
common=(lsm --workloads fillrandom,overwrite,readrandom,readrandom-cold,scan,scan-cold
    --total-bytes "$TOTAL" --key-bytes 16 --value-bytes "$VALUE" --runs "$RUNS"
    --seconds "$MAX_SECONDS" --dir "$DIR")

failed=0
run() {
    local name=$1
    shift
    echo "$B $*" >>"$OUT/commands.txt"
    echo "== $name: $B $*" >&2
    if ! "$B" "$@" >"$OUT/$name.txt" 2> >(tee "$OUT/$name.log" >&2); then
        echo "lsm_blob_vs_peers: $name failed (see $OUT/$name.log)" >&2
        failed=1
    fi
}
run separated "${common[@]}" --engines strata,rocksdb,fjall --blob-min-size "$MIN_BLOB"
run inline "${common[@]}" --engines strata,rocksdb
cat "$OUT/separated.txt" "$OUT/inline.txt"
exit $failed
