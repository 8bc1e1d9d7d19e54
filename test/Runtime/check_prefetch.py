#!/usr/bin/env python3
"""Checks that step-remat's re-gathers are prefetched one ahead.

    check_prefetch.py STEP.mlir --min N

In the training step, the parameter gathers step-remat added (phase
recompute) taken in the order of their first uses: each one after the first
is issued before the first use of the one before. At least N re-gathers.
Exits 1 on a failure.
"""
import argparse
import re
import sys

p = argparse.ArgumentParser()
p.add_argument("mlir")
p.add_argument("--min", type=int, default=1)
args = p.parse_args()
text = open(args.mlir).read()
body = text[text.index("step.train_step"):]
ops = [line.strip() for line in body.split("\n") if re.match(r"\s*%\S+ = ", line)]
regathers = []
for i, op in enumerate(ops):
    if "mesh.all_gather" in op and "phase<recompute>" in op:
        name = re.match(r"(%[\w.]+) = ", op).group(1)
        uses = [j for j in range(i + 1, len(ops))
                if re.search(re.escape(name) + r"\b", ops[j].split(" = ", 1)[1])]
        regathers.append((uses[0], i, name))
regathers.sort()
if len(regathers) < args.min:
    sys.exit(f"FAIL: {len(regathers)} re-gathers, expected at least {args.min}")
for (prev_use, _, prev), (_, at, name) in zip(regathers, regathers[1:]):
    if at > prev_use:
        sys.exit(f"FAIL: {name} (op {at}) is issued after the first use of {prev} (op {prev_use})")
print(f"ok: {len(regathers)} re-gathers, each issued before the previous one's first use")
