#!/usr/bin/env python3
"""Prints the results of raftlog against its peers as markdown: one table per
workload from the JSON files raftlog_vs_peers.sh writes (one per cell: raftlog
median records, recovery records, index memory records), medians per engine
and a strata/<peer> column per peer.

Usage: raftlog_vs_peers_table.py OUT_DIR
"""

import json
import sys
from pathlib import Path

ORDER = [
    "A-1", "A-4", "A-64", "B-4", "B-64", "C",
    "M-100K", "Z-10K", "X", "U-1", "U-4",
    "P-100K", "P-Z10K", "P-X",
    "D-1K", "D-16K", "MEM",
]

# (label, field, format, ratio?) for raftlog cells. A ratio above 1 is Strata
# higher: better for rates and shares, worse for latency, amplification, memory.
RAFTLOG_ROWS = [
    ("writes/s", "writes_per_sec", "rate", True),
    ("payload MB/s", "payload_mb_per_sec", "rate", True),
    ("latency p50 (us)", "latency_us_p50", "int", True),
    ("latency p99 (us)", "latency_us_p99", "int", True),
    ("latency p99.9 (us)", "latency_us_p999", "int", True),
    ("latency p99.99 (us)", "latency_us_p9999", "int", True),
    ("device MB/s", "device_mb_per_sec", "rate", True),
    ("device write amp", "device_write_amplification", "f2", True),
    ("engine write amp", "engine_write_amplification", "f2", True),
    ("fsyncs per write", "fsyncs_per_write", "f2", False),
    ("peak RSS (MiB)", "peak_rss_bytes", "mib", True),
    ("CPU seconds", "cpu_seconds", "f2", True),
    ("purge time p50 (ms)", "purge_ms_p50", "f2", True),
    ("purge time max (ms)", "purge_ms_max", "f2", True),
    ("groups force-compacted", "groups_force_compacted", "int", False),
    ("disk probe bytes per flush", "probe_bytes_per_flush", "kib", False),
    ("disk limit MB/s at this flush size", "disk_limit_mb_per_sec", "rate", False),
    ("device MB/s / disk limit", "device_pct_of_disk_limit", "pct", True),
    ("payload MB/s / disk limit", "payload_pct_of_disk_limit", "pct", True),
]

PURGE_ROWS = [
    ("purge time (ms)", "purge_seconds", "ms", True),
    ("purge CPU (s)", "purge_cpu_seconds", "f2", True),
    ("bytes copied (MiB)", "bytes_rewritten", "mib", False),
    ("files freed", "files_purged", "int", False),
    ("groups named for compaction", "groups_to_compact", "int", False),
    ("files before / after", "files", "str", False),
    ("second purge (ms)", "second_purge_seconds", "ms", True),
]

RECOVERY_ROWS = [
    ("entries (all live)", "entries", "int", False),
    ("open time (s, median)", "open_seconds", "f3", True),
    ("payload GB/s", "payload_gb_per_sec", "f2", True),
    ("entries/s", "entries_per_sec", "rate", True),
    ("RSS kept by open per live entry (B)", "rss_growth_bytes_per_entry", "f1", True),
    ("index memory per live entry (B, engine's count)", "index_memory_bytes_per_entry", "f1", False),
    ("peak RSS over reopens (MiB)", "peak_rss_bytes", "mib", True),
    ("write time (s)", "write_seconds", "f2", False),
]


MEMORY_ROWS = [
    ("per idle group (B), live", "bytes_per_group_live", "f1", True),
    ("per idle group (B), after reopen", "bytes_per_group_reopened", "f1", True),
    ("per idle group (B), engine's count", "engine_bytes_per_group", "f1", False),
    ("per live entry (B), live", "bytes_per_entry_live", "f1", True),
    ("per live entry (B), after reopen", "bytes_per_entry_reopened", "f1", True),
    ("per live entry (B), engine's count", "engine_bytes_per_entry", "f1", False),
    ("open time, idle groups (s)", "open_seconds_idle", "f3", True),
    ("open time, filled (s)", "open_seconds_filled", "f3", True),
]


def fmt(v, kind):
    if v is None:
        return "n/a"
    if kind == "str":
        return str(v)
    if kind == "ms":
        return f"{v * 1000:,.2f}"
    if kind == "rate":
        return f"{v:,.0f}" if v >= 100 else (f"{v:.1f}" if v >= 10 else f"{v:.2f}")
    if kind == "int":
        return f"{round(v):,}"
    if kind == "mib":
        return f"{v / 2**20:.1f}"
    if kind == "kib":
        return f"{v / 1024:.0f} KiB"
    if kind == "pct":
        return f"{v:.1f}%"
    return f"{v:.{int(kind[1])}f}"


def table(title, note, records, rows):
    """records: list of (engine, record); prints one markdown table."""
    engines = [e for e, _ in records]
    strata = dict(records).get("strata")
    peers = [e for e in engines if e != "strata"] if strata else []
    print(f"### {title}\n")
    if note:
        print(f"{note}\n")
    head = ["metric"] + engines + [f"strata/{p}" for p in peers]
    print("| " + " | ".join(head) + " |")
    print("|---" + "|---:" * (len(head) - 1) + "|")
    by = dict(records)
    for label, field, kind, ratio in rows:
        cells = [fmt(by[e].get(field), kind) for e in engines]
        for p in peers:
            a, b = strata.get(field), by[p].get(field)
            cells.append(f"{a / b:.2f}x" if ratio and a is not None and b else "")
        print("| " + " | ".join([label] + cells) + " |")
    print()


def load(path):
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def raftlog_cell(name, recs):
    medians = [r for r in recs if r.get("kind") == "median"]
    if not medians:
        print(f"### {name}\n\nno median records (did the cell fail? see {name}.log)\n")
        return
    w = medians[0]["workload"]
    runs = medians[0]["runs"]
    sizes = w.get("entry_bytes", f"{w['entry_bytes_min']} B")
    skew = w.get("group_skew", "round-robin")
    title = (
        f"{name}: preset {w['preset']}, {w['writers']} writers, {w['groups']} groups"
        f"{'' if skew == 'round-robin' else f' ({skew})'}, "
        f"{w['groups_per_batch']} groups/batch, {sizes} entries, "
        f"{'sync' if w['sync'] else 'no sync'}, "
        f"{w['stop']} per run, median of {runs} run{'s' if runs > 1 else ''}"
    )
    table(title, None, [(r["engine"], r) for r in medians], RAFTLOG_ROWS)


def purge_cell(name, recs):
    medians = [r for r in recs if r.get("kind") == "purge_median"]
    if not medians:
        print(f"### {name}\n\nno purge records (did the cell fail? see {name}.log)\n")
        return
    m = medians[0]
    for r in medians:
        r["files"] = f"{r.get('files_before')} / {r.get('files_after')}"
    title = (
        f"{name}: one purge at half of {m['payload_bytes'] / 2**30:.2f} GiB written over "
        f"{m['groups']:,} groups ({m['group_skew']}), {m['entry_bytes']} entries, "
        f"each group compacted to its last {m['keep']}, median of {m['runs']} runs"
    )
    table(title, None, [(r["engine"], r) for r in medians], PURGE_ROWS)


def recovery_cell(name, recs):
    recs = [r for r in recs if r.get("kind") == "recovery"]
    if not recs:
        print(f"### {name}\n\nno recovery records (did the cell fail? see {name}.log)\n")
        return
    modes = []
    for r in recs:
        if r["mode"] not in modes:
            modes.append(r["mode"])
    for mode in modes:
        rs = [r for r in recs if r["mode"] == mode]
        r0 = rs[0]
        title = (
            f"{name} {mode}: {r0['payload_bytes'] / 2**30:.2f} GiB of {r0['entry_bytes']} B "
            f"entries in {r0['groups']} groups, median of {r0['reopens']} reopens"
        )
        table(title, None, [(r["engine"], r) for r in rs], RECOVERY_ROWS)


def memory_cell(name, recs):
    recs = [r for r in recs if r.get("kind") == "memory"]
    if not recs:
        print(f"### {name}\n\nno memory records (did the cell fail? see {name}.log)\n")
        return
    counts = []
    for r in recs:
        if r["groups"] not in counts:
            counts.append(r["groups"])
    for groups in counts:
        rs = [r for r in recs if r["groups"] == groups]
        r0 = rs[0]
        title = (
            f"{name}: index memory, {groups:,} idle groups (one {r0['entry_bytes']} B entry "
            f"and a state each), then {r0['fill_entries']:,} live entries in the first "
            f"{r0['fill_groups']:,} groups"
        )
        table(title, None, [(r["engine"], r) for r in rs], MEMORY_ROWS)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    files = {p.stem: p for p in out.glob("*.json")}
    names = [n for n in ORDER if n in files] + sorted(n for n in files if n not in ORDER)
    if not names:
        sys.exit(f"no *.json in {out}")
    print(
        "Ratios: strata/<peer>, above 1 is Strata higher (better for rates and "
        "shares of the disk limit, worse for latency, amplification, memory and open time).\n"
    )
    for name in names:
        recs = load(files[name])
        if any(r.get("kind") == "memory" for r in recs) or name == "MEM":
            memory_cell(name, recs)
        elif any(r.get("kind") == "purge_median" for r in recs) or name.startswith("P-"):
            purge_cell(name, recs)
        elif any(r.get("kind") == "recovery" for r in recs) or name.startswith("D"):
            recovery_cell(name, recs)
        else:
            raftlog_cell(name, recs)


if __name__ == "__main__":
    main()
