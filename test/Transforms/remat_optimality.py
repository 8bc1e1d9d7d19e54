#!/usr/bin/env python3
"""The optimality gap of step-remat's greedy search, against every subset.

    remat_optimality.py STEP.mlir... [--budgets N] [--gap G] [--worst W]

Each STEP.mlir is a training step (stepc-opt --stepc-pipeline=until=train-step).
For N budgets spread from the smallest the greedy search meets to the
unconstrained peak, runs step-remat with search=greedy and search=exhaustive
and compares the recompute cost each records in `step.remat`. Fails if the
greedy search misses a budget the optimum meets or plans over a budget, if
its total cost over all budgets exceeds (1 + G) times the optimum's, or if
at one budget it exceeds (1 + W) times the optimum. Prints one line per
budget.
"""
import argparse
import os
import re
import subprocess
import sys

p = argparse.ArgumentParser()
p.add_argument("steps", nargs="+")
p.add_argument("--budgets", type=int, default=8)
p.add_argument("--gap", type=float, default=0.05)
p.add_argument("--worst", type=float, default=0.25)
args = p.parse_args()
opt = os.path.join(os.environ.get("STEPC_BIN", ""), "stepc-opt")


def remat(step, options):
    """(recorded step.remat fields, or None if infeasible, stderr)."""
    r = subprocess.run([opt, f"-step-remat={options}", step], capture_output=True, text=True)
    m = re.search(r"step.remat = \{([^}]*)\}", r.stdout)
    if r.returncode != 0 or not m:
        return None, r.stderr
    return {k: int(v) if v.lstrip("-").isdigit() else v.strip('"') for k, v in
            re.findall(r"(\w+) = (\"?[\w-]+\"?)(?: : i64)?", m.group(1))}, r.stderr


worst, greedy_total, best_total = 0.0, 0, 0
for step in args.steps:
    none, _ = remat(step, "mode=none")
    _, err = remat(step, "budget=1")
    floor = int(re.search(r"smallest feasible budget stepc finds is (\d+)", err).group(1))
    top = none["planned_peak"]
    for i in range(args.budgets):
        budget = floor + (top - floor) * i // max(args.budgets - 1, 1)
        best, _ = remat(step, f"budget={budget} search=exhaustive")
        greedy, _ = remat(step, f"budget={budget}")
        if best is None:
            sys.exit(f"FAIL {step}: the optimum misses budget {budget} that greedy met")
        if greedy is None:
            sys.exit(f"FAIL {step}: greedy misses budget {budget}; the optimum costs {best['cost']}")
        if greedy["planned_peak"] > budget:
            sys.exit(f"FAIL {step}: greedy plans {greedy['planned_peak']} over {budget}")
        gap = (greedy["cost"] - best["cost"]) / max(best["cost"], 1)
        worst = max(worst, gap)
        greedy_total += greedy["cost"]
        best_total += best["cost"]
        print(f"{os.path.basename(step)} budget {budget}: greedy {greedy['cost']} "
              f"optimum {best['cost']} gap {gap:.1%} ({best['candidates']} candidates)")
        if gap > args.worst:
            sys.exit(f"FAIL {step}: greedy costs {gap:.1%} over the optimum at {budget}")
total = (greedy_total - best_total) / max(best_total, 1)
if total > args.gap:
    sys.exit(f"FAIL: greedy costs {total:.1%} over the optimum in total")
print(f"ok: total gap {total:.1%} (limit {args.gap:.0%}), worst {worst:.1%} (limit {args.worst:.0%})")
