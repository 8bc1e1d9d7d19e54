#!/usr/bin/env python3
"""Planned against measured peak memory over a sweep of memory budgets.

    bench/remat/peak_sweep.py [--model examples/gpt-capstone/model.mlir]
                              [--budgets none,120MB,100MB,80MB,65MB] [--steps 2]

For each budget, compiles the CPU step (stepc --memory-budget, remat auto),
runs it with stepc-run --metrics, and prints the planned peak, the measured
peak RSS minus the process's peak before the session (baseline_bytes) and
their ratio, and the executed / model FLOPs. A benchmark, not a test: the
goal (issue 11) is measured within 10% of planned.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
p = argparse.ArgumentParser()
p.add_argument("--model", default=os.path.join(root, "examples/gpt-capstone/model.mlir"))
p.add_argument("--budgets", default="none,120MB,100MB,80MB,65MB")
p.add_argument("--steps", type=int, default=2)
p.add_argument("--bin", default=os.path.join(root, "build/bin"))
args = p.parse_args()

print(f"{'budget':>10} {'planned':>13} {'measured-baseline':>18} {'ratio':>6} {'exec/model':>10}")
with tempfile.TemporaryDirectory() as tmp:
    for budget in args.budgets.split(","):
        so, report, metrics = (os.path.join(tmp, f"{budget}.{x}") for x in ("so", "json", "jsonl"))
        flags = [] if budget == "none" else [f"--memory-budget={budget}"]
        subprocess.run([os.path.join(args.bin, "stepc"), "--target=cpu", args.model, "-o", so,
                        f"--report={report}", *flags], check=True)
        subprocess.run([os.path.join(args.bin, "stepc-run"), so, "--steps", str(args.steps),
                        "--metrics", metrics], check=True, stdout=subprocess.DEVNULL)
        r = json.load(open(report))
        last = json.loads(open(metrics).read().splitlines()[-1])
        planned = last["planned_peak_bytes"]
        measured = last["measured_peak_bytes"] - last["baseline_bytes"]
        print(f"{budget:>10} {planned:>13,} {measured:>18,} {measured / planned:>6.3f} "
              f"{r['executed_over_model_flops']:>10.3f}")
        sys.stdout.flush()
