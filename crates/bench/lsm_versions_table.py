#!/usr/bin/env python3
"""Prints the results of lsm_versions_vs_peers.sh as markdown: one table per
size (live SST files) and phase (churn, or a full compaction), the median over the runs (OUT_DIR/run-*/records.json,
`strata-bench lsm-versions --json-file` lines) of each figure per engine, the
runs' spread (min-max) and a strata/<peer> column per peer. A ratio above 1
is Strata slower (every figure here is a time, but the counts).

Usage: lsm_versions_table.py OUT_DIR
"""

import json
import statistics
import sys
from pathlib import Path

OPS = [
    ("snapshot", "snapshot"),
    ("iterator create", "iter_create"),
    ("bounded iterator create", "bounded_iter_create"),
    ("iterator seek+read+drop", "iter_seek_read_drop"),
    ("get", "get"),
]
QUANTILES = [("p50", "p50_us"), ("p99", "p99_us"), ("p99.9", "p999_us"), ("max", "max_us")]
INSTALL = [
    ("install lock held", "lock_held"),
    ("install lock held, not preempted", "lock_held_unpreempted"),
    ("version build (under lock)", "version_build"),
    ("manifest append (under lock)", "persist"),
    ("manifest sync (after the lock)", "durable"),
    ("install lock wait", "lock_wait"),
]


def rows_of(record):
    """(label, value) pairs of one size record, in table order."""
    out = [
        ("live files at start", record["files_at_start"]),
        ("live files max", record["files_max"]),
        ("growth s", record["growth_seconds"]),
        ("versions installed /s", record["versions_per_sec"]),
        ("reader loops", record["reader_loops"]),
    ]
    for label, field in OPS:
        op = record[field]
        for q, key in QUANTILES:
            out.append((f"{label} {q} (us)", op[key]))
        out.append((f"{label} >= 1 ms (count)", op["over_1ms"]))
        if "over_1ms_unpreempted" in op:
            out.append((f"{label} >= 1 ms, not preempted (count)", op["over_1ms_unpreempted"]))
        if "over_1ms_unpreempted_blocked" in op:
            out.append((f"{label} >= 1 ms, not preempted, blocked (count)",
                        op["over_1ms_unpreempted_blocked"]))
        if "own_p999_us" in op:
            out.append((f"{label} not preempted p99 (us)", op["own_p99_us"]))
            out.append((f"{label} not preempted p99.9 (us)", op["own_p999_us"]))
            out.append((f"{label} not preempted max (us)", op["own_max_us"]))
    install = record.get("install")
    if install:
        for label, field in INSTALL:
            t = install.get(field)
            if t is None:  # records written before the field existed
                continue
            for q, key in [("mean", "mean_us"), ("p99.9", "p999_us"), ("max", "max_us")]:
                out.append((f"{label} {q} (us)", t[key]))
    return out


def fmt(v):
    if v is None:
        return "n/a"
    if isinstance(v, int) or float(v).is_integer() and abs(v) >= 100:
        return f"{int(v):,}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    files = sorted(out.glob("run-*/records.json"))
    if not files:
        sys.exit(f"no run-*/records.json in {out}")
    # (engine, size) -> list of {label: value}, one per run.
    runs = {}
    engines, sizes = [], []
    for path in files:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            if r.get("kind") != "size":
                continue
            e, s = r["engine"], (r["target_files"], r.get("phase", "churn"))
            if e not in engines:
                engines.append(e)
            if s not in sizes:
                sizes.append(s)
            runs.setdefault((e, s), []).append(dict(rows_of(r)))
    engines.sort(key=lambda e: (e != "strata", e))
    peers = [e for e in engines if e != "strata"]
    print(f"Medians of {len(files)} runs (min-max in brackets). "
          "Ratios strata/<peer>: above 1 is Strata slower.\n")
    for size in sorted(sizes):
        head = ["figure"] + engines + [f"strata/{p}" for p in peers]
        files, phase = size
        title = f"{files:,} files" + ("" if phase == "churn" else f", {phase}")
        print(f"### {title}\n")
        print("| " + " | ".join(head) + " |")
        print("|---" + "|---:" * (len(head) - 1) + "|")
        labels = []
        for e in engines:
            for run in runs.get((e, size), []):
                labels += [label for label in run if label not in labels]
        for label in labels:
            cells, med = [label], {}
            for e in engines:
                values = [run[label] for run in runs.get((e, size), []) if label in run]
                if not values:
                    cells.append("")
                    continue
                med[e] = statistics.median(values)
                spread = f" ({fmt(min(values))}-{fmt(max(values))})" if len(values) > 1 else ""
                cells.append(fmt(med[e]) + spread)
            for p in peers:
                a, b = med.get("strata"), med.get(p)
                cells.append(f"{a / b:.2f}" if a is not None and b else "")
            print("| " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main()
