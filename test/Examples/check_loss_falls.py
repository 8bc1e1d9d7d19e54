#!/usr/bin/env python3
"""Asserts that JSON lines of training steps show the loss falling.

    check_loss_falls.py FILE.jsonl --steps N --factor F

passes if there are N steps and the last loss is below the first divided
by F; prints the curve either way.
"""
import argparse
import json
import sys

p = argparse.ArgumentParser()
p.add_argument("jsonl")
p.add_argument("--steps", type=int, required=True)
p.add_argument("--factor", type=float, required=True)
a = p.parse_args()
losses = [json.loads(line)["loss"] for line in open(a.jsonl) if line.strip()]
print("losses:", " ".join(f"{x:.4f}" for x in losses))
ok = len(losses) == a.steps and losses[-1] < losses[0] / a.factor
print(f"{'ok' if ok else 'FAIL'}: {len(losses)} steps, {losses[0]:.4f} -> {losses[-1]:.4f} "
      f"(needs < {losses[0] / a.factor:.4f})")
sys.exit(0 if ok else 1)
