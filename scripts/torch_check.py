#!/usr/bin/env python3
"""Compares one stepc training step with PyTorch on identical weights and batch.

    /usr/bin/python3 scripts/torch_check.py [--backend interp|cpu] [--seed S]
        [--tolerance 1e-5] [--lr X] [--optimizer adamw|adam|sgd|lion|muon
        [--momentum M] [--nesterov]] [--epsilon E] [--precision fp32|bf16]
        [--steps N] <gen_model.py flags | --preset NAME>

Generates the model with examples/gen_model.py, draws weights (every
parameter, norms and biases included, off its initial value) and a batch,
runs stepc (the reference interpreter: `stepc-interp --grad` and
`--train-step`) and the same model written in PyTorch (forward, backward,
clip_grad_norm_, then torch.optim.AdamW, Adam or SGD, Lion's reference
update or torch.optim.Muon's (written in torch ops; AdamW on the parameters
outside the blocks' matrices), with weight decay on parameters of rank >= 2),
and prints one JSON object with the relative error of each tensor:

    loss, grad_norm      |a - b| / |b|
    grad.*               max |a - b| / max |b| over the tensor
    param.*, exp_avg.*, exp_avg_sq.*
                         the same, against PyTorch's clip + AdamW applied to
                         stepc's gradients (see the comment in main: AdamW's
                         first step turns f32 noise in near-zero gradients
                         into ±lr moves; `param_rel_err_with_torch_grads`
                         reports that end-to-end figure without gating on it)

and `max_rel_err` overall; exits 1 above --tolerance (default 1e-5, f32).
With --steps N (> 1; the CPU step.so) both train N steps on the batch at a
constant lr and every step's loss and gradient norm and the final
parameters and optimizer state are compared end to end.
With --configs FILE, each line of FILE (blank lines and # comments aside) is
one such command line, all checked in this one process (PyTorch is imported
once): each prints its object, and the exit code is 1 if any failed.
Works for any configuration the generator accepts. With --precision=bf16
stepc computes GEMMs and attention in bf16 (stepc --precision=bf16) and
PyTorch runs the forward under torch.autocast("cpu", dtype=torch.bfloat16),
fp32 master weights in both; gradients are read back from the optimizer
state on either backend (the interpreter's --grad is f32 only). With
--dropout P (gen_model.py's), PyTorch applies masks drawn by this script's
own Philox-4x32-10 (for --seed and step 1), so stepc's masks are checked
bit for bit through the loss and every gradient. With gen_model.py's
--ignore-index T each row's first k targets (k random) are T, as an SFT
batch's prompt; --label-smoothing and --z-loss go to F.cross_entropy and a
z-loss term written here.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
import gen_model  # noqa: E402

BETAS, EPS, WEIGHT_DECAY, MAX_NORM = (0.9, 0.95), 1e-8, 0.1, 1.0  # step-optimizer's defaults


def rotary(x, head_dim, theta):
    """Meta's convention: adjacent pairs rotate by t·theta^(-2i/Dh)."""
    b, t, c = x.shape
    pairs = x.view(b, t, c // head_dim, head_dim // 2, 2)
    freqs = theta ** (-torch.arange(0, head_dim // 2, dtype=torch.float64) * 2.0 / head_dim)
    angle = torch.arange(t, dtype=torch.float64)[:, None] * freqs[None, :]
    cos = torch.cos(angle).to(x.dtype)[None, :, None, :]
    sin = torch.sin(angle).to(x.dtype)[None, :, None, :]
    x0, x1 = pairs[..., 0], pairs[..., 1]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).view(b, t, c)


# PyTorch 2.x's fused causal attention instead of the explicit softmax
# (bench/cpu_step/peers.py sets it; the oracle keeps the explicit one).
SDPA = False


def attention(q, k, v, heads, kv_heads, head_dim, keep=None):
    """Causal attention; `keep` [B, T] bool: the keys a query may see (a row
    that sees none gives 0, as stepc's and PyTorch 2.5's SDPA do)."""
    b, t, _ = q.shape
    q = q.view(b, t, heads, head_dim).transpose(1, 2)
    k = k.view(b, t, kv_heads, head_dim).transpose(1, 2)
    v = v.view(b, t, kv_heads, head_dim).transpose(1, 2)
    if kv_heads != heads:
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
    if SDPA and keep is None:
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return o.transpose(1, 2).reshape(b, t, heads * head_dim)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    if keep is not None:
        mask = mask & keep[:, None, None, :]
    scores = scores.masked_fill(~mask, float("-inf"))
    # Rows that see no key: softmax over zeros, then the row zeroed (no NaN
    # reaches the backward).
    dead = ~mask.any(-1, keepdim=True)
    o = (F.softmax(scores.masked_fill(dead, 0.0), dim=-1) * ~dead) @ v
    return o.transpose(1, 2).reshape(b, t, heads * head_dim)


def philox4x32_10_word0(counter, key):
    """Word 0 of Philox-4x32-10 (Salmon et al. 2011) for arrays of counters,
    written here from the paper's definition: the oracle for stepc's mask."""
    mask32 = np.uint64(0xFFFFFFFF)
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) & mask32 for c in counter)
    k0, k1 = (np.uint64(k) & mask32 for k in key)
    for _ in range(10):
        p0, p1 = c0 * np.uint64(0xD2511F53), c2 * np.uint64(0xCD9E8D57)
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & mask32,
                          (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & mask32)
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & mask32, (k1 + np.uint64(0xBB67AE85)) & mask32
    return c0


def dropout_mask(shape, rate, seed, stream, step):
    """stepc's dropout as a multiplier: 1/(1 - rate) (rounded to f32) where
    element i (row-major) is kept, 0 where dropped; draw i is word 0 of
    Philox(counter (i, 0, step, 0), key (seed, stream)), kept when its top
    24 bits / 2^24 are not below the rate."""
    n = int(np.prod(shape))
    index = np.arange(n, dtype=np.uint64)
    bits = philox4x32_10_word0((index, index >> np.uint64(32), np.full(n, step), np.zeros(n)),
                               (seed, stream))
    keep = (bits >> np.uint64(8)) >= np.uint64(math.ceil(rate * 2 ** 24))
    scale = np.float32(1.0 / (1.0 - rate))
    return torch.tensor(np.where(keep, scale, np.float32(0)).reshape(shape), dtype=torch.float32)


def dropouts(a, seed, step):
    """gen_model.py's dropouts in stream order (embedding, then each layer's
    attention and MLP outputs), as functions of their input."""
    if not a.dropout:
        return lambda x, stream: x
    return lambda x, stream: x * dropout_mask(tuple(x.shape), a.dropout, seed, stream, step)


def keep_of(a, tokens):
    """gen_model.py's --pad-token key-padding mask: the keys a query sees."""
    return None if a.pad_token is None else tokens != a.pad_token


def gpt_loss(a, p, tokens, targets, drop=lambda x, stream: x):
    D, H = a.dim, a.heads
    aux = []
    hd = D // H
    x = p["wte"][tokens]
    if a.pos == "learned":
        x = x + p["wpe"][None]
    x = drop(x, 0)
    for l in range(a.layers):
        n = f"h.{l}."
        h = F.layer_norm(x, (D,), p[n + "ln_1.weight"], p[n + "ln_1.bias"], a.norm_eps)
        qkv = h @ p[n + "attn.c_attn.weight"].t() + p[n + "attn.c_attn.bias"]
        q, k, v = qkv.split(D, dim=-1)
        if a.pos == "rotary":
            q, k = rotary(q, hd, a.rope_theta), rotary(k, hd, a.rope_theta)
        o = attention(q, k, v, H, H, hd, keep_of(a, tokens))
        x = x + drop(o @ p[n + "attn.c_proj.weight"].t() + p[n + "attn.c_proj.bias"], 1 + 2 * l)
        h = F.layer_norm(x, (D,), p[n + "ln_2.weight"], p[n + "ln_2.bias"], a.norm_eps)
        approx = "tanh" if a.gelu == "tanh" else "none"
        f = 0
        if not a.moe_experts or a.moe_shared:
            f = F.gelu(h @ p[n + "mlp.c_fc.weight"].t() + p[n + "mlp.c_fc.bias"], approximate=approx)
            f = f @ p[n + "mlp.c_proj.weight"].t() + p[n + "mlp.c_proj.bias"]
        if a.moe_experts:
            def expert(e, rows, n=n):
                h1 = F.gelu(rows @ p[n + "moe.experts.c_fc.weight"][e].t(), approximate=approx)
                return h1 @ p[n + "moe.experts.c_proj.weight"][e].t()
            f = f + moe(a, p[n + "moe.router.weight"], h, expert, aux,
                        p.get(n + "moe.router_bias"))
        x = x + drop(f, 2 + 2 * l)
    x = F.layer_norm(x, (D,), p["ln_f.weight"], p["ln_f.bias"], a.norm_eps)
    logits = x @ p["wte"].t()
    return with_aux(a, lm_loss(a, logits, targets), aux)


def moe(a, router, h, expert, aux, bias=None):
    """gen_model.py's mixture of experts, written from its definition: the
    router's softmax, the top K (a stable descending sort: ties to the lower
    index; of probability + bias with --moe-bias-update) with their
    probabilities renormalised as gates, each expert on the tokens routed to
    it, summed back by the gates; the sequence-wise balance term into `aux`."""
    b, t, d = h.shape
    flat = h.reshape(b * t, d)
    probs = F.softmax(flat @ router.t(), dim=-1)
    scores = probs if bias is None else probs + bias
    order = torch.sort(scores, dim=-1, descending=True, stable=True)[1]
    chosen = order[:, :a.moe_top_k]
    gate = probs.gather(1, chosen)
    if a.moe_top_k > 1:
        gate = gate / gate.sum(-1, keepdim=True)
    # --moe-capacity-factor F: a pair is kept while its expert has taken
    # fewer than ceil(F·T·K/E) of its sequence's earlier (token, k) pairs.
    keep = torch.ones_like(chosen, dtype=torch.bool)
    if a.moe_capacity_factor:
        cap = max(1, math.ceil(a.moe_capacity_factor * t * a.moe_top_k / a.moe_experts))
        hits = F.one_hot(chosen.reshape(b, t * a.moe_top_k), a.moe_experts)
        before = ((hits.cumsum(1) - 1) * hits).sum(-1)
        keep = (before < cap).reshape(b * t, a.moe_top_k)
    out = torch.zeros_like(flat)
    for e in range(a.moe_experts):
        token, slot = ((chosen == e) & keep).nonzero(as_tuple=True)
        if token.numel():
            out = out.index_add(0, token, gate[token, slot, None] * expert(e, flat[token]))
    # Per sequence: f = its pairs' share at each expert, P = its mean
    # probability; Σ_e f·P averaged over the sequences.
    share = F.one_hot(chosen.reshape(b, t * a.moe_top_k), a.moe_experts).to(flat.dtype).mean(1)
    aux.append((share * probs.reshape(b, t, -1).mean(1)).sum(-1).mean())
    # The layer's metric: the batch's share of routed pairs at each expert.
    MOE_LOADS.append(share.mean(0).detach().double().numpy())
    if a.moe_capacity_factor:
        MOE_LOADS.append(("dropped", 1.0 - keep.double().mean().numpy()))
    return out.reshape(b, t, d)


# The MoE layers' expert loads of the last forward, in layer order (what
# gen_model.py's models return as the metrics h<l>/l<l>.expert_load).
MOE_LOADS = []


def balance(a, p):
    """--moe-bias-update R after the optimizer: each layer's routing bias
    moves by R · sign(1/E − load), its loads those of the step's forward
    (DeepSeek-V3's balancing without an auxiliary loss)."""
    if not a.moe_experts or not a.moe_bias_update:
        return
    loads = [x for x in MOE_LOADS if not isinstance(x, tuple)]
    prefix = "h." if a.arch == "gpt" else "layers."
    with torch.no_grad():
        for layer, load in enumerate(loads):
            bias = p[f"{prefix}{layer}.moe.router_bias"]
            share = torch.tensor(load, dtype=torch.float32)
            sign = torch.sign(torch.full_like(share, 1.0 / a.moe_experts) - share)
            bias += torch.tensor(float(a.moe_bias_update), dtype=torch.float32) * sign


def with_aux(a, loss, aux):
    """gen_model.py's --moe-aux-loss C: loss + C · E · Σ_layers balance."""
    if not a.moe_experts or not a.moe_aux_loss:
        return loss
    term = a.moe_aux_loss * a.moe_experts * sum(aux)
    MOE_LOADS.append(("moe_aux_loss", term.detach().double().numpy()))
    return loss + term


def lm_loss(a, logits, targets):
    """gen_model.py's loss: F.cross_entropy with its ignore_index and label
    smoothing, plus z_loss · logsumexp² averaged over the same counted
    targets."""
    x, t = logits.reshape(-1, a.vocab), targets.reshape(-1)
    ignore = -100 if a.ignore_index is None else a.ignore_index
    loss = F.cross_entropy(x, t, ignore_index=ignore, label_smoothing=a.label_smoothing)
    if a.z_loss:
        counted = t != ignore
        loss = loss + a.z_loss * (torch.logsumexp(x, -1)[counted] ** 2).sum() / counted.sum()
    return loss


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def llama_loss(a, p, tokens, targets, drop=lambda x, stream: x):
    H, K = a.heads, a.kv_heads
    aux = []
    hd = a.dim // H
    x = drop(p["tok_embeddings"][tokens], 0)
    for l in range(a.layers):
        n = f"layers.{l}."
        h = rms_norm(x, p[n + "attention_norm"], a.norm_eps)
        q = rotary(h @ p[n + "attention.wq"].t(), hd, a.rope_theta)
        k = rotary(h @ p[n + "attention.wk"].t(), hd, a.rope_theta)
        v = h @ p[n + "attention.wv"].t()
        x = x + drop(attention(q, k, v, H, K, hd, keep_of(a, tokens)) @ p[n + "attention.wo"].t(),
                     1 + 2 * l)
        h = rms_norm(x, p[n + "ffn_norm"], a.norm_eps)
        m = 0
        if not a.moe_experts or a.moe_shared:
            g = F.silu(h @ p[n + "feed_forward.w1"].t()) * (h @ p[n + "feed_forward.w3"].t())
            m = g @ p[n + "feed_forward.w2"].t()
        if a.moe_experts:
            def expert(e, rows, n=n):
                g = F.silu(rows @ p[n + "moe.experts.w1"][e].t()) * \
                    (rows @ p[n + "moe.experts.w3"][e].t())
                return g @ p[n + "moe.experts.w2"][e].t()
            m = m + moe(a, p[n + "moe.router.weight"], h, expert, aux,
                        p.get(n + "moe.router_bias"))
        x = x + drop(m, 2 + 2 * l)
    x = rms_norm(x, p["norm"], a.norm_eps)
    logits = x @ p["output"].t()
    return with_aux(a, lm_loss(a, logits, targets), aux)


def frozen_names(model_text):
    """The parameters the model marks `frozen` (held, not trained)."""
    return {line.split('#step.param<"', 1)[1].split('"', 1)[0]
            for line in model_text.splitlines()
            if "step.param" in line and ", frozen>" in line}


def leaves(params, shapes):
    """PyTorch tensors of every parameter; those in `shapes` (the trained
    ones) require grad."""
    trained = dict(shapes)
    return {n: torch.tensor(w, requires_grad=n in trained) for n, w in params.items()}


def param_shapes(model_text):
    """(name, shape) of every parameter, in argument order, from the model."""
    out = []
    for line in model_text.splitlines():
        line = line.strip()
        if "step.param" not in line:
            continue
        shape = line.split("tensor<", 1)[1].split(">", 1)[0].split("x")[:-1]
        name = line.split('#step.param<"', 1)[1].split('"', 1)[0]
        out.append((name, [int(d) for d in shape]))
    return out


def draw(shapes, a, rng):
    """Weights off their initialisation: normal(0.02)-scale matrices, norms
    near 1 and biases near 0 with noise, so no gradient is degenerate."""
    params = {}
    for name, shape in shapes:
        if len(shape) >= 2:
            w = rng.normal(0.0, 0.02, shape)
        elif "bias" in name:
            w = rng.normal(0.0, 0.02, shape)
        else:
            w = 1.0 + rng.normal(0.0, 0.1, shape)
        params[name] = w.astype(np.float32)
    tokens = rng.integers(0, a.vocab, (a.batch, a.seq)).astype(np.int32)
    targets = rng.integers(0, a.vocab, (a.batch, a.seq)).astype(np.int32)
    if a.pad_token is not None:
        # Padding: every other row starts with 3 pad tokens (their queries
        # see no key at all), every third row has a padded key in the middle.
        tokens[::2, :3] = a.pad_token
        tokens[1::3, a.seq // 2] = a.pad_token
    if a.ignore_index is not None:
        # An SFT batch: each row's prompt (a random length, at least one
        # target left) is not counted.
        for row in targets:
            row[:rng.integers(0, a.seq)] = a.ignore_index
    return params, tokens, targets


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"torch_check: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")


def optimizer_flags(opt):
    flags = [f"--optimizer={opt.optimizer}"]
    options = []
    if opt.optimizer == "sgd":
        options.append(f"momentum={opt.momentum} nesterov={str(opt.nesterov).lower()}")
    if opt.epsilon != EPS:
        options.append(f"epsilon={opt.epsilon!r}")
    if options:
        flags.append("--optimizer-options=" + " ".join(options))
    return flags


def run_stepc(backend, model, inputs, lr, out, opt, params):
    """Runs one step; returns name -> array for loss, grad_norm, grad.*,
    param.*, exp_avg.* (and exp_avg_sq.* for adamw and adam)."""
    bindir = os.environ.get("STEPC_BIN", os.path.join(ROOT, "build", "bin"))
    load = lambda name: np.load(os.path.join(out, name + ".npy")).astype(np.float64)
    precision = [f"--precision={opt.precision}"]
    # (With dropout the gradient function draws unkeyed, at step 0: only
    # the training step, at step 1, is compared.)
    seed = [f"--seed={opt.seed}"]
    if backend == "interp" and opt.precision == "fp32" and not opt.dropout:
        for mode in ("--grad", "--train-step"):
            run([os.path.join(bindir, "stepc-interp"), model, mode, f"--inputs={inputs}",
                 f"--output={out}", f"--lr={lr}", "--step=1"] + optimizer_flags(opt))
        return load
    if backend == "interp":  # bf16 or dropout: the training step only
        run([os.path.join(bindir, "stepc-interp"), model, "--train-step", f"--inputs={inputs}",
             f"--output={out}", f"--lr={lr}", "--step=1"] + optimizer_flags(opt) + precision +
            seed)
    else:
        # cpu: compile step.so, run one step at a constant lr on the same
        # weights and batch.
        so = os.path.join(os.path.dirname(model), "step.so")
        run([os.path.join(bindir, "stepc"), model, "-o", so, "--target=cpu"] +
            optimizer_flags(opt) + precision)
        os.makedirs(out, exist_ok=True)
        run([os.path.join(bindir, "stepc-run"), so, f"--init-npy={inputs}",
             f"--batch-npy={inputs}", "--steps=1", "--warmup=0", "--min-lr-ratio=1",
             f"--lr={lr}", f"--save-npy={out}"] + seed)
    # The training step returns no gradients; after one step the first state
    # holds the clipped gradient exactly (AdamW: (1 - β1)·g·scale; Adam and
    # SGD add the L2 term wd·p; Lion: (1 - β2)·g·scale), so g is read back
    # from it.
    norm = float(load("grad_norm"))
    scale = min(1.0, MAX_NORM / (norm + 1e-6))

    def get(name):
        if name.startswith("grad."):
            n = name[len("grad."):]
            state = load("exp_avg." + n)
            l2 = WEIGHT_DECAY * params[n] if params[n].ndim >= 2 else 0.0
            if opt.optimizer == "adamw" or (opt.optimizer == "muon" and
                                            not is_muon(n, params[n].shape)):
                return state / ((1 - BETAS[0]) * scale)
            if opt.optimizer == "muon":
                return state / ((1 - MUON_MOMENTUM) * scale)
            if opt.optimizer == "adam":
                return (state / (1 - BETAS[0]) - l2) / scale
            if opt.optimizer == "sgd":
                return (state - l2) / scale
            return state / ((1 - BETAS[1]) * scale)  # lion
        return load(name)
    return get


def lion_step(params, lr, betas, weight_decays, state):
    """Lion's reference update (lucidrains/lion-pytorch), op for op."""
    for p, wd in zip(params, weight_decays):
        g = p.grad
        m = state.setdefault(p, torch.zeros_like(p))
        with torch.no_grad():
            p.mul_(1 - lr * wd)
            update = m.clone().mul_(betas[0]).add(g, alpha=1 - betas[0]).sign_()
            p.add_(update, alpha=-lr)
            m.mul_(betas[1]).add_(g, alpha=1 - betas[1])


MUON_MOMENTUM, MUON_NS = 0.95, (3.4445, -4.7750, 2.0315)  # step-optimizer's Muon defaults


def is_muon(name, shape):
    """The matrices Muon updates: rank 2 inside a repeated block."""
    return len(shape) == 2 and name.startswith(("h.", "layers."))


def muon_step(params, lr, weight_decay, state, steps=5):
    """torch.optim.Muon's update (PyTorch 2.9, Nesterov, match_rms_adamw), in
    f32 torch ops: momentum lerp, Newton-Schulz on the wide orientation,
    decoupled decay, lr·0.2·sqrt(max(rows, cols))."""
    a, b, c = MUON_NS
    with torch.no_grad():
        for p in params:
            g = p.grad
            buf = state.setdefault(p, torch.zeros_like(p))
            buf.lerp_(g, 1 - MUON_MOMENTUM)
            u = g.lerp(buf, MUON_MOMENTUM)
            tall = u.size(0) > u.size(1)
            x = u.T if tall else u
            x = x / x.norm().clamp(min=1e-7)
            for _ in range(steps):
                gram = x @ x.T
                x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
            if tall:
                x = x.T
            p.mul_(1 - lr * weight_decay)
            p.add_(x, alpha=-lr * 0.2 * max(p.shape) ** 0.5)


def make_optimizer(p, shapes, lr, opt_args):
    """(step, state): one update of the parameters `p` from their .grad, and
    parameter -> {"exp_avg": ..., ["exp_avg_sq": ...]}; the state persists
    across steps."""
    decay = [p[n] for n, s in shapes if len(s) >= 2]
    no_decay = [p[n] for n, s in shapes if len(s) < 2]
    groups = [{"params": decay, "weight_decay": WEIGHT_DECAY},
              {"params": no_decay, "weight_decay": 0.0}]
    kind, eps = opt_args.optimizer, opt_args.epsilon
    own_state = {}
    if kind == "muon":
        matrices = [p[n] for n, s in shapes if is_muon(n, s)]
        rest = [{"params": [p[n] for n, s in shapes if len(s) >= 2 and not is_muon(n, s)],
                 "weight_decay": WEIGHT_DECAY},
                {"params": [p[n] for n, s in shapes if len(s) < 2], "weight_decay": 0.0}]
        opt = torch.optim.AdamW(rest, lr=lr, betas=BETAS, eps=eps)

        def step():
            muon_step(matrices, lr, WEIGHT_DECAY, own_state)
            opt.step()

        def state():
            out = dict(opt.state)
            out.update({q: {"exp_avg": m} for q, m in own_state.items()})
            return out
        return step, state
    if kind == "lion":
        def step():
            lion_step([p[n] for n, _ in shapes], lr, BETAS,
                      [WEIGHT_DECAY if len(s) >= 2 else 0.0 for _, s in shapes], own_state)
        return step, lambda: {q: {"exp_avg": m} for q, m in own_state.items()}
    if kind == "sgd":
        opt = torch.optim.SGD(groups, lr=lr, momentum=opt_args.momentum,
                              nesterov=opt_args.nesterov)
    else:
        opt = (torch.optim.AdamW if kind == "adamw" else torch.optim.Adam)(
            groups, lr=lr, betas=BETAS, eps=eps)
    return opt.step, lambda: {q: ({"exp_avg": s["momentum_buffer"]} if kind == "sgd" else s)
                              for q, s in opt.state.items()}


def clip(p, shapes):
    """clip_grad_norm_'s rule, with the norm accumulated in f64: PyTorch
    1.13's f32 torch.norm drifts by 1e-5 relative on 18.9M parameters
    (gpt-d2l), more than the tolerance, while the f64 norm of the same f32
    gradients agrees with an f64 run of the model to 1e-8. Returns the norm."""
    norm = torch.sqrt(sum((p[n].grad.double() ** 2).sum() for n, _ in shapes))
    coef = torch.clamp(MAX_NORM / (norm + 1e-6), max=1.0).float()
    for n, _ in shapes:
        p[n].grad.mul_(coef)
    return norm


def run_torch(a, shapes, params, tokens, targets, lr, opt_args, grads_from=None):
    """PyTorch's step (`shapes`: the trained parameters). With `grads_from`,
    the optimizer (clip + AdamW) runs on those gradients instead of
    PyTorch's own."""
    p = leaves(params, shapes)
    loss_fn = gpt_loss if a.arch == "gpt" else llama_loss
    autocast = opt_args.precision == "bf16" and opt_args.torch_precision != "fp32"
    MOE_LOADS.clear()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = loss_fn(a, p, torch.tensor(tokens, dtype=torch.long),
                       torch.tensor(targets, dtype=torch.long),
                       dropouts(a, opt_args.seed, step=1)).float()
    loss.backward()
    grads = {n: p[n].grad.detach().clone() for n, _ in shapes}
    if grads_from is not None:
        for n, _ in shapes:
            p[n].grad = torch.tensor(grads_from("grad." + n), dtype=torch.float32)
    norm = clip(p, shapes)
    step, state_of = make_optimizer(p, shapes, lr, opt_args)
    step()
    balance(a, p)
    state = state_of()
    out = {"loss": loss.item(), "grad_norm": norm.item()}
    out.update(final_tensors(p, shapes, state, opt_args.optimizer))
    for n, _ in shapes:
        out["grad." + n] = grads[n].double().numpy()
    return out


def final_tensors(p, shapes, state, kind):
    """param.*, exp_avg.* (and exp_avg_sq.* where the optimizer keeps it) of
    the trained parameters `shapes`; param.* of the frozen ones."""
    shapes_of = dict(shapes)
    out = {"param." + n: t.detach().double().numpy() for n, t in p.items() if n not in shapes_of}
    for n, _ in shapes:
        out["param." + n] = p[n].detach().double().numpy()
        out["exp_avg." + n] = state[p[n]]["exp_avg"].double().numpy()
        if kind in ("adamw", "adam") or (kind == "muon" and not is_muon(n, shapes_of[n])):
            out["exp_avg_sq." + n] = state[p[n]]["exp_avg_sq"].double().numpy()
    return out


def run_torch_steps(a, shapes, params, tokens, targets, lr, opt_args):
    """opt_args.steps PyTorch steps on the one batch at a constant lr: each
    step's loss and gradient norm, then the final tensors."""
    p = leaves(params, shapes)
    loss_fn = gpt_loss if a.arch == "gpt" else llama_loss
    step, state_of = make_optimizer(p, shapes, lr, opt_args)
    losses, norms = [], []
    for k in range(1, opt_args.steps + 1):
        for n, _ in shapes:
            p[n].grad = None
        MOE_LOADS.clear()
        loss = loss_fn(a, p, torch.tensor(tokens, dtype=torch.long),
                       torch.tensor(targets, dtype=torch.long), dropouts(a, opt_args.seed, step=k))
        loss.backward()
        norms.append(clip(p, shapes).item())
        losses.append(loss.item())
        step()
        balance(a, p)
    final = final_tensors(p, shapes, state_of(), opt_args.optimizer)
    # The last step's metrics: each layer's expert loads (equal routing
    # decisions give equal shares) and the balance loss's term.
    prefix = "h" if a.arch == "gpt" else "l"
    layer = 0
    for item in MOE_LOADS:
        if isinstance(item, tuple) and item[0] == "dropped":  # the last layer's
            final[f"metric.{prefix}{layer - 1}.dropped"] = item[1]
        elif isinstance(item, tuple):
            final["metric." + item[0]] = item[1]
        else:
            final[f"metric.{prefix}{layer}.expert_load"] = item
            layer += 1
    return losses, norms, final


def check_steps(own, a, shapes, params, tokens, targets, work, gen_argv):
    """--steps N: the compiled CPU step.so trains N steps (stepc-run) beside
    PyTorch; every step's loss and gradient norm and the final parameters
    and optimizer state are compared."""
    bindir = os.environ.get("STEPC_BIN", os.path.join(ROOT, "build", "bin"))
    model, inputs, out = (os.path.join(work, x) for x in ("model.mlir", "inputs", "out"))
    so = os.path.join(work, "step.so")
    run([os.path.join(bindir, "stepc"), model, "-o", so, "--target=cpu"] + optimizer_flags(own))
    os.makedirs(out, exist_ok=True)
    metrics = os.path.join(out, "metrics.jsonl")
    run([os.path.join(bindir, "stepc-run"), so, f"--init-npy={inputs}", f"--batch-npy={inputs}",
         f"--steps={own.steps}", "--warmup=0", "--min-lr-ratio=1", f"--lr={own.lr}",
         f"--save-npy={out}", f"--metrics={metrics}", f"--seed={own.seed}"])
    with open(metrics) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    losses, norms, final = run_torch_steps(a, shapes, params, tokens, targets, own.lr, own)
    errors = {}
    for k, row in enumerate(rows):
        errors[f"loss@{k + 1}"] = abs(row["loss"] - losses[k]) / abs(losses[k])
        errors[f"grad_norm@{k + 1}"] = abs(row["grad_norm"] - norms[k]) / abs(norms[k])
    # Lion's update is lr·sign(c): where c is f32 noise (a gradient that is
    # zero in exact arithmetic, like the key bias's, or one that cancels) the
    # two implementations step ±lr apart, so its parameters and moment are
    # gated on the elements off by more than the tolerance being that rare
    # (at most --lion-flips of them; the kernel itself is bit-exact against
    # PyTorch on identical inputs, test/Runtime/optimizers_vs_torch.py).
    off, elements = 0, 0
    for key, ref in final.items():
        mine = np.load(os.path.join(out, key + ".npy")).astype(np.float64)
        scale = np.max(np.abs(ref))
        diff = np.abs(mine - ref)
        if own.optimizer == "lion":
            off += int(np.sum(diff > own.tolerance * scale))
            elements += ref.size
            continue
        errors[key] = float(np.max(diff) / scale) if scale > 0 else float(np.max(np.abs(mine)))
    worst = max(errors, key=errors.get)
    print(json.dumps({"config": " ".join(gen_argv), "backend": "cpu", "optimizer": own.optimizer,
                      "steps": own.steps, "losses": [r["loss"] for r in rows],
                      "torch_losses": losses, "max_rel_err": errors[worst], "worst": worst,
                      "tolerance": own.tolerance, "rel_err": errors,
                      **({"lion_elements_off": off, "lion_elements": elements}
                         if own.optimizer == "lion" else {})}, indent=1))
    flips_ok = own.optimizer != "lion" or off <= own.lion_flips * elements
    return 0 if len(rows) == own.steps and errors[worst] <= own.tolerance and flips_ok else 1


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], add_help=False)
    p.add_argument("--backend", choices=["interp", "cpu"], default="interp")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--keep", help="keep the model, inputs and outputs in this directory")
    p.add_argument("--optimizer", choices=["adamw", "adam", "sgd", "lion", "muon"],
                   default="adamw")
    p.add_argument("--momentum", type=float, default=0.9, help="sgd")
    p.add_argument("--nesterov", action="store_true", help="sgd")
    p.add_argument("--lion-flips", type=float, default=1e-3,
                   help="--steps with lion: the largest fraction of parameter and moment "
                        "elements allowed off by more than --tolerance (sign flips)")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp8"], default="fp32",
                   help="fp8: stepc --precision=fp8 against PyTorch in fp32 (with a tolerance)")
    p.add_argument("--steps", type=int, default=1,
                   help="> 1: train that many steps on the CPU step.so and compare each "
                        "step's loss and norm and the final parameters and state")
    p.add_argument("--epsilon", type=float, default=EPS,
                   help="AdamW/Adam epsilon (a larger one keeps f32 noise in near-zero "
                        "gradients from moving weights by ±lr over several steps)")
    p.add_argument("--torch-precision", choices=["same", "fp32"], default="same",
                   help="fp32: PyTorch without autocast, whatever --precision says (the "
                   "reference on a CPU whose own bf16 GEMMs are emulated and lossy)")
    p.add_argument("-h", "--help", action="store_true")
    own, gen_argv = p.parse_known_args(argv)
    if own.help:
        print(__doc__)
        return 0
    torch.manual_seed(own.seed)
    MOE_LOADS.clear()  # what an earlier configuration's forward recorded
    a, text = gen_model.generate(gen_argv)
    own.dropout = a.dropout
    if a.dtype != "f32":
        sys.exit("torch_check: compares f32 models; drop --dtype")
    shapes = param_shapes(text)
    params, tokens, targets = draw(shapes, a, np.random.default_rng(own.seed))
    # PyTorch trains, clips and updates the trained parameters only.
    frozen = frozen_names(text)
    shapes = [(n, s) for n, s in shapes if n not in frozen]

    work = own.keep or tempfile.mkdtemp(prefix="torch_check.")
    os.makedirs(os.path.join(work, "inputs"), exist_ok=True)
    model = os.path.join(work, "model.mlir")
    with open(model, "w") as f:
        f.write(text)
    for name, w in params.items():
        np.save(os.path.join(work, "inputs", name + ".npy"), w)
    np.save(os.path.join(work, "inputs", "tokens.npy"), tokens)
    np.save(os.path.join(work, "inputs", "targets.npy"), targets)

    if own.steps > 1:
        if own.backend != "cpu" or own.precision != "fp32":
            sys.exit("torch_check: --steps > 1 compares the fp32 CPU step.so (--backend cpu)")
        rc = check_steps(own, a, shapes, params, tokens, targets, work, gen_argv)
        if not own.keep:
            import shutil
            shutil.rmtree(work, ignore_errors=True)
        return rc
    ours = run_stepc(own.backend, model, os.path.join(work, "inputs"), own.lr,
                     os.path.join(work, "out"), own, params)
    theirs = run_torch(a, shapes, params, tokens, targets, own.lr, own)
    # The optimizer is checked on stepc's own gradients: AdamW's first step
    # moves each weight by about lr·sign(g), so a gradient that is f32 noise
    # (|g| ~ 1e-9 where max |g| ~ 1e-2) moves by ±lr in either
    # implementation. Gradients are compared with PyTorch's directly above.
    optimizer = run_torch(a, shapes, params, tokens, targets, own.lr, own, grads_from=ours)

    def rel(mine, ref):
        scale = np.max(np.abs(ref))
        return float(np.max(np.abs(mine - ref)) / scale) if scale > 0 else float(
            np.max(np.abs(mine)))

    errors, readback = {}, {}
    # (On the CPU the gradient is read back from the first state; with an L2
    # term (adam, sgd) that subtracts wd·p from g + wd·p, which cancels where
    # wd·p dominates: there the gradient is reported, not gated. The adamw
    # run gates the same gradients.)
    lossy = ((own.backend == "cpu" or own.precision == "bf16" or own.dropout) and
             own.optimizer in ("adam", "sgd"))
    for key in ("loss", "grad_norm"):
        errors[key] = abs(float(ours(key)) - theirs[key]) / abs(theirs[key])
    for key in theirs:
        if key.startswith("grad."):
            (readback if lossy else errors)[key] = rel(ours(key), theirs[key])
        elif key not in errors:
            errors[key] = rel(ours(key), optimizer[key])
    end_to_end = max(rel(ours(k), theirs[k]) for k in theirs if k.startswith("param."))
    worst = max(errors, key=errors.get)
    report = {
        "config": " ".join(gen_argv),
        "backend": own.backend,
        "optimizer": own.optimizer,
        "precision": own.precision,
        "loss": float(ours("loss")),
        "torch_loss": theirs["loss"],
        "grad_norm": float(ours("grad_norm")),
        "torch_grad_norm": theirs["grad_norm"],
        "max_rel_err": errors[worst],
        "worst": worst,
        "tolerance": own.tolerance,
        "param_rel_err_with_torch_grads": end_to_end,
        "rel_err": errors,
    }
    if readback:
        report["grad_readback_rel_err"] = max(readback.values())
    print(json.dumps(report, indent=1, sort_keys=False))
    if not own.keep:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    return 0 if errors[worst] <= own.tolerance else 1


def main_configs(path):
    """--configs FILE: every line's configuration; 1 if any failed."""
    import shlex
    failed = []
    try:
        with open(path) as f:
            configs = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    except OSError as e:
        sys.exit(f"torch_check: cannot read --configs {path}: {e.strerror}")
    if not configs:
        sys.exit(f"torch_check: --configs {path} holds no configuration")
    for line in configs:
        print(f"== torch_check.py {line}", flush=True)
        if main(shlex.split(line)) != 0:
            failed.append(line)
    for line in failed:
        print(f"FAILED: torch_check.py {line}")
    print(f"torch_check: {len(configs)} configurations, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--configs":
        sys.exit(main_configs(sys.argv[2]))
    sys.exit(main())
