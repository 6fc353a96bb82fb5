#!/usr/bin/env bash
# Runs `strata-bench lsm-versions` for the record: Strata's lsm and RocksDB in
# one invocation, each grown to 1k, 10k and 100k live SST files (32 KiB target
# files, 64 KiB memtables), and at each size 10 s of 2 readers (snapshot,
# iterator, bounded iterator, get, each timed) while a writer keeps flushes
# and compactions installing versions, and at the FULL_COMPACTION sizes a
# manual compaction of the whole key space under the same readers. Writes the text report (report.txt),
# the same figures as JSON lines (records.json) and the log into $OUT/run-<n>,
# RUNS times, rotating which engine goes first. Run from the workspace root,
# on the disk to measure. `lsm_versions_table.py $OUT` prints the medians.
#
# Both engines keep at most --max-open-files SST files open (MAX_OPEN; Strata's
# table cache and RocksDB's); the script raises the soft `ulimit -n` to the
# hard one and warns when that is below it.
#
# Environment (defaults in brackets):
#   B          the binary [target/release/strata-bench]; BUILD=1 builds it first
#   ENGINES    engines, comma-separated [strata,rocksdb]
#   RUNS       invocations, the engines' order rotated each time [3]
#   GROW_BY    how the database grows: ingest (bulk load into the bottom
#              level, minutes to 100k files) or writes (hours) [ingest]
#   FILES      sizes, ascending [1000,10000,100000]
#   SECONDS_PER_SIZE  measured seconds per size [10] (not SECONDS: bash
#              counts its own run time in that variable)
#   READERS    reader threads [2]
#   WRITER     writer keys/s during the measured phase, 0 unpaced [20000]
#   TARGET     target file size [32K]
#   MEMTABLE   memtable size [64K]
#   MAX_OPEN   SST files each engine keeps open [10000]
#   FULL_COMPACTION  sizes after whose timed phase one manual compaction of
#              the whole key space runs while the readers go on, comma-
#              separated, empty for none; sizes not in FILES are skipped
#              [10000]
#   DIR        data directory [./strata-data/lsm-versions]
#   OUT        output directory [target/lsm-versions/<date>-<time>]
#   EXTRA      more flags (e.g. "--base-level-bytes 1M")

set -uo pipefail

B=${B:-target/release/strata-bench}
ENGINES=${ENGINES:-strata,rocksdb}
RUNS=${RUNS:-3}
GROW_BY=${GROW_BY:-ingest}
FILES=${FILES:-1000,10000,100000}
SECONDS_PER_SIZE=${SECONDS_PER_SIZE:-10}
READERS=${READERS:-2}
WRITER=${WRITER:-20000}
TARGET=${TARGET:-32K}
MEMTABLE=${MEMTABLE:-64K}
MAX_OPEN=${MAX_OPEN:-10000}
FULL_COMPACTION=${FULL_COMPACTION-10000}
DIR=${DIR:-./strata-data/lsm-versions}
OUT=${OUT:-target/lsm-versions/$(date +%Y%m%d-%H%M%S)}
EXTRA=${EXTRA:-}

if [[ ${BUILD:-0} == 1 ]]; then
    cargo build --release -p strata-bench --features peer-rocksdb || exit 2
fi
if [[ ! -x $B ]]; then
    echo "lsm_versions_vs_peers: no binary at $B; build it with (RocksDB needs libclang-dev)" >&2
    echo "  cargo build --release -p strata-bench --features peer-rocksdb" >&2
    exit 2
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null
largest=${FILES##*,}
open_max=$MAX_OPEN
if ((open_max < 0)); then open_max=$largest; fi
if [[ $(ulimit -n) != unlimited && $(ulimit -n) -le $((open_max + 1000)) ]]; then
    echo "lsm_versions_vs_peers: ulimit -n is $(ulimit -n): $open_max open SST files may run out of" \
        "file descriptors; raise the hard limit or lower MAX_OPEN first" >&2
fi
mkdir -p "$OUT" "$DIR"
IFS=, read -r -a engines <<<"$ENGINES"
status=0
for ((run = 1; run <= RUNS; run++)); do
    # Rotate the order: each engine goes first in turn.
    shift_by=$(((run - 1) % ${#engines[@]}))
    order=("${engines[@]:shift_by}" "${engines[@]:0:shift_by}")
    order_csv=$(IFS=,; echo "${order[*]}")
    run_out="$OUT/run-$run"
    mkdir -p "$run_out"
    args=(lsm-versions --engines "$order_csv" --files "$FILES" --seconds "$SECONDS_PER_SIZE"
        --readers "$READERS" --writer-keys-per-sec "$WRITER" --target-file-bytes "$TARGET"
        --write-buffer-bytes "$MEMTABLE" --max-open-files "$MAX_OPEN" --grow-by "$GROW_BY"
        --dir "$DIR" --json-file "$run_out/records.json")
    # Only the FULL_COMPACTION sizes among FILES (the bench refuses others).
    full=()
    IFS=, read -r -a wanted <<<"$FULL_COMPACTION"
    for size in "${wanted[@]}"; do
        if [[ ,$FILES, == *",$size,"* ]]; then full+=("$size"); fi
    done
    if ((${#full[@]} > 0)); then args+=(--full-compaction-at "$(IFS=,; echo "${full[*]}")"); fi
    # shellcheck disable=SC2206 # EXTRA is split into flags on purpose
    args+=($EXTRA)
    echo "$B ${args[*]}" >"$run_out/command.txt"
    echo "lsm_versions_vs_peers: run $run of $RUNS: $B ${args[*]} -> $run_out" >&2
    # The tables for people on stdout (report.txt), the same figures as JSON
    # lines in records.json.
    "$B" "${args[@]}" 2> >(tee "$run_out/log.txt" >&2) | tee "$run_out/report.txt"
    rc=${PIPESTATUS[0]}
    if ((rc != 0)); then status=$rc; fi
done
exit "$status"
