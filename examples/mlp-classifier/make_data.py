#!/usr/bin/env python3
"""The classification task examples/mlp-classifier trains on, as batch
directories stepc-run --batch-npy / --val-batch-npy stream:

    make_data.py OUT [--train-batches 512] [--val-batches 8] [--batch 64] [--seed 0]

writes OUT/train/NNNNNN/{x,labels}.npy and OUT/val/NNNNNN/{x,labels}.npy.
Each example has 16 standard-normal features; its class (of 4) is
2·[x0 > 0] + [x1·x2 > 0], an XOR a linear model cannot learn (at best 50%),
with 5% of the labels flipped at random (so 95% is about the ceiling).
"""
import argparse
import os

import numpy as np


def batch(rng, size):
    x = rng.standard_normal((size, 16)).astype(np.float32)
    labels = 2 * (x[:, 0] > 0) + (x[:, 1] * x[:, 2] > 0)
    flip = rng.random(size) < 0.05
    labels[flip] = rng.integers(0, 4, flip.sum())
    return x, labels.astype(np.int32)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--train-batches", type=int, default=512)
    p.add_argument("--val-batches", type=int, default=8)
    p.add_argument("--batch", type=int, default=64, help="rows per batch (the model's)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    for split, count in (("train", args.train_batches), ("val", args.val_batches)):
        for i in range(count):
            d = os.path.join(args.out, split, f"{i:06d}")
            os.makedirs(d, exist_ok=True)
            x, labels = batch(rng, args.batch)
            np.save(os.path.join(d, "x.npy"), x)
            np.save(os.path.join(d, "labels.npy"), labels)
    print(f"make_data: {args.train_batches} train and {args.val_batches} val batches of "
          f"{args.batch} in {args.out}")


if __name__ == "__main__":
    main()
