#!/usr/bin/env python3
"""Prints the results of Strata's lsm against its peers as markdown: one table
per threads x workload from the JSON files lsm_vs_peers.sh writes (one per
thread count, `strata-bench lsm --json` output), the median of the runs per
engine and a strata/<peer> column per peer. The table layout and number
formats are the raftlog formatter's, imported from beside this file.

Usage: lsm_vs_peers_table.py OUT_DIR
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from raftlog_vs_peers_table import fmt, load, table  # noqa: E402,F401

# (label, field, format, ratio?). A ratio above 1 is Strata higher: better for
# rates, worse for latency, amplification, stalls, memory and CPU.
ROWS = [
    ("ops/s", "ops_per_sec", "rate", True),
    ("MB/s (user bytes)", "mb_per_sec", "rate", True),
    ("latency p50 (us)", "latency_us_p50", "int", True),
    ("latency p99 (us)", "latency_us_p99", "int", True),
    ("latency p99.9 (us)", "latency_us_p999", "int", True),
    ("hit ratio", "hit_ratio", "f3", False),
    ("entries per seek", "entries_per_seek", "f1", False),
    ("writer keys/s", "background_writes_per_sec", "rate", True),
    ("write amplification", "write_amplification", "f2", True),
    ("space amplification", "space_amplification", "f2", True),
    ("bytes on disk (MiB)", "disk_bytes", "mib", False),
    ("settle time (s)", "settle_seconds", "f1", False),
    ("write stall (ms)", "write_stall_ms", "f1", True),
    ("peak RSS (MiB)", "peak_rss_bytes", "mib", True),
    ("CPU seconds", "cpu_seconds", "f2", True),
]

ORDER = [
    "fillseq", "fillrandom", "overwrite", "readrandom", "readmissing",
    "readrandom-cold", "seekrandom", "readwhilewriting", "deleterandom", "scan",
]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    files = sorted(out.glob("*.json"))
    if not files:
        sys.exit(f"no *.json in {out}")
    print(
        "Medians of the runs. Ratios: strata/<peer>, above 1 is Strata higher "
        "(better for rates, worse for latency, amplification, stalls, memory and CPU).\n"
    )
    for path in files:
        medians = [r for r in load(path) if r.get("kind") == "median"]
        for r in medians:
            r["write_stall_ms"] = r.get("stall_ms")
        workloads = sorted({r["workload"] for r in medians},
                           key=lambda w: ORDER.index(w) if w in ORDER else len(ORDER))
        for w in workloads:
            recs = [(r["engine"], r) for r in medians if r["workload"] == w]
            p = recs[0][1]["params"]
            rows = [row for row in ROWS if any(r.get(row[1]) is not None for _, r in recs)]
            note = (f"{p['keys']:,} keys of {p['key_bytes']} B, values {p['value_bytes']}, "
                    f"{p['threads']} thread(s), sync {'on' if p['sync'] else 'off'}, "
                    f"WAL {'on' if p['wal'] else 'off'}, {recs[0][1]['runs']} run(s)")
            table(f"{path.stem}: {w}", note, recs, rows)


if __name__ == "__main__":
    main()
