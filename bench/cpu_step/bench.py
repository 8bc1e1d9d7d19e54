#!/usr/bin/env python3
"""bench/cpu_step: stepc's CPU training step against PyTorch on the same model.

    /usr/bin/python3 bench/cpu_step/bench.py [--preset gpt-capstone] [--steps 15]

One run, one machine, the same thread count (all cores): the median time of
a full step (forward, backward, global-norm clip, AdamW) for the stepc
step.so (stepc-run, embedded corpus) and for the same model in PyTorch
(scripts/torch_check.py's definition, torch.optim.AdamW), and the machine's
OpenBLAS sgemm rate (bench_sgemm, 1024³). Prints one JSON object with the
ratios: speedup over PyTorch and stepc's GFLOP/s as a fraction of sgemm.
A benchmark, not a test: nothing here asserts a time.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import gen_model  # noqa: E402
import torch_check  # noqa: E402


def stepc_step_seconds(bindir, model, steps, cpu):
    with tempfile.TemporaryDirectory() as tmp:
        so, metrics = os.path.join(tmp, "step.so"), os.path.join(tmp, "m.jsonl")
        subprocess.run([os.path.join(bindir, "stepc"), model, "-o", so, "--target=cpu",
                        f"--cpu={cpu}"], check=True)
        subprocess.run([os.path.join(bindir, "stepc-run"), so, f"--steps={steps}",
                        f"--metrics={metrics}", f"--log-every={steps}"], check=True,
                       capture_output=True)
        rows = [json.loads(line) for line in open(metrics)]
    times = [1.0 / r["tokens_per_s"] for r in rows[2:]]  # seconds per token; 2 warm-up steps
    return times


def torch_step_seconds(a, shapes, steps, threads):
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    params, tokens, targets = torch_check.draw(shapes, a, rng)
    p = {n: torch.tensor(params[n], requires_grad=True) for n, _ in shapes}
    decay = [p[n] for n, s in shapes if len(s) >= 2]
    no_decay = [p[n] for n, s in shapes if len(s) < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    loss_fn = torch_check.gpt_loss if a.arch == "gpt" else torch_check.llama_loss
    tok = torch.tensor(tokens, dtype=torch.long)
    tgt = torch.tensor(targets, dtype=torch.long)
    times = []
    for s in range(steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(a, p, tok, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
        opt.step()
        if s >= 2:
            times.append(time.perf_counter() - start)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="gpt-capstone")
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--bindir", default=os.path.join(ROOT, "build", "bin"))
    # The peers (PyTorch) use this machine's ISA; so does stepc by default here.
    ap.add_argument("--cpu", default="native", help="stepc --cpu: native or x86-64-v3")
    args = ap.parse_args()
    threads = os.cpu_count()
    a, text = gen_model.generate(["--preset", args.preset])
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model.mlir")
        open(model, "w").write(text)
        report = json.loads(subprocess.run(
            [os.path.join(args.bindir, "stepc-opt"), "--step-report", model, "-o", os.devnull],
            check=True, capture_output=True, text=True).stdout)
        per_token = stepc_step_seconds(args.bindir, model, args.steps, args.cpu)
    tokens = report["tokens_per_step"]
    flops = report["model_flops_per_step"]
    stepc_s = statistics.median(per_token) * tokens
    torch_s = statistics.median(torch_step_seconds(a, torch_check.param_shapes(text),
                                                   args.steps, threads))
    sgemm = json.loads(subprocess.run([os.path.join(args.bindir, "bench_sgemm")], check=True,
                                      capture_output=True, text=True).stdout)["gflops"]
    stepc_gflops = flops / stepc_s / 1e9
    result = {
        "model": args.preset, "threads": threads, "tokens_per_step": tokens,
        "model_flops_per_step": flops,
        "stepc_step_ms": round(stepc_s * 1e3, 1), "torch_step_ms": round(torch_s * 1e3, 1),
        "speedup_vs_torch": round(torch_s / stepc_s, 2),
        "stepc_gflops": round(stepc_gflops, 1),
        "torch_gflops": round(flops / torch_s / 1e9, 1),
        "sgemm_gflops": sgemm, "fraction_of_sgemm": round(stepc_gflops / sgemm, 3),
        "torch_version": torch.__version__,
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
