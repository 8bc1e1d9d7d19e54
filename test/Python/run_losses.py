#!/usr/bin/env python3
"""Trains a compiled step.so from Python (stepc.Session) on the batches of
Inputs/models.py and writes its losses (test/Python/export.test):

    run_losses.py STEP.so EXPORT_DIR OUT.json --model gpt [--steps N]
    run_losses.py --compare A.json B.json --tolerance T

Under mpirun every rank is a Python process: each passes the global batch
and keeps its rows; rank 0 writes the losses. --compare checks two runs'
losses agree within T (relative).
"""
import argparse
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "Inputs"))

p = argparse.ArgumentParser()
p.add_argument("paths", nargs="*")
p.add_argument("--model", default="gpt")
p.add_argument("--steps", type=int, default=5)
p.add_argument("--compare", action="store_true")
p.add_argument("--tolerance", type=float, default=1e-6)
args = p.parse_args()

if args.compare:
    a, b = (json.load(open(x)) for x in args.paths)
    worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
    if len(a) != len(b) or worst > args.tolerance:
        sys.exit(f"FAIL: losses {a} vs {b} (worst {worst:.3g})")
    print(f"ok: {len(a)} losses within {args.tolerance:g} (worst {worst:.2e})")
    sys.exit(0)

import torch  # noqa: E402
import models  # noqa: E402
import stepc  # noqa: E402

so, export_dir, out = args.paths
torch.manual_seed(0)
_, batches = models.make(args.model, args.steps)
session = stepc.Session(so, export_dir=export_dir)
names = json.load(open(os.path.join(export_dir, "export.json")))["inputs"]
losses = [session.step(1e-3 * (i + 1) / len(batches), **dict(zip(names, b)))[0]
          for i, b in enumerate(batches)]
if session.rank == 0:
    with open(out, "w") as f:
        json.dump(losses, f)
    print(f"rank 0 of {session.world_size}: {len(losses)} steps, last loss {losses[-1]:.6f}")
