#!/usr/bin/env bash
# What Strata's blob garbage collection costs the foreground: the same
# separated workloads with GC on and with GC off (`--blob-gc off`: only
# wholly dead blob files are dropped), in alternating invocations, RUNS
# rounds, the order flipped each round. 16-byte keys, VALUE-byte values,
# TOTAL of user data, separation from MIN_BLOB:
#   fillrandom, overwrite (the writes that make the garbage GC collects),
#   readwhilewriting (reads while one writer overwrites).
# Prints, per workload, the median over the rounds of ops/s, p99 and p99.9
# with GC on and off, and the on/off ratio (the acceptance: GC adds at most
# 10% to the foreground p99). Writes each invocation's JSON lines and the
# commands into $OUT. Run from the workspace root.
#
# Environment (defaults in brackets):
#   B          the binary [target/release/strata-bench]
#   RUNS       rounds [3]
#   TOTAL      user bytes of the key space [4G]
#   VALUE      value bytes [16K]
#   MIN_BLOB   separation threshold [4K]
#   THREADS    reader threads of readwhilewriting [1]
#   OPS        operations of overwrite and readwhilewriting [one per key]
#   NICE       Strata's --compaction-nice [10]
#   DIR        data directory, on the disk to measure [./strata-data/lsm-blob-gc]
#   OUT        output directory [target/lsm-blob-gc/<date>-<time>]

set -uo pipefail

B=${B:-target/release/strata-bench}
RUNS=${RUNS:-3}
TOTAL=${TOTAL:-4G}
VALUE=${VALUE:-16K}
MIN_BLOB=${MIN_BLOB:-4K}
THREADS=${THREADS:-1}
OPS=${OPS:-}
NICE=${NICE:-10}
DIR=${DIR:-./strata-data/lsm-blob-gc}
OUT=${OUT:-target/lsm-blob-gc/$(date +%Y%m%d-%H%M%S)}

if [[ ! -x $B ]]; then
    echo "lsm_blob_gc_cost: no binary at $B; build it with" >&2
    echo "  cargo build --release -p strata-bench" >&2
    exit 2
fi
mkdir -p "$OUT" "$DIR"
common=(lsm --engines strata --workloads fillrandom,overwrite,readwhilewriting
    --total-bytes "$TOTAL" --key-bytes 16 --value-bytes "$VALUE"
    --blob-min-size "$MIN_BLOB" --threads "$THREADS" --dir "$DIR" --json
    --compaction-nice "$NICE")
if [[ -n $OPS ]]; then common+=(--ops "$OPS"); fi

failed=0
for ((round = 1; round <= RUNS; round++)); do
    if ((round % 2 == 1)); then order=(on off); else order=(off on); fi
    for gc in "${order[@]}"; do
        out="$OUT/gc-$gc-$round.json"
        echo "$B ${common[*]} --blob-gc $gc" >>"$OUT/commands.txt"
        echo "== round $round of $RUNS, GC $gc" >&2
        if ! "$B" "${common[@]}" --blob-gc "$gc" >"$out" 2>"$OUT/gc-$gc-$round.log"; then
            echo "lsm_blob_gc_cost: round $round, GC $gc failed (see $OUT/gc-$gc-$round.log)" >&2
            failed=1
        fi
    done
done

python3 - "$OUT" <<'EOF'
import json, statistics, sys
from pathlib import Path

out = Path(sys.argv[1])
figures = {}  # (gc, workload) -> {field: [values]}
for path in sorted(out.glob("gc-*.json")):
    gc = path.name.split("-")[1]
    for line in path.read_text().splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r.get("kind") == "median":
            continue
        f = figures.setdefault((gc, r["workload"]), {})
        for field in ("ops_per_sec", "latency_us_p99", "latency_us_p999", "latency_us_max",
                      "write_amplification", "space_amplification", "settle_seconds"):
            if r.get(field) is not None:
                f.setdefault(field, []).append(r[field])
print("| workload | figure | GC on | GC off | on/off |")
print("|---|---|---:|---:|---:|")
for workload in ("fillrandom", "overwrite", "readwhilewriting"):
    for field, label in (("ops_per_sec", "ops/s"), ("latency_us_p99", "p99 (us)"),
                         ("latency_us_p999", "p99.9 (us)"), ("latency_us_max", "max (us)"),
                         ("write_amplification", "write amp"),
                         ("space_amplification", "space amp"),
                         ("settle_seconds", "settle (s)")):
        on = figures.get(("on", workload), {}).get(field)
        off = figures.get(("off", workload), {}).get(field)
        if not on or not off:
            continue
        a, b = statistics.median(on), statistics.median(off)
        fmt = (lambda v: f"{v:,.0f}") if a >= 100 else (lambda v: f"{v:.2f}")
        ratio = f"{a / b:.2f}" if b else ""
        print(f"| {workload} | {label} | {fmt(a)} | {fmt(b)} | {ratio} |")
EOF
exit $failed
