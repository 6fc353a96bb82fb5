#!/usr/bin/env bash
# Runs the acceptance configuration of `strata-bench lsm-ingest`: Strata's lsm
# and RocksDB in one invocation (interleaved, the first engine rotating per
# run), each run on a fresh database:
#   preload 64 MiB into the writers' ranges; 4 writers putting random keys of
#   their own ranges (16-byte keys, 1 KiB values, WAL on, sync off) for 20 s
#   (baseline), then 20 s more while one thread ingests 64 MiB SST files, one
#   per call, each into a new key range disjoint from the writers' (move_files).
# Writes $OUT/ingest.json (one JSON object per engine, phase and run, then the
# medians), $OUT/ingest.log (stderr) and $OUT/table.txt (the text table and
# the acceptance lines: Strata's ingesting/baseline write p99 and p99.99 at
# most 1.1x). Run from the workspace root, on a quiet machine with more cores
# than writers + 2 (the ingesting thread and the background threads).
#
# Environment (defaults in brackets):
#   B          the binary [target/release/strata-bench]; BUILD=1 builds it first
#   ENGINES    engines, comma-separated [strata,rocksdb]
#   RUNS       runs [3]
#   PHASE_SECONDS  seconds of each phase [20] (not SECONDS: bash owns it)
#   WRITERS    writer threads [4]
#   PRELOAD    bytes preloaded into the writers' ranges [64M]
#   FILE       key and value bytes of each ingested file [64M]
#   MAX_BYTES  most bytes of files prepared per phase [4G]
#   SYNC       sync each put: on or off [off]
#   DIR        data directory, on the disk to measure [./strata-data/lsm-ingest]
#   OUT        output directory [target/lsm-ingest/<date>-<time>]
#   EXTRA      more flags (e.g. "--ingest-files 40")

set -uo pipefail

B=${B:-target/release/strata-bench}
ENGINES=${ENGINES:-strata,rocksdb}
RUNS=${RUNS:-3}
PHASE_SECONDS=${PHASE_SECONDS:-20}
WRITERS=${WRITERS:-4}
PRELOAD=${PRELOAD:-64M}
FILE=${FILE:-64M}
MAX_BYTES=${MAX_BYTES:-4G}
SYNC=${SYNC:-off}
DIR=${DIR:-./strata-data/lsm-ingest}
OUT=${OUT:-target/lsm-ingest/$(date +%Y%m%d-%H%M%S)}
EXTRA=${EXTRA:-}

if [[ ${BUILD:-0} == 1 ]]; then
    cargo build --release -p strata-bench --features peer-rocksdb || exit 2
fi
if [[ ! -x $B ]]; then
    echo "lsm_ingest_vs_peers: no binary at $B; build it with (RocksDB needs libclang-dev)" >&2
    echo "  cargo build --release -p strata-bench --features peer-rocksdb" >&2
    exit 2
fi
mkdir -p "$OUT" "$DIR"

args=(lsm-ingest --engines "$ENGINES" --runs "$RUNS" --seconds "$PHASE_SECONDS"
    --writers "$WRITERS" --preload "$PRELOAD" --ingest-file-bytes "$FILE"
    --ingest-bytes-max "$MAX_BYTES" --sync "$SYNC" --dir "$DIR")
# shellcheck disable=SC2206 # EXTRA is split into flags on purpose
args+=($EXTRA)
echo "$B ${args[*]} --json" >"$OUT/commands.txt"
echo "== $B ${args[*]} --json" >&2
if ! "$B" "${args[@]}" --json >"$OUT/ingest.json" 2> >(tee "$OUT/ingest.log" >&2); then
    echo "lsm_ingest_vs_peers: failed (see $OUT/ingest.log)" >&2
    exit 1
fi

# The text table from the medians of the JSON, with the acceptance lines.
python3 - "$OUT/ingest.json" <<'EOF' | tee "$OUT/table.txt"
import json, sys

records = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
medians = [r for r in records if r["kind"] == "median"]
engines = []
for r in medians:
    if r["engine"] not in engines:
        engines.append(r["engine"])
by = {(r["engine"], r["phase"]): r for r in medians}
rows = [
    ("writes/s", "writes_per_sec", True),
    ("write p50 (us)", "latency_us_p50", True),
    ("write p99 (us)", "latency_us_p99", True),
    ("write p99.9 (us)", "latency_us_p999", True),
    ("write p99.99 (us)", "latency_us_p9999", True),
    ("write max (us)", "latency_us_max", True),
    ("write stall (ms)", "stall_ms", False),
    ("ingestions", "ingestions", False),
    ("ingested MB/s", "ingest_mb_per_sec", False),
    ("ingest p50 (us)", "ingest_latency_us_p50", False),
    ("ingest p99 (us)", "ingest_latency_us_p99", False),
    ("ingest max (us)", "ingest_latency_us_max", False),
    ("seqno hold p99.99 (us)", "seqno_hold_us_p9999", False),
    ("seqno hold max (us)", "seqno_hold_us_max", False),
    ("seqno reserved p99.99 (us)", "seqno_reserved_us_p9999", False),
    ("seqno reserved max (us)", "seqno_reserved_us_max", False),
]
def cell(v):
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if isinstance(v, (int, float)) and abs(v) >= 100 else f"{v:.2f}" if isinstance(v, float) else str(v)
head = ["metric"] + [f"{e} {p}" for e in engines for p in ("baseline", "ingesting", "ing/base")]
print("| " + " | ".join(head) + " |")
print("|---" + "|---:" * (len(head) - 1) + "|")
for name, key, ratio in rows:
    cells = [name]
    for e in engines:
        b, i = by[(e, "baseline")], by[(e, "ingesting")]
        cells += [cell(b.get(key)), cell(i.get(key))]
        bv, iv = b.get(key), i.get(key)
        cells.append(f"{iv / bv:.2f}x" if ratio and bv and iv is not None else "")
    print("| " + " | ".join(cells) + " |")
print()
for e in engines:
    i = by[(e, "ingesting")]
    p99, p9999 = i.get("p99_ratio"), i.get("p9999_ratio")
    ok = p99 is not None and p9999 is not None and p99 <= 1.1 and p9999 <= 1.1
    fmt = lambda v: "n/a" if v is None else f"{v:.2f}x"
    print(f"{e}: ingesting/baseline write p99 {fmt(p99)}, p99.99 {fmt(p9999)}: "
          f"{'within' if ok else 'NOT within'} 1.1x")
EOF
