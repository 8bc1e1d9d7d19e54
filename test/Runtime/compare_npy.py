#!/usr/bin/env python3
"""Compares the .npy files of two directories (as stepc-run --save-npy writes).

    compare_npy.py A B [--tolerance T | --exact] [--only PREFIX] [--matrices] [--norm]

For every A/<name>.npy, B/<name>.npy must exist with the same shape, and
max |a - b| / max |b| <= T (with --norm: ||a - b|| / ||b||, for fp8 steps
whose roundings move single elements by a quantum; or a == b bit for bit
with --exact). Prints the worst tensor; exits 1 on a mismatch.
"""
import argparse
import os
import sys

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("a")
p.add_argument("b")
p.add_argument("--tolerance", type=float, default=1e-6)
p.add_argument("--exact", action="store_true")
p.add_argument("--only", default="",
               help="compare the files whose names start with this (or with one of several, "
                    "comma-separated)")
p.add_argument("--matrices", action="store_true", help="compare the 2-D tensors only")
p.add_argument("--norm", action="store_true", help="the L2 norm of the difference, relative")
args = p.parse_args()
names = sorted(f for f in os.listdir(args.a) if f.endswith(".npy") and
               f.startswith(tuple(args.only.split(","))))
# Each prefix asked for must name some tensor (one missing is a failure,
# not hidden by the others').
for prefix in args.only.split(","):
    if not any(f.startswith(prefix) for f in names):
        sys.exit(f"FAIL: no tensor in {args.a} starts with '{prefix}'")
if args.matrices:
    names = [f for f in names if np.load(os.path.join(args.a, f), mmap_mode="r").ndim == 2]
worst, worst_name = 0.0, None
for name in names:
    a = np.load(os.path.join(args.a, name)).astype(np.float64)
    b = np.load(os.path.join(args.b, name)).astype(np.float64)
    if a.shape != b.shape:
        sys.exit(f"FAIL {name}: shapes {a.shape} and {b.shape}")
    if args.exact:
        err = 0.0 if np.array_equal(a, b) else float("inf")
    elif args.norm:
        scale = np.linalg.norm(b)
        err = float(np.linalg.norm(a - b) / scale) if scale > 0 else float(np.linalg.norm(a))
    else:
        scale = np.max(np.abs(b))
        err = float(np.max(np.abs(a - b)) / scale) if scale > 0 else float(np.max(np.abs(a)))
    if err >= worst:
        worst, worst_name = err, name
limit = 0.0 if args.exact else args.tolerance
ok = len(names) > 0 and worst <= limit
print(f"{'ok' if ok else 'FAIL'}: {len(names)} tensors, worst {worst_name} {worst:.3g} "
      f"({'bit-identical required' if args.exact else f'tolerance {limit:g}'})")
sys.exit(0 if ok else 1)
