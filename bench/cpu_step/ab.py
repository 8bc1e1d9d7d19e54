#!/usr/bin/env python3
"""bench/cpu_step/ab.py: one model's CPU step under two builds of stepc.

    /usr/bin/python3 bench/cpu_step/ab.py BEFORE_BIN AFTER_BIN [--preset gpt-capstone]
        [--precision fp32] [--steps 15] [--rounds 4]

Compiles the model with each build's stepc (--target=cpu) and trains it with
that build's stepc-run, alternating the order every round so drift in the
machine hits both. Prints one JSON object: the median step time of each and
their ratio (after / before). For "the change is not slower" claims: a
benchmark, not a test.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def step_ms(bindir, model, precision, steps, tmp, tag):
    so, metrics = os.path.join(tmp, tag + ".so"), os.path.join(tmp, tag + ".jsonl")
    if not os.path.exists(so):
        subprocess.run([os.path.join(bindir, "stepc"), model, "-o", so, "--target=cpu",
                        f"--precision={precision}"], check=True)
    subprocess.run([os.path.join(bindir, "stepc-run"), so, f"--steps={steps}",
                    f"--metrics={metrics}", f"--log-every={steps}"], check=True,
                   capture_output=True)
    rows = [json.loads(line) for line in open(metrics)]
    # ms per 1000 tokens (proportional to the step time); 2 warm-up steps.
    return [1e6 / r["tokens_per_s"] for r in rows[2:]]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--preset", default="gpt-capstone")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--rounds", type=int, default=4)
    a = p.parse_args()
    model = os.path.join(ROOT, "examples", a.preset, "model.mlir")
    times = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            for tag in order:
                times[tag] += step_ms(getattr(a, tag), model, a.precision, a.steps, tmp, tag)
    before, after = statistics.median(times["before"]), statistics.median(times["after"])
    print(json.dumps({"preset": a.preset, "precision": a.precision, "samples": len(times["before"]),
                      "before_ms_per_1k_tokens": round(before, 3),
                      "after_ms_per_1k_tokens": round(after, 3),
                      "after_over_before": round(after / before, 4)}))


if __name__ == "__main__":
    sys.exit(main())
