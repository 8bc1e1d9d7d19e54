#!/usr/bin/env python3
"""Checks stepc reports of rematerialised steps.

    check_recomputed.py REPORT.json... [--budget BYTES]

Each report must name at least one recomputed op; with --budget, a report
that has a memory budget must have it equal to BYTES and a planned peak (the
target's, on CUDA) within it. Exits 1 on a
failure.
"""
import argparse
import json
import sys

p = argparse.ArgumentParser()
p.add_argument("reports", nargs="+")
p.add_argument("--budget", type=int, default=0)
args = p.parse_args()
for path in args.reports:
    r = json.load(open(path))
    if not r.get("recomputed_ops_by_kind"):
        sys.exit(f"FAIL {path}: nothing recomputed (remat {r.get('remat')})")
    if "memory_budget_bytes" in r:
        peak = r.get("target_planned_peak_bytes", r["planned_peak_bytes"])
        if r["memory_budget_bytes"] != args.budget or peak > args.budget:
            sys.exit(f"FAIL {path}: planned peak {peak} over the budget "
                     f"{r['memory_budget_bytes']} (expected {args.budget})")
print(f"ok: {len(args.reports)} reports recompute")
