#!/usr/bin/env python3
"""Compares the per-step losses of two stepc-run --metrics files.

    compare_losses.py A.jsonl B.jsonl [--tolerance T | --exact] [--from K]

Every step of B from step K on must be in A, and their losses agree within
T relative (or as the same printed digits with --exact). At least one step
must be compared; exits 1 on a mismatch.
"""
import argparse
import json
import sys

p = argparse.ArgumentParser()
p.add_argument("a")
p.add_argument("b")
p.add_argument("--tolerance", type=float, default=1e-6)
p.add_argument("--exact", action="store_true")
p.add_argument("--from", dest="first", type=int, default=1)
p.add_argument("--key", default="loss", help="the metric compared (loss, val_loss)")
args = p.parse_args()


def losses(path):
    with open(path) as f:
        return {r["step"]: r[args.key] for r in map(json.loads, filter(str.strip, f)) if args.key in r}


a, b = losses(args.a), losses(args.b)
steps = sorted(s for s in b if s >= args.first)
worst, worst_step = 0.0, None
for s in steps:
    if s not in a:
        sys.exit(f"FAIL: step {s} of {args.b} is not in {args.a}")
    err = (0.0 if a[s] == b[s] else float("inf")) if args.exact else abs(a[s] - b[s]) / abs(a[s])
    if err >= worst:
        worst, worst_step = err, s
ok = len(steps) > 0 and worst <= (0.0 if args.exact else args.tolerance)
print(f"{'ok' if ok else 'FAIL'}: {len(steps)} steps from {args.first}, worst step {worst_step} "
      f"{worst:.3g}")
sys.exit(0 if ok else 1)
