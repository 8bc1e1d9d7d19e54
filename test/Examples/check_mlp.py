#!/usr/bin/env python3
"""The MLP classifier's loss from its saved parameters and one batch, in
float64 with NumPy (exact-erf GELU, mean cross-entropy), against the loss the
compiled step reported (stepc-run --save-npy after one step at --lr 0, which
leaves the parameters as they were).

    check_mlp.py SAVED_DIR BATCH_DIR [--tolerance 1e-5]
"""
import argparse
import math
import os
import sys

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("saved")
p.add_argument("batch")
p.add_argument("--tolerance", type=float, default=1e-5)
args = p.parse_args()
load = lambda d, n: np.load(os.path.join(d, n + ".npy")).astype(np.float64)
w1, b1 = load(args.saved, "param.fc1.weight"), load(args.saved, "param.fc1.bias")
w2, b2 = load(args.saved, "param.fc2.weight"), load(args.saved, "param.fc2.bias")
x = load(args.batch, "x")
labels = np.load(os.path.join(args.batch, "labels.npy")).astype(np.int64)
h = x @ w1.T + b1
erf = np.vectorize(math.erf)
h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
logits = h @ w2.T + b2
top = logits.max(axis=1, keepdims=True)
logp = logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
want = -logp[np.arange(len(labels)), labels].mean()
got = float(np.load(os.path.join(args.saved, "loss.npy")))
err = abs(got - want) / abs(want)
ok = err <= args.tolerance
print(f"{'ok' if ok else 'FAIL'}: loss {got:.7f}, NumPy float64 {want:.7f}, relative {err:.2g}")
sys.exit(0 if ok else 1)
