#!/usr/bin/env python3
"""Checks stepc-pipeline --report's cut against every contiguous cut.

Recomputes each layer's time per micro-batch (FLOPs at GFLOPS, memory-bound
bytes at GBPS, 1/M of the step's), held bytes (2 x parameters + optimizer
state) and stash per micro-batch (saved activations / M) from the compiler's
report, enumerates every cut of the layers into the tool's stage count,
keeps those whose every stage fits the budget (stage s stashing the tool's
stashed_micro_batches), and checks that the tool's cut has the least
largest stage among them and that its per-stage figures are these.

usage: check_balance.py REPORT.json TOOL_OUTPUT.json M GFLOPS GBPS [BUDGET]
"""
import itertools
import json
import sys


def main():
    report = json.load(open(sys.argv[1]))
    out = json.load(open(sys.argv[2]))
    m, gflops, gbps = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    budget = float(sys.argv[6]) if len(sys.argv) > 6 else 0
    keys = [k for k in sorted(report["executed_flops_by_block"], key=lambda k: (
        k == "outside blocks", int(k.split()[1]) if k.startswith("block ") else 0))]
    def get(field, key):
        return report.get(field, {}).get(key, 0)
    seconds = [(get("executed_flops_by_block", k) / m) / (gflops * 1e9) +
               (get("memory_bound_bytes_by_block", k) / m) / (gbps * 1e9) for k in keys]
    held = [2 * get("param_bytes_by_block", k) + get("optimizer_state_bytes_by_block", k)
            for k in keys]
    stash = [get("saved_activation_bytes_by_block", k) / m for k in keys]
    stages = out["stages"]
    p, n = len(stages), len(keys)
    stashed = [s["stashed_micro_batches"] for s in stages]

    def stage(first, end, s):
        return (sum(seconds[first:end]),
                sum(held[first:end]) + stashed[s] * sum(stash[first:end]))

    best = None
    for cuts in itertools.combinations(range(1, n), p - 1):
        bounds = (0,) + cuts + (n,)
        figures = [stage(bounds[s], bounds[s + 1], s) for s in range(p)]
        if budget and any(b > budget for _, b in figures):
            continue
        worst = max(t for t, _ in figures)
        if best is None or worst < best[0] - 1e-12:
            best = (worst, bounds)
    if best is None:
        sys.exit("no cut fits the budget, yet the tool gave one")
    tool_bounds = tuple(s["layers"][0] for s in stages) + (n,)
    tool = [stage(tool_bounds[s], tool_bounds[s + 1], s) for s in range(p)]
    tool_worst = max(t for t, _ in tool)
    if abs(tool_worst - best[0]) > 1e-9 * best[0]:
        sys.exit(f"the tool's largest stage {tool_worst} is not the least, {best[0]} "
                 f"(cut {best[1]})")
    for s, (t, b) in enumerate(tool):
        if budget and b > budget:
            sys.exit(f"stage {s} holds {b} bytes, over the budget {budget}")
        if abs(stages[s]["seconds_per_micro_batch"] - t) > 1e-9 * t or \
           abs(stages[s]["peak_bytes"] - b) > 1e-6 * b:
            sys.exit(f"stage {s}: the tool says {stages[s]}, recomputed {t} s, {b} bytes")
    print(f"least largest stage among {len(list(itertools.combinations(range(1, n), p - 1)))} "
          f"cuts: layers {list(tool_bounds[:-1])}")


if __name__ == "__main__":
    main()
