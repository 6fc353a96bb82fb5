#!/usr/bin/env bash
# Runs the acceptance matrix of Strata's lsm against fjall and RocksDB, every
# engine in the same invocation (interleaved, the first engine rotating per
# run), one JSON file per thread count in $OUT, then prints one markdown table
# per thread count and workload (medians and strata/<peer> ratios) with
# lsm_vs_peers_table.py. Run from the workspace root.
#
# The matrix: 16-byte keys, 1 KiB values, 2 GiB of user data, block cache
# 512 MiB, the shared settings of docs/bench/lsm-vs-peers.md, at 1 and 4
# threads, each invocation running on one database per engine and run:
#   fillrandom, overwrite, readrandom (warm), readrandom-cold (page cache
#   dropped, engine reopened), seekrandom (seek + 100 nexts), readwhilewriting
#   (THREADS readers + 1 writer).
#
# Environment (defaults in brackets):
#   B          the binary [target/release/strata-bench]; BUILD=1 builds it first
#   ENGINES    engines, comma-separated [strata,fjall,rocksdb]
#   RUNS       runs per thread count [3]
#   TOTAL      user bytes of the key space [2G]
#   THREADS    thread counts [1 4]
#   OPS        operations of overwrite, reads and seeks [one per key]
#   MAX_SECONDS  longest time one workload runs [120]
#   CACHE      block cache of every engine [512M]
#   WORKLOADS  [fillrandom,overwrite,readrandom,readrandom-cold,seekrandom,readwhilewriting]
#   DIR        data directory, on the disk to measure [./strata-data/lsm-vs-peers]
#   OUT        output directory [target/lsm-vs-peers/<date>-<time>]
#   EXTRA      more flags for every invocation (e.g. "--sync on")

set -uo pipefail

B=${B:-target/release/strata-bench}
ENGINES=${ENGINES:-strata,fjall,rocksdb}
RUNS=${RUNS:-3}
TOTAL=${TOTAL:-2G}
THREADS=${THREADS:-1 4}
OPS=${OPS:-}
MAX_SECONDS=${MAX_SECONDS:-120}
CACHE=${CACHE:-512M}
WORKLOADS=${WORKLOADS:-fillrandom,overwrite,readrandom,readrandom-cold,seekrandom,readwhilewriting}
DIR=${DIR:-./strata-data/lsm-vs-peers}
OUT=${OUT:-target/lsm-vs-peers/$(date +%Y%m%d-%H%M%S)}
EXTRA=${EXTRA:-}

here=$(cd "$(dirname "$0")" && pwd)
if [[ ${BUILD:-0} == 1 ]]; then
    cargo build --release -p strata-bench --features peers || exit 2
fi
if [[ ! -x $B ]]; then
    echo "lsm_vs_peers: no binary at $B; build it with (RocksDB needs libclang-dev)" >&2
    echo "  cargo build --release -p strata-bench --features peers" >&2
    exit 2
fi
if [[ $WORKLOADS == *cold* && ! -w /proc/sys/vm/drop_caches ]]; then
    echo "lsm_vs_peers: cannot write /proc/sys/vm/drop_caches (not root?): readrandom-cold is skipped" >&2
fi
mkdir -p "$OUT" "$DIR"
echo "lsm_vs_peers: $B, engines $ENGINES, $RUNS runs, $TOTAL, threads $THREADS, into $OUT" >&2

failed=()
for t in $THREADS; do
    name=t$t
    args=(lsm --engines "$ENGINES" --workloads "$WORKLOADS" --total-bytes "$TOTAL"
        --key-bytes 16 --value-bytes 1K --block-cache "$CACHE" --scan-length 100
        --threads "$t" --runs "$RUNS" --seconds "$MAX_SECONDS" --dir "$DIR" --json)
    if [[ -n $OPS ]]; then args+=(--ops "$OPS"); fi
    # shellcheck disable=SC2206 # EXTRA is split into flags on purpose
    args+=($EXTRA)
    echo "$B ${args[*]}" >>"$OUT/commands.txt"
    echo "== $name: $B ${args[*]}" >&2
    if ! "$B" "${args[@]}" >"$OUT/$name.json" 2> >(tee "$OUT/$name.log" >&2); then
        echo "lsm_vs_peers: $name failed (see $OUT/$name.log)" >&2
        failed+=("$name")
    fi
done

python3 "$here/lsm_vs_peers_table.py" "$OUT" | tee "$OUT/tables.md"
if ((${#failed[@]})); then
    echo "lsm_vs_peers: failed: ${failed[*]}" >&2
    exit 1
fi
