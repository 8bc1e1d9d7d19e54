#!/usr/bin/env python3
"""Tensor-parallel runs against the single-rank run of the same model.

    tp_equality.py --bin DIR --work DIR --model NAME=MODEL... --shard S...
                   [--steps N] [--tolerance T] [--micro-batches M]

For each model: compiles it unsharded and under each --shard (AdamW's
epsilon 1e-3 everywhere), trains N steps on one rank and on as many ranks
as the shard names under mpirun (S+sp: with --sequence-parallel; S@SCHEDULE:
with --pp-schedule=SCHEDULE), and compares every step's loss and
gradient norm (the metrics) and the final parameters and moments (--save-npy, gathered) with
the single-rank run: max |a - b| / max |b| <= T. Prints one line per run.
--micro-batches: every run (the single-rank one too) in M micro-batches;
under a pipeline (pp:P) each stage's ranks save its tensors, and each is
read from the first rank directory that holds it.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--bin", required=True)
p.add_argument("--work", required=True)
p.add_argument("--model", action="append", required=True)
p.add_argument("--shard", action="append", required=True)
p.add_argument("--steps", type=int, default=5)
p.add_argument("--tolerance", type=float, default=1e-6)
p.add_argument("--micro-batches", type=int, default=1)
args = p.parse_args()

MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "pml", "ob1",
       "--mca", "btl", "self,vader", "--mca", "oob_tcp_if_include", "lo"]
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def ranks(shard):
    n = 1
    for part in shard.split("@")[0].removesuffix("+sp").split(","):
        kind, count = part.split(":")
        for c in count.split("x"):
            n *= int(c)
    return n


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")


def train(name, model, shard):
    tag = f"{name}-{shard.replace(':', '').replace(',', '-').replace('+', '-').replace('@', '-')}"
    so = os.path.join(args.work, tag + ".so")
    # S+sp: S with sequence parallelism; S@SCHEDULE: the pipeline's schedule.
    spec, _, schedule = shard.partition("@")
    flags = [] if spec == "none" else [f"--shard={spec.removesuffix('+sp')}"]
    if spec.endswith("+sp"):
        flags.append("--sequence-parallel")
    if schedule:
        flags.append(f"--pp-schedule={schedule}")
    if args.micro_batches > 1:
        flags.append(f"--micro-batches={args.micro_batches}")
    run([os.path.join(args.bin, "stepc"), model, "--target=cpu",
         "--optimizer-options=epsilon=1e-3", "-o", so] + flags)
    out = os.path.join(args.work, tag)
    cmd = [os.path.join(args.bin, "stepc-run"), so, "--steps", str(args.steps),
           "--save-npy", out, "--metrics", out + ".jsonl"]
    run(cmd if shard == "none" else MPI + ["-np", str(ranks(shard))] + cmd)
    # Each step's loss and global gradient norm (the clipping norm, over
    # every tp part and data shard).
    metrics = [json.loads(line) for line in open(out + ".jsonl")]
    return out, [(m["loss"], m["grad_norm"]) for m in metrics]


def relative(a, b):
    scale = np.max(np.abs(b))
    return float(np.max(np.abs(a - b)) / scale) if scale > 0 else float(np.max(np.abs(a)))


worst, runs = 0.0, 0
for spec in args.model:
    name, model = spec.split("=", 1)
    ref, ref_losses = train(name, model, "none")
    for shard in args.shard:
        out, losses = train(name, model, shard)
        if len(losses) != args.steps:
            sys.exit(f"FAIL {name} {shard}: {len(losses)} steps")
        loss_err = max(abs(a - b) / abs(b)
                       for pair, ref_pair in zip(losses, ref_losses)
                       for a, b in zip(pair, ref_pair))
        tensor_err, tensor_name = 0.0, None
        names = sorted(f for f in os.listdir(ref) if f.endswith(".npy"))
        # A pipeline's stages hold their own tensors (out, out.rank1, ...).
        holders = [out] + [f"{out}.rank{r}" for r in range(1, ranks(shard))]
        for f in names:
            held = [d for d in holders if os.path.exists(os.path.join(d, f))]
            if not held:
                sys.exit(f"FAIL {name} {shard} {f}: no rank saved it")
            a = np.load(os.path.join(held[0], f)).astype(np.float64)
            b = np.load(os.path.join(ref, f)).astype(np.float64)
            if a.shape != b.shape:
                sys.exit(f"FAIL {name} {shard} {f}: shapes {a.shape} and {b.shape}")
            e = relative(a, b)
            if e >= tensor_err:
                tensor_err, tensor_name = e, f
        print(f"{name} {shard}: losses and gradient norms {args.steps} steps {loss_err:.3g}, "
              f"{len(names)} tensors worst {tensor_name} {tensor_err:.3g}")
        if max(loss_err, tensor_err) > args.tolerance:
            sys.exit(f"FAIL {name} {shard}: beyond {args.tolerance}")
        worst = max(worst, loss_err, tensor_err)
        runs += 1
print(f"ok: {runs} runs within {args.tolerance:g} (worst {worst:.3g})")
