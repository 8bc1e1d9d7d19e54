#!/usr/bin/env python3
"""Checks a `stepc-run --trace` file against the trace-event format and the run.

    check_trace.py TRACE --steps A:B [--kernels] [--rank R] [--collectives]

Every event has the fields its phase needs (X: name, ts, dur >= 0, pid,
tid; M: name, args.name); the host track has a "data" and a "step" span
for each traced step and none for another. With --kernels: each traced
step's kernels lie inside its host "step" span, in order, without
overlapping, and tile it (each starts where the one before ended, their
durations sum to within 5% of it, --min-cover); every
kernel names its site's op, FLOPs and bytes, and the GEMMs their
GFLOP/s, each kernel of a repeated block lies in a span of its block on the
block track, and a live-bytes counter event goes with each kernel (with
--report, its largest value is in (0, the report's live_bytes_peak]).
With --collectives: the kernels include collectives, and each collective
is an async span (b/e of one id) from its issue to the end of its wait
inside its step, with its mesh axes and bytes, each wait inside it.
Prints one line per traced step.
"""
import argparse
import json
import sys


def fail(message):
    sys.exit(f"check_trace: {message}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("--steps", required=True)
    p.add_argument("--kernels", action="store_true")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--collectives", action="store_true")
    p.add_argument("--min-cover", type=float, default=0.95,
                   help="the least share of the step's span its kernels tile (a rank of a "
                        "multi-rank run on an oversubscribed machine can be descheduled "
                        "before its first kernel)")
    p.add_argument("--report", help="the step's stepc --report: the live-bytes counter "
                                    "stays within its live_bytes_peak")
    a = p.parse_args()
    first, _, last = a.steps.partition(":")
    wanted = set(range(int(first), int(last or first) + 1))
    events = json.load(open(a.trace))["traceEvents"]
    for e in events:
        if e.get("ph") == "X":
            for key in ("name", "ts", "dur", "pid", "tid"):
                if key not in e:
                    fail(f"an X event without '{key}': {e}")
            if e["dur"] < 0:
                fail(f"negative duration: {e}")
        elif e.get("ph") == "M":
            if "name" not in e or "name" not in e.get("args", {}):
                fail(f"a metadata event without its name: {e}")
        elif e.get("ph") in ("b", "e"):
            for key in ("name", "cat", "id", "ts", "pid", "tid"):
                if key not in e:
                    fail(f"an async event without '{key}': {e}")
        elif e.get("ph") == "C":
            if "name" not in e or "ts" not in e or not isinstance(
                    e.get("args", {}).get("bytes"), int) or e["args"]["bytes"] < 0:
                fail(f"a counter event without its name, time or bytes: {e}")
        else:
            fail(f"an unexpected phase: {e}")
        if e["pid"] != a.rank:
            fail(f"an event of process {e['pid']} in rank {a.rank}'s trace")
    host = [e for e in events if e.get("cat") == "host"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    counters = [e for e in events if e.get("ph") == "C"]
    if a.kernels and len(counters) != len(kernels):
        fail(f"{len(counters)} live-bytes counter events for {len(kernels)} kernels")
    if a.report:
        peak = json.load(open(a.report))["live_bytes_peak"]
        top = max(e["args"]["bytes"] for e in counters)
        if not 0 < top <= peak:
            fail(f"the live-bytes counter peaks at {top}, the plan's live peak is {peak}")
        print(f"live arena bytes counter: peak {top} of the plan's {peak}")
    steps = {e["args"]["step"] for e in host if e["name"] == "step"}
    if steps != wanted:
        fail(f"host step spans for steps {sorted(steps)}, expected {sorted(wanted)}")
    if {e["args"]["step"] for e in host if e["name"] == "data"} != wanted:
        fail("a traced step without its data span")
    if not a.kernels:
        if kernels:
            fail("kernel events in a trace of a step.so without --profile")
        print(f"host spans for steps {sorted(steps)}, no kernels")
        return 0
    names = set()
    for step in sorted(wanted):
        span = next(e for e in host if e["name"] == "step" and e["args"]["step"] == step)
        mine = sorted((e for e in kernels if e["args"]["step"] == step), key=lambda e: e["ts"])
        if not mine:
            fail(f"no kernels in step {step}")
        end = span["ts"] + span["dur"]
        previous = span["ts"]
        for k in mine:
            # Microseconds as floats: 0.01 us of slack for the rounding.
            if k["ts"] < previous - 0.01 or k["ts"] + k["dur"] > end + 0.01:
                fail(f"step {step}: kernel {k['name']} at {k['ts']} outside its step or "
                     f"overlapping the one before")
            # Tiled: each kernel's interval starts where the one before ended.
            if k is not mine[0] and k["ts"] > previous + 0.05:
                fail(f"step {step}: a gap of {k['ts'] - previous:.2f} us before kernel "
                     f"{k['name']}")
            previous = k["ts"] + k["dur"]
            for key in ("op", "flops", "bytes", "site"):
                if key not in k["args"]:
                    fail(f"kernel {k['name']} without '{key}'")
            if "matmul" in k["name"] and "gflops_per_s" not in k["args"]:
                fail(f"GEMM {k['name']} without its GFLOP/s")
            names.add(k["name"])
        sites = [k["args"]["site"] for k in mine]
        if sites != list(range(len(mine))):
            fail(f"step {step}: sites out of execution order")
        covered = sum(k["dur"] for k in mine) / span["dur"]
        if not a.min_cover <= covered <= 1.0 + 1e-6:
            fail(f"step {step}: the kernels cover {covered:.3f} of the step's span")
        # Every kernel of a block lies in a span of that block on the block
        # track; the spans are the runs of consecutive kernels.
        spans = [e for e in events if e.get("cat") == "block" and e["args"]["step"] == step]
        for k in mine:
            block = k["args"].get("block")
            if block and not any(b["name"] == block and b["ts"] - 0.01 <= k["ts"] and
                                 k["ts"] + k["dur"] <= b["ts"] + b["dur"] + 0.01 for b in spans):
                fail(f"step {step}: kernel {k['name']} of {block} outside its block's spans")
        # A collective's kernel (no block) does not break the run around it.
        computing = [k for k in mine if not k["name"].startswith("mesh.")]
        runs = sum(1 for i, k in enumerate(computing) if k["args"].get("block") and
                   (i == 0 or computing[i - 1]["args"].get("block") != k["args"]["block"]))
        if not spans or len(spans) != runs:
            fail(f"step {step}: {len(spans)} block spans for {runs} runs of a block's kernels")
        print(f"step {step}: {len(mine)} kernels tile the step's span "
              f"(within {round(100 * (1 - a.min_cover))}%), "
              f"{len({b['name'] for b in spans})} blocks in {len(spans)} spans")
    if a.collectives:
        if not any(n.startswith("mesh.") for n in names):
            fail(f"no collective among the kernels: {sorted(names)}")
        check_collectives(events, host)
        print("collectives are in the trace")
    return 0


def check_collectives(events, host):
    """Each collective is an async span (b, then e, of one id) from its issue
    to the end of its wait, inside its step's host span, naming its kind,
    mesh axes and bytes; each wait is an X span inside its collective's."""
    begins = {e["id"]: e for e in events if e.get("ph") == "b"}
    ends = {e["id"]: e for e in events if e.get("ph") == "e"}
    if not begins or set(begins) != set(ends):
        fail(f"{len(begins)} collective spans begun, {len(ends)} ended, ids differ or none")
    spans = {e["args"]["step"]: (e["ts"], e["ts"] + e["dur"]) for e in host if e["name"] == "step"}
    for i, b in begins.items():
        e = ends[i]
        if e["name"] != b["name"] or e["ts"] < b["ts"]:
            fail(f"collective {b['name']} ends before it begins or under another name")
        start, end = spans[b["args"]["step"]]
        if b["ts"] < start - 0.01 or e["ts"] > end + 0.01:
            fail(f"collective {b['name']} outside its step")
        for key in ("mesh_axes", "bytes_per_rank"):
            if key not in b["args"]:
                fail(f"collective {b['name']} without '{key}'")
    waits = [e for e in events if e.get("cat") == "wait"]
    for w in waits:
        name = w["name"].removeprefix("wait ")
        if not any(b["name"] == name and b["ts"] - 0.01 <= w["ts"] and
                   w["ts"] + w["dur"] <= ends[i]["ts"] + 0.01 for i, b in begins.items()):
            fail(f"{w['name']} outside every {name} span")
    print(f"{len(begins)} collectives from issue to done, {len(waits)} waits inside them")


if __name__ == "__main__":
    sys.exit(main())
