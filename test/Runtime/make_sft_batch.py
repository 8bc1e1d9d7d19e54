#!/usr/bin/env python3
"""Writes an SFT-style batch for gen_model.py's models: DIR/tokens.npy and
DIR/targets.npy, [batch, seq] int32, whose rows' prompts (very uneven
lengths, one row wholly prompt) hold --ignore in the targets.

    make_sft_batch.py DIR --batch 8 --seq 64 --vocab 512 [--ignore -100] [--all-ignored]
"""

import argparse
import os

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("--batch", type=int, required=True)
p.add_argument("--seq", type=int, required=True)
p.add_argument("--vocab", type=int, required=True)
p.add_argument("--ignore", type=int, default=-100)
p.add_argument("--all-ignored", action="store_true", help="every target ignored")
a = p.parse_args()
rng = np.random.default_rng(11)
tokens = rng.integers(0, a.vocab, (a.batch, a.seq)).astype(np.int32)
targets = np.concatenate([tokens[:, 1:], rng.integers(0, a.vocab, (a.batch, 1))], 1)
targets = targets.astype(np.int32)
# Prompt fractions: ranks and micro-batches count very different numbers.
fractions = [0.95, 0.1, 1.0, 0.5, 0.0, 0.8, 0.3, 0.99]
for r in range(a.batch):
    prompt = a.seq if a.all_ignored else int(fractions[r % len(fractions)] * a.seq)
    targets[r, :prompt] = a.ignore
os.makedirs(a.dir, exist_ok=True)
np.save(os.path.join(a.dir, "tokens.npy"), tokens)
np.save(os.path.join(a.dir, "targets.npy"), targets)
print(f"{int((targets != a.ignore).sum())} of {targets.size} targets counted")
