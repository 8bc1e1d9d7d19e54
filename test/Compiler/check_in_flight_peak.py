#!/usr/bin/env python3
"""The report's collectives_in_flight_peak, recomputed from the final IR.

    check_in_flight_peak.py FINAL.mlir REPORT.json

In the train step's body each collective is in flight from its op to the
first later op that reads its result (or the body's end). At each start,
the collectives in flight are summed by operand + result bytes; the first
start with the most bytes is the peak, and its set (in program order, as
the ABI counts them: a gather's shard, a scatter's result, an all-reduce's
tensor) must be the report's.
"""
import json
import re
import sys

text, report = open(sys.argv[1]).read().splitlines(), json.load(open(sys.argv[2]))
fail = lambda why: sys.exit(f"check_in_flight_peak: {why}")

start = next(i for i, l in enumerate(text) if "attributes {" in l and "step.train_step" in l)
ops = []  # the body's top-level ops: their lines' text joined
for line in text[start + 1:]:
    if line.startswith("  }"):
        break
    if re.match(r"    \S", line) and not line.startswith("    }"):
        ops.append(line)
    else:
        ops[-1] += "\n" + line


def numel(t):
    dims = re.match(r"tensor<((?:\d+x)*)f32>", t)
    if not dims:
        fail(f"not an f32 tensor: {t}")
    n = 1
    for d in filter(None, dims[1].split("x")):
        n *= int(d)
    return n


KINDS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")
windows = []
for i, op in enumerate(ops):
    m = re.match(r"    (%[\w.$-]+) = mesh\.(\w+) .* : (tensor<[^>]*>) -> (tensor<[^>]*>)", op)
    if not m or m[2] not in KINDS:
        continue
    name, kind, src, dst = m[1], m[2], m[3], m[4]
    use = re.compile(re.escape(name) + r"(?![\w.$-])")
    end = next((j for j in range(i + 1, len(ops)) if use.search(ops[j])), len(ops))
    count = numel(src) if kind in ("all_gather", "all_reduce") else numel(dst)
    if kind == "all_to_all":
        fail("all_to_all: this check does not count its blocks")
    axes = re.search(r"mesh_axes = \[([\d, ]*)\]", op)[1].replace(" ", "").split(",")
    call = {"kind": kind, "axes": "+".join(f"axis{a}" for a in axes), "count": count}
    windows.append((i, end, 4 * (numel(src) + numel(dst)), call))

best, peak = -1, []
for s, _, _, _ in windows:
    live = [w for w in windows if w[0] <= s < w[1]]
    size = sum(w[2] for w in live)
    if size > best:
        best, peak = size, [w[3] for w in live]
got = report["collectives_in_flight_peak"]
if got != peak:
    fail(f"the report's peak {got} is not the IR's {peak}")
print(f"in-flight peak matches the IR: {len(peak)} of {len(windows)} collectives, {best} bytes")
