#!/usr/bin/env python3
"""bench/sample: time per sampled token, the one-row sampling step against
the forward-only step over the whole batch (how a sampler ran before).

    /usr/bin/python3 bench/sample/bench.py [--preset gpt-capstone] [--tokens 20]
        [--rounds 3]

One process, one step.so (stepc --target=cpu), its parameters drawn by the
runtime: each round times `--tokens` calls of Session.row_logits (what
stepc-run --sample calls per token: the sampling step) and as many of
Session.eval over the batch whose first row is the same context (the eval
step, the sampler's forward before step-sample-step), in turn. Prints one
JSON object: the median ms per token of each, their ratio per round and the
median ratio, and the largest difference of the two first rows' logits
(relative to their scale). A benchmark, not a test: nothing asserts a time.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import stepc  # noqa: E402  (before numpy: stepc picks OpenBLAS's kernels first)
import numpy as np  # noqa: E402
import gen_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="gpt-capstone")
    ap.add_argument("--tokens", type=int, default=20, help="tokens timed per round and path")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bindir", default=os.path.join(ROOT, "build", "bin"))
    args = ap.parse_args()
    _, text = gen_model.generate(["--preset", args.preset])
    with tempfile.TemporaryDirectory() as tmp:
        model, so = os.path.join(tmp, "model.mlir"), os.path.join(tmp, "step.so")
        open(model, "w").write(text)
        subprocess.run([os.path.join(args.bindir, "stepc"), model, "-o", so, "--target=cpu"],
                       check=True)
        session = stepc.Session(so)
        _, (batch, seq) = session._inputs["tokens"]
        zeros = np.zeros((batch, seq), np.int32)
        _, logits = session.eval(tokens=zeros, targets=zeros)
        vocab = logits.shape[-1]
        row = np.random.default_rng(0).integers(0, vocab, size=seq, dtype=np.int32)
        full = zeros.copy()
        full[0] = row

        def per_token(fn):
            fn()  # warm
            start = time.perf_counter()
            for _ in range(args.tokens):
                out = fn()
            return (time.perf_counter() - start) / args.tokens, out

        rounds = []
        for _ in range(args.rounds):
            t_eval, batch_logits = per_token(lambda: session.eval(tokens=full, targets=zeros)[1])
            t_row, row_logits = per_token(lambda: session.row_logits("tokens", row))
            rounds.append({"eval_step_ms": round(t_eval * 1e3, 3),
                           "sample_step_ms": round(t_row * 1e3, 3),
                           "speedup": round(t_eval / t_row, 2)})
        difference = float(np.abs(row_logits - batch_logits[0]).max() /
                           np.abs(batch_logits[0]).max())
    print(json.dumps({
        "model": args.preset, "batch": batch, "seq": seq, "vocab": vocab,
        "threads": os.cpu_count(), "rounds": rounds,
        "eval_step_ms_per_token": statistics.median(r["eval_step_ms"] for r in rounds),
        "sample_step_ms_per_token": statistics.median(r["sample_step_ms"] for r in rounds),
        "speedup": statistics.median(r["speedup"] for r in rounds),
        "logits_difference": difference}, indent=1))


if __name__ == "__main__":
    main()
