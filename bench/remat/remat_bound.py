#!/usr/bin/env python3
"""A lower bound on the FLOPs any rematerialisation of a training step must
recompute to fit a memory budget, by an exact MILP (scipy's HiGHS).

The graph comes from `stepc-opt --step-remat="mode=none graph-json=G"`: the
step's forward ops (executed FLOPs, result bytes, the forward values they
read) and the candidates (forward values a backward op reads). In stepc's
step every backward op follows the cross-entropy gradient, which reads the
logits, so at that cut every candidate a later backward op reads is either
still in memory or computed again after it, and what is computed again
reads values in memory at the cut or computed again too. Hence, for any
recomputation schedule (any number of copies, anywhere after the cut):

    K_v + R_def(v) >= 1            for every candidate v
    R_o <= K_w + R_def(w)          for every forward value w op o reads
    arguments + sum_v bytes_v K_v <= budget

(K_v: v is live at the cut; R_o: op o runs again after it), and the FLOPs
recomputed are at least sum_o flops_o R_o. Its minimum bounds every choice
from below (`auto`, `block`, or any solver); only the peak at the cut is
constrained, so it is a relaxation (Checkmate's ILP constrains every step).

    remat_bound.py G.json --budget BYTES [--model-flops F] [--json OUT]
"""
import argparse
import json
import sys

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import lil_matrix


def solve(graph, budget):
    """Returns (minimum recomputed FLOPs, recomputed op indices) or None if
    no choice fits: even with nothing kept the arguments exceed the budget."""
    ops = graph["ops"]
    defining = {}
    values = {}
    for i, op in enumerate(ops):
        for r in op["results"]:
            defining[r["value"]] = i
            values[r["value"]] = r["bytes"]
    value_ids = sorted(values)
    column = {v: len(ops) + k for k, v in enumerate(value_ids)}  # K_v
    n = len(ops) + len(value_ids)
    rows = []  # (coefficients, lower, upper)
    for v in graph["candidates"]:
        rows.append(({column[v]: 1, defining[v]: 1}, 1, np.inf))
    for i, op in enumerate(ops):
        for w in set(op["operands"]):
            coefficients = {i: 1, column[w]: -1}
            coefficients[defining[w]] = coefficients.get(defining[w], 0) - 1
            rows.append((coefficients, -np.inf, 0))
    room = budget - graph["arguments_bytes"] - graph.get("extra_bytes", 0)
    if room < 0:
        return None
    rows.append(({column[v]: values[v] for v in value_ids}, -np.inf, room))
    a = lil_matrix((len(rows), n))
    lower, upper = np.empty(len(rows)), np.empty(len(rows))
    for r, (coefficients, lo, hi) in enumerate(rows):
        for c, x in coefficients.items():
            a[r, c] = x
        lower[r], upper[r] = lo, hi
    cost = np.zeros(n)
    for i, op in enumerate(ops):
        cost[i] = op["flops"]
    result = milp(cost, constraints=LinearConstraint(a.tocsr(), lower, upper),
                  integrality=np.ones(n), bounds=Bounds(0, 1),
                  options={"mip_rel_gap": 0})
    if result.status != 0:
        return None
    recomputed = [i for i in range(len(ops)) if result.x[i] > 0.5]
    return sum(ops[i]["flops"] for i in recomputed), recomputed


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graph")
    p.add_argument("--budget", type=int, required=True)
    p.add_argument("--model-flops", type=int,
                   help="the report's model_flops_per_step: print executed/model")
    p.add_argument("--json", help="write the bound here")
    args = p.parse_args()
    graph = json.load(open(args.graph))
    solved = solve(graph, args.budget)
    if solved is None:
        print(f"budget {args.budget}: infeasible for any recomputation "
              f"(arguments alone {graph['arguments_bytes']} bytes)")
        out = {"budget": args.budget, "feasible": False}
    else:
        flops, recomputed = solved
        kinds = {}
        for i in recomputed:
            if graph["ops"][i]["flops"]:
                kinds[graph["ops"][i]["name"]] = kinds.get(graph["ops"][i]["name"], 0) + 1
        out = {"budget": args.budget, "feasible": True, "min_recompute_flops": flops,
               "recomputed_products": kinds}
        line = f"budget {args.budget}: any recomputation executes >= {flops} FLOPs again"
        if args.model_flops:
            ratio = (graph["step_executed_flops"] + flops) / args.model_flops
            out["min_executed_over_model_flops"] = ratio
            line += f"; executed / model >= {ratio:.4f}"
        print(line, kinds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
