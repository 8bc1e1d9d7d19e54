#!/usr/bin/env python3
"""Checks of test/Compiler/outline-blocks.test.

    outline_blocks_check.py SHALLOW.cpp DEEP.cpp [MORE.cpp ...]
        the deep model has no more block functions than the shallow one, no
        more library or collective calls inline, and every layer's forward,
        backward and update run in one;
    outline_blocks_check.py --functions-only FEW.cpp MANY.cpp
        the same, the block functions only: a step of more micro-batches
        (which repeats the non-block code once per micro-batch) has no more
        block functions than one of fewer;
    outline_blocks_check.py --functions-only --min-reuse R STEP.cpp
        each block function is called R times or more on average;
    outline_blocks_check.py --profile P.json --report R.json --steps N
        the profile counted N steps, and its FLOPs per step add up to the
        report's executed FLOPs.
"""
import argparse
import json
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("sources", nargs="*")
ap.add_argument("--profile")
ap.add_argument("--report")
ap.add_argument("--steps", type=int)
ap.add_argument("--functions-only", action="store_true")
ap.add_argument("--min-reuse", type=float)
args = ap.parse_args()


def fail(message):
    sys.exit(f"FAIL: {message}")


if args.profile:
    profile = json.load(open(args.profile))
    report = json.load(open(args.report))
    if profile["steps"] != args.steps:
        fail(f"{profile['steps']} steps profiled, expected {args.steps}")
    flops = sum(k["flops_per_step"] for k in profile["kernels"])
    if flops != report["executed_flops_per_step"]:
        fail(f"profiled FLOPs {flops} != executed {report['executed_flops_per_step']}")
    kinds = {k["kind"] for k in profile["kernels"]}
    for kind in ("stepk.gemm NT", "step.attention", "step.attention_grad", "step.adamw"):
        if kind not in kinds:
            fail(f"no kind '{kind}' in {sorted(kinds)}")
    if any(k["seconds"] < 0 or k["calls_per_step"] < 1 for k in profile["kernels"]):
        fail("a kind with negative time or no call")
    print(f"ok: {len(kinds)} kinds, {flops} FLOPs per step")
    sys.exit(0)

counts = []
for path in args.sources:
    text = open(path).read()
    step = text[text.index('extern "C" int stepc_train_step_v12'):text.index("namespace stepc_eval")]
    functions = len(re.findall(r"^static int stepc_block\d+\(", text, re.M))
    calls = re.findall(r"^  // (block \d+): \d+ kernels", step, re.M)
    layers = {c for c in calls}
    # Each layer: its forward, its backward and its update (and the
    # clipping norm's terms) are calls, not inline code; a CUDA step
    # updates and sums the norm's terms of every layer in multi-tensor
    # kernels: its forward and backward.
    per_layer = {l: calls.count(l) for l in layers}
    runs = 2 if path.endswith(".cu") else 3
    if min(per_layer.values()) < runs:
        fail(f"{path}: a layer with fewer than {runs} outlined runs: {per_layer}")
    # Library calls and kernel launches left in the step function (CPU:
    # stepc_cpu_*; CUDA: STEPC_TRY(stepc_cuda_*, STEPC_LAUNCH).
    inline = len(re.findall(r"^  (?:STEPC_TRY\()?stepc_(?:cpu|cuda)_\w+\(|^  STEPC_LAUNCH\(",
                            step, re.M))
    # Starts and waits of collectives left in the step function.
    collectives = len(re.findall(r"collectives->\w+\(", step))
    counts.append((path, functions, len(layers), inline, collectives))
    if args.min_reuse and len(calls) < args.min_reuse * functions:
        fail(f"{path}: {len(calls)} block calls of {functions} functions: fewer than "
             f"{args.min_reuse} calls each")
    print(f"{path}: {functions} block functions, {len(layers)} layers, "
          f"{inline} library calls and {collectives} collective calls inline")
if len(counts) >= 2 and counts[1][1] > counts[0][1]:
    fail(f"{counts[1][0]} has {counts[1][1]} block functions, {counts[0][0]} {counts[0][1]}: "
         "the code grows with depth")
if args.functions_only:
    print("ok")
    sys.exit(0)
if len(counts) >= 2 and counts[0][3] != counts[1][3]:
    fail(f"inline library calls grow with depth: {counts[0][3]} -> {counts[1][3]}")
if len(counts) >= 2 and counts[0][4] != counts[1][4]:
    fail(f"inline collective calls grow with depth: {counts[0][4]} -> {counts[1][4]}")
print("ok")
