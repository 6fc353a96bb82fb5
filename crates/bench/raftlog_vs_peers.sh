#!/usr/bin/env bash
# Runs the whole matrix of raftlog against its peers, every engine in the same
# invocation, one JSON file per cell in $OUT, then prints one markdown table per
# workload (medians and strata/peer ratios) with raftlog_vs_peers_table.py.
# Run from the workspace root. The cells:
#   A-1 A-4 A-64  preset A (TiKV-like, 16 x 1 KiB per batch, sync) at 1/4/64 writers
#   B-4 B-64      preset B (16 KiB entries)
#   C             preset C (one writer, 256 groups per batch)
#   M-100K        A at 4 writers over 100,000 groups (many groups)
#   Z-10K         A at 4 writers over 10,000 groups, Zipf 0.99 group choice
#   X             A at 4 writers, entries 64 B to 64 KiB, log-uniform (mixed sizes)
#   U-1 U-4       A unsynced, 16 groups x 1 KiB per batch, 1 and 4 writers
#   U4K-1 U4K-4   the same with 4 groups per batch (~4 KiB batches)
#   U64K-1 U64K-4 the same with 64 groups per batch (~64 KiB batches)
#   P-100K        one purge that frees most of a $PURGE_TOTAL log over 100,000
#                 groups (every group lags: its live data must be copied)
#   P-Z10K        the same over 10,000 groups, Zipf 0.99 (a long idle tail lags)
#   P-X           the same over 1,000 groups, entries 64 B to 64 KiB
#   D-1K D-16K    recovery of $TOTAL in 1,000 groups, 1 KiB and 16 KiB entries
#   MEM           index memory per idle group (100,000 and 1,000,000 groups)
#                 and per live entry; strata and raft-engine only
#
# Environment (defaults in brackets):
#   B          the binary [target/release/strata-bench]
#   ENGINES    engines, comma-separated [strata,raft-engine,rocksdb]
#   RUNS       runs per raftlog cell, reopens per recovery mode [3]
#   SECONDS    seconds per raftlog run [30] (BENCH_SECONDS also works)
#   TOTAL      payload each recovery cell writes [4G]
#   PURGE_TOTAL payload each purge cell writes before its purge [1G]
#   MODES      recovery reopen modes [warm,cold if the page cache can be
#              dropped (root), else warm]
#   PROBE      seconds of the disk probe per engine in each raftlog cell [3]
#   SETTLE     seconds each raftlog run pauses after its wipe, so that the next
#              run does not pay for the memory it freed [0]
#   CELLS      which cells to run [all of them, in the order above]
#   MEM_GROUPS idle group counts of the MEM cell [100000,1000000]
#   MEM_FILL   live entries the MEM cell adds [1000000]
#   DIR        data directory, on the disk to measure [./strata-data/raftlog-vs-peers]
#   OUT        output directory [target/raftlog-vs-peers/<date>-<time>]

# Read SECONDS first: inside bash it is a clock that counts on from the value
# it was given, and it reads 0 when none was.
run_seconds=${BENCH_SECONDS:-$SECONDS}
if [[ $run_seconds == 0 ]]; then run_seconds=30; fi

set -uo pipefail

B=${B:-target/release/strata-bench}
ENGINES=${ENGINES:-strata,raft-engine,rocksdb}
RUNS=${RUNS:-3}
TOTAL=${TOTAL:-4G}
PURGE_TOTAL=${PURGE_TOTAL:-1G}
PROBE=${PROBE:-3}
SETTLE=${SETTLE:-0}
CELLS=${CELLS:-A-1 A-4 A-64 B-4 B-64 C M-100K Z-10K X U-1 U-4 U4K-1 U4K-4 U64K-1 U64K-4 P-100K P-Z10K P-X D-1K D-16K MEM}
MEM_GROUPS=${MEM_GROUPS:-100000,1000000}
MEM_FILL=${MEM_FILL:-1000000}
DIR=${DIR:-./strata-data/raftlog-vs-peers}
OUT=${OUT:-target/raftlog-vs-peers/$(date +%Y%m%d-%H%M%S)}
if [[ -z ${MODES:-} ]]; then
    if [[ -w /proc/sys/vm/drop_caches ]]; then
        MODES=warm,cold
    else
        MODES=warm
        echo "raftlog_vs_peers: cannot write /proc/sys/vm/drop_caches (not root?): recovery runs warm only" >&2
    fi
fi

here=$(cd "$(dirname "$0")" && pwd)
if [[ ! -x $B ]]; then
    echo "raftlog_vs_peers: no binary at $B; build it with" >&2
    echo "  cargo build --release -p strata-bench --features peers" >&2
    exit 2
fi
mkdir -p "$OUT" "$DIR"
echo "raftlog_vs_peers: $B, engines $ENGINES, $RUNS runs of $run_seconds s, recovery $TOTAL ($MODES), into $OUT" >&2

failed=()
# cell NAME ARGS...: runs one invocation, JSON to $OUT/NAME.json, stderr to
# the terminal and $OUT/NAME.log; a failure is noted and the matrix goes on.
cell() {
    local name=$1
    shift
    echo "$B $* --json" >>"$OUT/commands.txt"
    echo "== $name: $B $*" >&2
    if ! "$B" "$@" --json >"$OUT/$name.json" 2> >(tee "$OUT/$name.log" >&2); then
        echo "raftlog_vs_peers: $name failed (see $OUT/$name.log)" >&2
        failed+=("$name")
    fi
}

# raftlog NAME PRESET WRITERS [FLAGS...]: the flags override the preset.
raftlog() {
    local name=$1 preset=$2 writers=$3
    shift 3
    cell "$name" raftlog --preset "$preset" --writers "$writers" "$@" --engines "$ENGINES" \
        --runs "$RUNS" --seconds "$run_seconds" --probe-seconds "$PROBE" --settle-seconds "$SETTLE" --dir "$DIR/raftlog"
}

# purge NAME [FLAGS...]: raftlog-purge, peers that have no purge (RocksDB) left out.
purge() {
    local name=$1
    shift
    local purge_engines
    purge_engines=$(tr ',' '\n' <<<"$ENGINES" | grep -v '^rocksdb$' | paste -sd, -)
    cell "$name" raftlog-purge "$@" --engines "$purge_engines" --total-bytes "$PURGE_TOTAL" \
        --runs "$RUNS" --dir "$DIR/purge"
}
recovery() {
    cell "$1" recovery --engines "$ENGINES" --total-bytes "$TOTAL" --groups 1000 \
        --entry-bytes "$2" --modes "$MODES" --reopens "$RUNS" --dir "$DIR/recovery"
}

for c in $CELLS; do
    case $c in
        A-1) raftlog A-1 A 1 ;;
        A-4) raftlog A-4 A 4 ;;
        A-64) raftlog A-64 A 64 ;;
        B-4) raftlog B-4 B 4 ;;
        B-64) raftlog B-64 B 64 ;;
        C) raftlog C C 1 ;;
        M-100K) raftlog M-100K A 4 --groups 100000 ;;
        Z-10K) raftlog Z-10K A 4 --groups 10000 --group-skew zipf:0.99 ;;
        X) raftlog X A 4 --entry-bytes mixed ;;
        U-1) raftlog U-1 A 1 --sync false --groups-per-batch 16 --entry-bytes 1024 ;;
        U-4) raftlog U-4 A 4 --sync false --groups-per-batch 16 --entry-bytes 1024 ;;
        U4K-1) raftlog U4K-1 A 1 --sync false --groups-per-batch 4 --entry-bytes 1024 ;;
        U4K-4) raftlog U4K-4 A 4 --sync false --groups-per-batch 4 --entry-bytes 1024 ;;
        U64K-1) raftlog U64K-1 A 1 --sync false --groups-per-batch 64 --entry-bytes 1024 ;;
        U64K-4) raftlog U64K-4 A 4 --sync false --groups-per-batch 64 --entry-bytes 1024 ;;
        P-100K) purge P-100K --groups 100000 ;;
        P-Z10K) purge P-Z10K --groups 10000 --group-skew zipf:0.99 ;;
        P-X) purge P-X --groups 1000 --entry-bytes mixed ;;
        D-1K) recovery D-1K 1K ;;
        D-16K) recovery D-16K 16K ;;
        MEM)
            # Index memory means something for the log engines; RocksDB's
            # resident memory is its memtables and caches.
            mem_engines=$(tr ',' '\n' <<<"$ENGINES" | grep -v '^rocksdb$' | paste -sd, -)
            cell MEM raftlog-memory --engines "$mem_engines" --groups "$MEM_GROUPS" \
                --fill-entries "$MEM_FILL" --dir "$DIR/memory"
            ;;
        *)
            echo "raftlog_vs_peers: unknown cell $c" >&2
            failed+=("$c")
            ;;
    esac
done

python3 "$here/raftlog_vs_peers_table.py" "$OUT" | tee "$OUT/tables.md"
if ((${#failed[@]})); then
    echo "raftlog_vs_peers: failed cells: ${failed[*]}" >&2
    exit 1
fi
