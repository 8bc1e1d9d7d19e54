#!/usr/bin/env python3
"""Checks step-report's per-op FLOP and parameter counts against closed forms.

For every shipped preset and a set of awkward configurations (odd widths,
head counts that are not powers of two, several KV groupings), generates the
model, runs `stepc-opt --step-report`, and compares with

    params        (counted from the architecture)
    matmul_params P_matmul: every Linear weight, plus the tied/untied head
                  (with experts: the router and every expert's weights)
    model FLOPs   (6·P_active + 12·L·T·d_attn) per token, d_attn = heads·head_dim,
                  P_active = P_matmul with K of a layer's E experts (a token's)

Exits non-zero on the first mismatch, printing both figures.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import gen_model  # noqa: E402

ODD_CONFIGS = [
    ["--arch", "gpt", "--vocab", "97", "--seq", "17", "--dim", "48", "--layers", "3",
     "--heads", "3", "--batch", "5"],
    ["--arch", "gpt", "--pos", "rotary", "--gelu", "tanh", "--vocab", "61", "--seq", "9",
     "--dim", "60", "--layers", "2", "--heads", "5", "--batch", "3"],
    ["--arch", "llama", "--vocab", "101", "--seq", "13", "--dim", "72", "--layers", "2",
     "--heads", "6", "--kv-heads", "3", "--ffn-multiple", "32", "--batch", "2"],
    ["--arch", "llama", "--vocab", "50", "--seq", "7", "--dim", "40", "--layers", "3",
     "--heads", "5", "--kv-heads", "1", "--ffn-multiple", "24", "--batch", "3"],
    ["--arch", "llama", "--vocab", "33", "--seq", "11", "--dim", "36", "--layers", "1",
     "--heads", "3", "--kv-heads", "3", "--ffn-multiple", "7", "--batch", "1"],
    ["--arch", "gpt", "--vocab", "97", "--seq", "17", "--dim", "48", "--layers", "3",
     "--heads", "3", "--batch", "5", "--moe-experts", "5", "--moe-top-k", "3"],
    ["--arch", "llama", "--vocab", "101", "--seq", "13", "--dim", "72", "--layers", "2",
     "--heads", "6", "--kv-heads", "3", "--ffn-multiple", "32", "--batch", "2",
     "--moe-experts", "4", "--moe-top-k", "1", "--moe-shared", "1", "--moe-aux-loss", "0.1"],
]


def expected(a):
    """Closed-form params, P_matmul and FLOPs per token of a configuration."""
    V, T, d, L, H = a.vocab, a.seq, a.dim, a.layers, a.heads
    hd = d // H
    E, top = a.moe_experts, a.moe_top_k
    dense = not E or a.moe_shared
    if a.arch == "gpt":
        mlp = 4 * d * d + 4 * d * d
        attn = 3 * d * d + d * d
        per_block_other = 2 * d + 3 * d + d + 2 * d + (4 * d + d if dense else 0)  # norms, biases
        extra = T * d if a.pos == "learned" else 0
        attn_width = d
    else:
        K = a.kv_heads
        F = gen_model.llama_ffn_hidden(d, a.ffn_multiple)
        mlp = 3 * d * F
        attn = d * H * hd + 2 * d * K * hd + H * hd * d
        per_block_other = 2 * d
        attn_width = H * hd
    block = attn + (mlp if dense else 0) + (E * d + E * mlp if E else 0)
    active = attn + (mlp if dense else 0) + (E * d + top * mlp if E else 0)
    # The head (tied to the embedding in GPT) is a matmul parameter.
    matmul, active_matmul = V * d + L * block, V * d + L * active
    if a.arch == "gpt":
        params = matmul + L * per_block_other + 2 * d + extra
    else:
        params = matmul + V * d + L * per_block_other + d  # + embedding, final norm
    per_token = 6 * active_matmul + 12 * L * T * attn_width
    return {"params": params, "matmul_params": matmul, "model_flops_per_token": per_token,
            "model_flops_per_step": per_token * a.batch * T}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--stepc-opt", default="stepc-opt")
    args = p.parse_args()
    configs = [["--preset", n] for n in sorted(gen_model.PRESETS)] + ODD_CONFIGS
    with tempfile.TemporaryDirectory() as tmp:
        for argv in configs:
            a, text = gen_model.generate(argv)
            path = os.path.join(tmp, "model.mlir")
            with open(path, "w") as f:
                f.write(text)
            out = subprocess.run([args.stepc_opt, "--step-report", path, "-o", os.devnull],
                                 check=True, capture_output=True, text=True).stdout
            report = json.loads(out)
            want = expected(a)
            for key, value in want.items():
                if report[key] != value:
                    print(f"FAIL {' '.join(argv)}: {key} reported {report[key]}, "
                          f"formula {value}")
                    return 1
            print(f"ok {' '.join(argv)}: {want}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
