#!/usr/bin/env python3
"""Asserts that JSON lines of training steps show the loss falling.

    check_loss_falls.py FILE.jsonl --steps N --factor F

passes if there are N steps and the mean of the last K (--smooth) losses is
below the first loss divided by F; prints the curve either way.
"""
import argparse
import json
import sys

p = argparse.ArgumentParser()
p.add_argument("jsonl")
p.add_argument("--steps", type=int, required=True)
p.add_argument("--factor", type=float, required=True)
p.add_argument("--smooth", type=int, default=1,
               help="compare the first loss with the mean of the last K steps")
a = p.parse_args()
losses = [json.loads(line)["loss"] for line in open(a.jsonl) if line.strip()]
print("losses:", " ".join(f"{x:.4f}" for x in losses))
k = a.smooth
first, last = losses[0], sum(losses[-k:]) / k
ok = len(losses) == a.steps and last < first / a.factor
print(f"{'ok' if ok else 'FAIL'}: {len(losses)} steps, first {first:.4f} -> "
      f"mean of last {k} {last:.4f} (needs < {first / a.factor:.4f})")
sys.exit(0 if ok else 1)
