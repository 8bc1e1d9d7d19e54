#!/usr/bin/env python3
"""Joins the per-rank traces of `stepc-run --trace FILE` under mpirun into one.

    python3 scripts/merge_traces.py FILE [-o MERGED.json]

Rank 0 writes FILE and rank r > 0 FILE.rank<r>; every event already carries
its rank as the process id, so the merged file shows one process track per
rank on one time axis (the ranks of one node share CLOCK_MONOTONIC).
Writes FILE.merged.json unless -o is given.
"""
import argparse
import glob
import json
import re
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trace", help="rank 0's trace (FILE); FILE.rank<r> are found beside it")
    p.add_argument("-o", "--output")
    a = p.parse_args()
    ranked = sorted(glob.glob(glob.escape(a.trace) + ".rank*"),
                    key=lambda f: int(re.search(r"\.rank(\d+)$", f).group(1))
                    if re.search(r"\.rank(\d+)$", f) else 0)
    ranked = [f for f in ranked if re.search(r"\.rank\d+$", f)]
    merged = {"traceEvents": [], "displayTimeUnit": "ms", "otherData": {"ranks": []}}
    for path in [a.trace] + ranked:
        try:
            with open(path) as f:
                trace = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"merge_traces: cannot read '{path}': {e}")
        merged["traceEvents"] += trace["traceEvents"]
        merged["otherData"]["ranks"].append(trace.get("otherData", {}))
    out = a.output or a.trace + ".merged.json"
    with open(out, "w") as f:
        json.dump(merged, f)
    print(f"merge_traces: {1 + len(ranked)} ranks, {len(merged['traceEvents'])} events -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
