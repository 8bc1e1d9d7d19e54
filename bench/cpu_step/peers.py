#!/usr/bin/env python3
"""bench/cpu_step peers: one training step of a preset model in PyTorch 2.x
(eager, and torch.compile) and JAX, in the optional environment
bench/setup-peers.sh makes.

    bench/.peers/bin/python bench/cpu_step/peers.py --preset gpt-capstone [--steps 15]

The same model, batch and optimizer as bench.py's stepc step: forward,
backward, global-norm clip to 1.0, AdamW (betas 0.9/0.95, eps 1e-8, weight
decay 0.1 on matrices). Attention is PyTorch's scaled_dot_product_attention
(causal) and jax.nn.dot_product_attention where they exist. Prints one JSON
object: the median seconds of a step for each peer it could run (a peer whose
package is missing is reported as such, not timed).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import gen_model  # noqa: E402

BETAS, EPS, WEIGHT_DECAY, MAX_NORM, LR = (0.9, 0.95), 1e-8, 0.1, 1.0, 1e-3


def timed(step, steps):
    times = []
    for s in range(steps):
        start = time.perf_counter()
        step()
        if s >= 2:  # warm-up (and compilation)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def torch_peer(a, shapes, params, tokens, targets, steps, threads, compiled, autocast=False):
    import torch

    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import torch_check

    torch_check.SDPA = True
    torch.set_num_threads(threads)
    p = {n: torch.tensor(params[n], requires_grad=True) for n, _ in shapes}
    decay = [p[n] for n, s in shapes if len(s) >= 2]
    no_decay = [p[n] for n, s in shapes if len(s) < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS)
    loss_fn = torch_check.gpt_loss if a.arch == "gpt" else torch_check.llama_loss
    tok = torch.tensor(tokens, dtype=torch.long)
    tgt = torch.tensor(targets, dtype=torch.long)

    def forward():
        # --autocast: bf16 GEMMs, fp32 master weights (as stepc --precision=bf16).
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            return loss_fn(a, p, tok, tgt).float()

    if compiled:  # the loss (forward and, through AOTAutograd, backward)
        forward = torch.compile(forward)

    def step():
        opt.zero_grad(set_to_none=True)
        forward().backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), MAX_NORM)
        opt.step()

    return timed(step, steps), torch.__version__


def jax_peer(a, shapes, params, tokens, targets, steps):
    import jax
    import jax.numpy as jnp

    def layer_norm(x, w, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + a.norm_eps) * w + b

    def rms_norm(x, w):
        return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + a.norm_eps) * w

    def rotary(x, hd):
        b, t, c = x.shape
        pairs = x.reshape(b, t, c // hd, hd // 2, 2)
        freqs = a.rope_theta ** (-np.arange(0, hd // 2, dtype=np.float64) * 2.0 / hd)
        angle = np.arange(t, dtype=np.float64)[:, None] * freqs[None, :]
        cos = jnp.asarray(np.cos(angle), x.dtype)[None, :, None, :]
        sin = jnp.asarray(np.sin(angle), x.dtype)[None, :, None, :]
        x0, x1 = pairs[..., 0], pairs[..., 1]
        return jnp.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).reshape(b, t, c)

    def attention(q, k, v, heads, kv_heads, hd):
        b, t, _ = q.shape
        q = q.reshape(b, t, heads, hd)
        k = k.reshape(b, t, kv_heads, hd)
        v = v.reshape(b, t, kv_heads, hd)
        if hasattr(jax.nn, "dot_product_attention"):
            o = jax.nn.dot_product_attention(q, k, v, is_causal=True)
        else:
            rep = heads // kv_heads
            k, v = jnp.repeat(k, rep, axis=2), jnp.repeat(v, rep, axis=2)
            s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hd)
            s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -jnp.inf)
            o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v)
        return o.reshape(b, t, heads * hd)

    def cross_entropy(logits, targets):
        logits = logits.reshape(-1, a.vocab)
        lse = jax.nn.logsumexp(logits, -1)
        picked = jnp.take_along_axis(logits, targets.reshape(-1, 1), -1)[:, 0]
        return (lse - picked).mean()

    def gpt_loss(p, tokens, targets):
        D, H = a.dim, a.heads
        hd = D // H
        x = p["wte"][tokens]
        if a.pos == "learned":
            x = x + p["wpe"][None]
        for l in range(a.layers):
            n = f"h.{l}."
            h = layer_norm(x, p[n + "ln_1.weight"], p[n + "ln_1.bias"])
            qkv = h @ p[n + "attn.c_attn.weight"].T + p[n + "attn.c_attn.bias"]
            q, k, v = jnp.split(qkv, 3, -1)
            if a.pos == "rotary":
                q, k = rotary(q, hd), rotary(k, hd)
            o = attention(q, k, v, H, H, hd)
            x = x + o @ p[n + "attn.c_proj.weight"].T + p[n + "attn.c_proj.bias"]
            h = layer_norm(x, p[n + "ln_2.weight"], p[n + "ln_2.bias"])
            f = jax.nn.gelu(h @ p[n + "mlp.c_fc.weight"].T + p[n + "mlp.c_fc.bias"],
                            approximate=a.gelu == "tanh")
            x = x + f @ p[n + "mlp.c_proj.weight"].T + p[n + "mlp.c_proj.bias"]
        x = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"])
        return cross_entropy(x @ p["wte"].T, targets)

    def llama_loss(p, tokens, targets):
        H, K = a.heads, a.kv_heads
        hd = a.dim // H
        x = p["tok_embeddings"][tokens]
        for l in range(a.layers):
            n = f"layers.{l}."
            h = rms_norm(x, p[n + "attention_norm"])
            q = rotary(h @ p[n + "attention.wq"].T, hd)
            k = rotary(h @ p[n + "attention.wk"].T, hd)
            v = h @ p[n + "attention.wv"].T
            x = x + attention(q, k, v, H, K, hd) @ p[n + "attention.wo"].T
            h = rms_norm(x, p[n + "ffn_norm"])
            g = jax.nn.silu(h @ p[n + "feed_forward.w1"].T) * (h @ p[n + "feed_forward.w3"].T)
            x = x + g @ p[n + "feed_forward.w2"].T
        x = rms_norm(x, p["norm"])
        return cross_entropy(x @ p["output"].T, targets)

    loss_fn = gpt_loss if a.arch == "gpt" else llama_loss
    decays = {n: WEIGHT_DECAY if len(s) >= 2 else 0.0 for n, s in shapes}

    @jax.jit
    def train_step(p, m, v, t, tokens, targets):
        loss, g = jax.value_and_grad(loss_fn)(p, tokens, targets)
        norm = jnp.sqrt(sum(jnp.sum(x * x) for x in g.values()))
        scale = jnp.minimum(1.0, MAX_NORM / (norm + 1e-6))
        b1, b2 = BETAS
        new_p, new_m, new_v = {}, {}, {}
        for n in p:
            gn = g[n] * scale
            new_m[n] = b1 * m[n] + (1 - b1) * gn
            new_v[n] = b2 * v[n] + (1 - b2) * gn * gn
            mhat = new_m[n] / (1 - b1 ** t)
            vhat = new_v[n] / (1 - b2 ** t)
            new_p[n] = p[n] * (1 - LR * decays[n]) - LR * mhat / (jnp.sqrt(vhat) + EPS)
        return loss, new_p, new_m, new_v

    state = {"p": {n: jnp.asarray(params[n]) for n, _ in shapes}}
    state["m"] = {n: jnp.zeros_like(x) for n, x in state["p"].items()}
    state["v"] = {n: jnp.zeros_like(x) for n, x in state["p"].items()}
    state["t"] = 0
    tok, tgt = jnp.asarray(tokens), jnp.asarray(targets)

    def step():
        state["t"] += 1
        loss, state["p"], state["m"], state["v"] = train_step(
            state["p"], state["m"], state["v"], float(state["t"]), tok, tgt)
        loss.block_until_ready()

    return timed(step, steps), jax.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="gpt-capstone")
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--peers", default="torch,torch.compile,jax")
    ap.add_argument("--autocast", action="store_true",
                    help="PyTorch under torch.autocast('cpu', bfloat16) (not JAX)")
    args = ap.parse_args()
    a, text = gen_model.generate(["--preset", args.preset])
    shapes = []
    for line in text.splitlines():
        if "step.param" in line:
            dims = line.split("tensor<", 1)[1].split(">", 1)[0].split("x")[:-1]
            shapes.append((line.split('#step.param<"', 1)[1].split('"', 1)[0],
                           [int(d) for d in dims]))
    rng = np.random.default_rng(0)
    params = {n: (rng.normal(0, 0.02, s) if len(s) >= 2 else 1.0 + rng.normal(0, 0.1, s))
              .astype(np.float32) for n, s in shapes}
    tokens = rng.integers(0, a.vocab, (a.batch, a.seq)).astype(np.int32)
    targets = rng.integers(0, a.vocab, (a.batch, a.seq)).astype(np.int32)
    result = {}
    for peer in args.peers.split(","):
        try:
            if peer in ("torch", "torch.compile"):
                s, version = torch_peer(a, shapes, params, tokens, targets, args.steps,
                                        args.threads, peer == "torch.compile", args.autocast)
            elif peer == "jax":
                s, version = jax_peer(a, shapes, params, tokens, targets, args.steps)
            else:
                raise SystemExit(f"unknown peer '{peer}' (torch, torch.compile, jax)")
            result[peer] = {"step_s": s, "version": version}
        except ImportError as e:
            result[peer] = {"missing": str(e)}
        print(f"peers: {peer} {result[peer]}", file=sys.stderr, flush=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
