#!/usr/bin/env python3
"""fp8 tile scaling against one scale per matrix, on the same weights.

    bench/fp8/scaling.py [--dims 64,256] [--train-steps 200] [--outliers 1,1e4]
                         [--out FILE.json]

A loss curve mixes the rounding error with how two trajectories drift
apart; this measures the rounding itself. For each width: a gpt-small-shaped
model (2 layers) trained --train-steps steps in bf16 on the CPU; from
those weights, one step in bf16, in fp8 with tiles ([1, 128] activations
and gradients, [128, 128] weights) and in fp8 with one scale per matrix,
on the same batch. AdamW's first moment after one step is (1 - beta1)
times the (clipped) gradient, so each run's exp_avg is its gradient up to
one common factor: the table is each fp8 run's gradient error relative to
bf16's (L2 over every parameter, and the worst linear-layer weight).

With power-of-two scales a value's relative rounding error does not depend
on the scale unless the value falls below the format's normal range, so
the two scalings differ only where one scale must cover magnitudes far
apart. --outliers F multiplies channel 0 of every block's first norm
weight by F (an outlier feature, as large language models grow): a
[1, 128] tile holds it in one 128-channel group of each token, one scale
per matrix spreads it over every value.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sh(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def moments(d):
    return {os.path.basename(f)[len("exp_avg."):-4]: np.load(f).astype(np.float64)
            for f in glob.glob(os.path.join(d, "exp_avg.*.npy"))}


def main():
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("--dims", default="64,256")
    a.add_argument("--train-steps", type=int, default=200)
    a.add_argument("--outliers", default="1,1e4")
    a.add_argument("--build", default=os.path.join(ROOT, "build"))
    a.add_argument("--out", default=None, help="write the rows as JSON here")
    args = a.parse_args()
    stepc = os.path.join(args.build, "bin", "stepc")
    run = os.path.join(args.build, "bin", "stepc-run")
    tmp = tempfile.mkdtemp(prefix="fp8-scaling-")
    rows = []
    for dim in [int(x) for x in args.dims.split(",")]:
        model = os.path.join(tmp, f"d{dim}.mlir")
        sh([sys.executable, os.path.join(ROOT, "examples", "gen_model.py"), "--preset",
            "gpt-small", "--dim", str(dim), "-o", model])
        so = {}
        for tag, flags in (("bf16", ["--precision=bf16"]),
                           ("tile", ["--precision=fp8", "--fp8-scaling=tile"]),
                           ("matrix", ["--precision=fp8", "--fp8-scaling=matrix"])):
            so[tag] = os.path.join(tmp, f"d{dim}-{tag}.so")
            sh([stepc, model, "--target=cpu", "-o", so[tag]] + flags)
        trained = os.path.join(tmp, f"d{dim}-trained")
        sh([run, so["bf16"], "--steps", str(args.train_steps), "--save-npy", trained])
        for outlier in [float(x) for x in args.outliers.split(",")]:
            start = os.path.join(tmp, f"d{dim}-x{outlier:g}")
            os.makedirs(start, exist_ok=True)
            for f in glob.glob(os.path.join(trained, "param.*.npy")):
                w = np.load(f)
                if f.endswith(".ln_1.weight.npy"):
                    w = w.copy()
                    w[0] *= outlier
                np.save(os.path.join(start, os.path.basename(f)), w)
            rows.append(compare(run, so, start, dim, outlier, args.train_steps))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


def compare(run, so, start, dim, outlier, train_steps):
    """One step of each build from the weights in `start`: the fp8 builds'
    gradient errors against bf16's."""
    grads = {}
    for tag in so:
        d = f"{start}-{tag}-step"
        sh([run, so[tag], "--steps", "1", "--init-npy", start, "--save-npy", d])
        grads[tag] = moments(d)
    ref = grads["bf16"]
    row = {"dim": dim, "train_steps": train_steps, "outlier": outlier}
    for tag in ("tile", "matrix"):
        g = grads[tag]
        num = sum(float(np.sum((g[k] - ref[k]) ** 2)) for k in ref)
        den = sum(float(np.sum(ref[k] ** 2)) for k in ref)
        linear = [k for k in ref if ref[k].ndim == 2 and k.split(".")[0] == "h"]
        worst = max(float(np.linalg.norm(g[k] - ref[k]) / np.linalg.norm(ref[k]))
                    for k in linear)
        row[tag] = {"gradient_error": (num / den) ** 0.5, "worst_linear_weight": worst}
    row["matrix_over_tile"] = row["matrix"]["gradient_error"] / row["tile"]["gradient_error"]
    print(f"dim {dim:4d}, outlier x{outlier:<6g}: gradient error vs bf16: tiles "
          f"{row['tile']['gradient_error']:.3e} (worst weight "
          f"{row['tile']['worst_linear_weight']:.3e}), one scale per matrix "
          f"{row['matrix']['gradient_error']:.3e} (worst "
          f"{row['matrix']['worst_linear_weight']:.3e}): matrix/tile "
          f"{row['matrix_over_tile']:.2f}x", flush=True)
    return row


if __name__ == "__main__":
    sys.exit(main())
