"""One row's logits (Session.row_logits: the sampling step) against the eval
step's logits of the batch holding that row, for every row of this rank's
batch: equal within `--tolerance` of the logits' scale.

    check_row_logits.py STEP_SO [--seed N] [--tolerance T]

Under mpirun each rank checks its own rows (every rank calls row_logits the
same number of times: it is collective under sharding)."""

import argparse

import stepc  # before numpy: stepc picks OpenBLAS's kernels first

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("so")
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--tolerance", type=float, default=1e-5)
args = ap.parse_args()

session = stepc.Session(args.so, seed=args.seed)
_, (batch, seq) = session._inputs["tokens"]
rng = np.random.default_rng(args.seed + 1)
# Ids the model's vocabulary holds: its logits' last dimension.
_, logits = session.eval(tokens=np.zeros((batch, seq), np.int32),
                         targets=np.zeros((batch, seq), np.int32))
vocab = logits.shape[-1]
tokens = rng.integers(0, vocab, size=(batch, seq), dtype=np.int32)
targets = rng.integers(0, vocab, size=(batch, seq), dtype=np.int32)
_, logits = session.eval(tokens=tokens, targets=targets)
worst = 0.0
for b in range(batch):
    row = session.row_logits("tokens", tokens[b])
    assert row.shape == logits.shape[1:], (row.shape, logits.shape)
    worst = max(worst, float(np.abs(row - logits[b]).max() / np.abs(logits[b]).max()))
assert worst <= args.tolerance, f"rank {session.rank}: row logits differ by {worst:.3g}"
print(f"rank {session.rank}: {batch} rows of [{seq}, {vocab}] logits agree "
      f"(largest difference {worst:.1e} of their scale)")
