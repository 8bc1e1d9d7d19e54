#!/usr/bin/env python3
"""Checks a stepc-run --metrics log of an MoE model: every step holds each
layer's expert loads (shares of the routed pairs: E of them summing to 1,
so no pair was dropped) and the balance loss.

    check_expert_loads.py LOG.jsonl --experts E --top-k K --layers L [--first-skew R]
"""
import argparse
import json
import sys

p = argparse.ArgumentParser()
p.add_argument("log")
p.add_argument("--experts", type=int, required=True)
p.add_argument("--top-k", type=int, required=True)
p.add_argument("--layers", type=int, required=True)
p.add_argument("--first-skew", type=float, default=0,
               help="step 1's busiest expert holds at least this many times the mean")
a = p.parse_args()
steps = [json.loads(line) for line in open(a.log)]
if not steps:
    sys.exit("FAIL: no step logged")
for s in steps:
    m = s.get("metrics", {})
    if not isinstance(m.get("moe_aux_loss"), float):
        sys.exit(f"FAIL step {s['step']}: no moe_aux_loss in {sorted(m)}")
    for layer in range(a.layers):
        load = m.get(f"h{layer}.expert_load")
        if not isinstance(load, list) or len(load) != a.experts:
            sys.exit(f"FAIL step {s['step']}: h{layer}.expert_load is {load!r}")
        if abs(sum(load) - 1) > 1e-5 or min(load) < 0:
            sys.exit(f"FAIL step {s['step']}: h{layer} loads {load} are not shares")
        if s["step"] == 1 and max(load) * a.experts < a.first_skew:
            sys.exit(f"FAIL step 1: h{layer} loads {load} are not skewed")
worst = max(max(s["metrics"][f"h{layer}.expert_load"]) * a.experts
            for s in steps for layer in range(a.layers))
print(f"ok: {len(steps)} steps, {a.layers} layers of {a.experts} experts, every pair routed; "
      f"busiest expert at most {worst:.2f}x the mean")
