#!/usr/bin/env python3
"""Checks what stepc-run --save-outputs wrote for the MLP with a
probabilities output: the probabilities are softmax(logits) and the loss is
the cross-entropy of the logits against the batch's labels (float64), and,
with --rows-of, that a rank's outputs are its rows of a single-rank run's.

    check_outputs.py OUT_DIR BATCH_DIR [--rows-of SINGLE_DIR --rank R --world W]
"""
import argparse
import os
import sys

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("batch")
p.add_argument("--rows-of")
p.add_argument("--rank", type=int, default=0)
p.add_argument("--world", type=int, default=1)
args = p.parse_args()
load = lambda d, n: np.load(os.path.join(d, n + ".npy")).astype(np.float64)
logits, probs, loss = load(args.out, "logits"), load(args.out, "probabilities"), load(args.out, "loss")
labels = np.load(os.path.join(args.batch, "labels.npy")).astype(np.int64)
rows = len(labels) // args.world
labels = labels[args.rank * rows:(args.rank + 1) * rows]
e = np.exp(logits - logits.max(axis=1, keepdims=True))
softmax = e / e.sum(axis=1, keepdims=True)
worst = {"probabilities vs softmax(logits)": np.abs(probs - softmax).max()}
if args.world == 1:
    ce = -np.log(softmax[np.arange(len(labels)), labels]).mean()
    worst["loss vs cross-entropy(logits)"] = abs(float(loss) - ce) / ce
if args.rows_of:
    single = load(args.rows_of, "probabilities")[args.rank * rows:(args.rank + 1) * rows]
    worst["rank rows vs one rank"] = np.abs(probs - single).max()
ok = all(v <= 1e-5 for v in worst.values())
print(("ok" if ok else "FAIL") + ": " + ", ".join(f"{k} {v:.2g}" for k, v in worst.items()))
sys.exit(0 if ok else 1)
