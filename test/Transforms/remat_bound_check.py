#!/usr/bin/env python3
"""Checks remat_bound.py's bound against what stepc chose.

    remat_bound_check.py GRAPH.json BOUND.json REPORT.json...

Each REPORT is a stepc --report of the same step under a budget at least
the bound's (the first is --remat=block, whose planned peak must be that
budget): its recomputed FLOPs (executed minus the step's without remat)
must be at least the bound's minimum. A bound above any real choice would
be a wrong proof.
"""
import json
import sys

graph = json.load(open(sys.argv[1]))
bound = json.load(open(sys.argv[2]))
reports = [json.load(open(p)) for p in sys.argv[3:]]
base = graph["step_executed_flops"]
ratios = []
for path, r in zip(sys.argv[3:], reports):
    if r["planned_peak_bytes"] > bound["budget"]:
        sys.exit(f"FAIL {path}: plans {r['planned_peak_bytes']} over the bound's budget")
    recomputed = r["executed_flops_per_step"] - base
    if recomputed < bound["min_recompute_flops"]:
        sys.exit(f"FAIL {path}: recomputes {recomputed} FLOPs, under the 'lower bound' "
                 f"{bound['min_recompute_flops']}")
    ratios.append(r["executed_over_model_flops"])
if reports[0]["planned_peak_bytes"] != bound["budget"]:
    sys.exit(f"FAIL: block plans {reports[0]['planned_peak_bytes']}, not {bound['budget']}")
print(f"ok: block's planned peak {bound['budget']}, bound "
      f"{bound['min_executed_over_model_flops']:.4f} <= block {ratios[0]:.4f}, "
      f"auto {ratios[1]:.4f}")
