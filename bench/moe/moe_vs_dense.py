#!/usr/bin/env python3
"""An MoE step against the dense step of the same active FLOPs, on this CPU.

    /usr/bin/python3 bench/moe/moe_vs_dense.py [--preset llama-debug]
        [--experts 4] [--top-k 2] [--steps 15] [--rounds 3]

The dense model's FFN is K experts wide (--ffn-multiple K·F, F the preset's
expert width), so both do the same FLOPs a token. Both are compiled with
`stepc --profile`; the runs alternate (dense, MoE, dense, ...) and each
round's step time is stepc-run's median. Prints the whole step's ratio and
the MoE layer's: the expert products plus the routing kernels against the
dense FFN's GEMMs (the dense model's GEMMs less the MoE model's other GEMMs,
which the two share). JSON on the last line.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("STEPC_BIN", os.path.join(ROOT, "build", "bin"))
ROUTING = ("step.moe_dispatch", "step.moe_combine", "step.moe_combine_grad", "step.top_k",
           "step.softmax", "step.softmax_grad", "step.gather_grad")
EXPERTS = ("step.grouped_matmul", "step.grouped_matmul_weight_grad")


def run(cmd):
    r = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return r.stdout + r.stderr  # (stepc-run prints the kernel table on stderr)


def profile(so, steps):
    """stepc-run's median step (ms) and its kernel table (kind -> ms a step)."""
    out = run([os.path.join(BIN, "stepc-run"), so, f"--steps={steps}", "--log-every=100000"])
    median = float(re.search(r"step time median ([0-9.]+) ms", out).group(1))
    kernels = {}
    for line in out.splitlines():
        line = line.strip().rstrip(",")
        if line.startswith('{"kind"'):
            k = json.loads(line)
            kernels[k["kind"]] = k["seconds"] * 1e3 / (steps - 1)
    return median, kernels


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--preset", default="llama-debug")
    p.add_argument("--experts", type=int, default=4)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--expert-width", type=int, default=384)
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    gen = os.path.join(ROOT, "examples", "gen_model.py")
    with tempfile.TemporaryDirectory() as work:
        models = {
            "dense": ["--ffn-multiple", str(a.top_k * a.expert_width)],
            "moe": ["--ffn-multiple", str(a.expert_width), "--moe-experts", str(a.experts),
                    "--moe-top-k", str(a.top_k)],
        }
        sos = {}
        for name, flags in models.items():
            mlir, so = os.path.join(work, name + ".mlir"), os.path.join(work, name + ".so")
            run([sys.executable, gen, "--preset", a.preset, *flags, "-o", mlir])
            run([os.path.join(BIN, "stepc"), mlir, "--target=cpu", "--profile", "-o", so])
            sos[name] = so
        medians = {name: [] for name in sos}
        tables = {}
        for _ in range(a.rounds):
            for name, so in sos.items():
                median, kernels = profile(so, a.steps)
                medians[name].append(median)
                tables[name] = kernels
    step = {name: statistics.median(v) for name, v in medians.items()}
    gemm = {name: sum(ms for kind, ms in t.items() if kind.startswith("stepk.gemm"))
            for name, t in tables.items()}
    experts = sum(tables["moe"].get(kind, 0.0) for kind in EXPERTS)
    routing = sum(tables["moe"].get(kind, 0.0) for kind in ROUTING)
    dense_ffn = gemm["dense"] - gemm["moe"]
    print(f"step: dense {step['dense']:.1f} ms, MoE {step['moe']:.1f} ms: "
          f"{step['moe'] / step['dense']:.2f}x")
    print(f"layer: experts {experts:.1f} + routing {routing:.1f} ms against the dense FFN's "
          f"GEMMs {dense_ffn:.1f} ms: {(experts + routing) / dense_ffn:.2f}x")
    print(json.dumps({"preset": a.preset, "experts": a.experts, "top_k": a.top_k,
                      "step_ms": step, "step_ratio": step["moe"] / step["dense"],
                      "expert_ms": experts, "routing_ms": routing, "dense_ffn_ms": dense_ffn,
                      "layer_ratio": (experts + routing) / dense_ffn}))


if __name__ == "__main__":
    main()
