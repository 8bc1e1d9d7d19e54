#!/usr/bin/env python3
"""Writes a GPT or Llama loss function in the `step` dialect.

    gen_model.py --arch gpt|llama --vocab V --seq T --dim D --layers L \\
        --heads H [--kv-heads K] [--ffn-multiple M] --batch B -o FILE
    gen_model.py --preset gpt-capstone -o FILE
    gen_model.py --all-presets examples       # every shipped model

GPT (GPT-2 / nanoGPT): learned or rotary positions, pre-LN, biased Linears,
exact-erf GELU (or tanh), tied head; --dropout P adds GPT-2's dropouts. Llama: RMSNorm, rotary positions,
SwiGLU MLP, grouped-query attention, untied head. Linear weights use
PyTorch's nn.Linear layout [out, in]. --moe-experts E --moe-top-k K makes
each block's MLP a mixture of E experts of the same shape (a linear router,
softmax, the top K with their probabilities renormalised as gates, dropless
dispatch, grouped products, combine), --moe-shared 1 adds the dense MLP as a
shared expert (DeepSeek's), --moe-aux-loss C a sequence-wise load-balancing
loss (DeepSeek-V3's: Switch's E·Σ f·P within each sequence, averaged),
--moe-bias-update R DeepSeek-V3's balancing without one (a routing bias the
step moves by R · sign(1/E - load)). Each MoE layer returns its expert loads
as a metric.
Standard library only.
"""

import argparse
import math
import os
import re
import sys

# The MLIR writer is the Python package's (python/stepc), shared with the
# PyTorch importer.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from stepc.mlir_writer import FunctionWriter, eps_attr  # noqa: E402

PRESETS = {
    "gpt-small": ["--arch", "gpt", "--vocab", "512", "--seq", "64", "--dim", "64",
                  "--layers", "2", "--heads", "4", "--batch", "8"],
    "gpt-capstone": ["--arch", "gpt", "--vocab", "512", "--seq", "128", "--dim", "128",
                     "--layers", "4", "--heads", "4", "--batch", "32"],
    "gpt2-124m": ["--arch", "gpt", "--vocab", "50304", "--seq", "1024", "--dim", "768",
                  "--layers", "12", "--heads", "12", "--batch", "8"],
    "gpt-d2l": ["--arch", "gpt", "--pos", "rotary", "--vocab", "28", "--seq", "128",
                "--dim", "512", "--layers", "6", "--heads", "8", "--batch", "64"],
    "llama-debug": ["--arch", "llama", "--vocab", "512", "--seq", "256", "--dim", "128",
                    "--layers", "4", "--heads", "4", "--kv-heads", "2",
                    "--ffn-multiple", "128", "--batch", "8"],
    "llama-s": ["--arch", "llama", "--vocab", "32000", "--seq", "2048", "--dim", "768",
                "--layers", "12", "--heads", "12", "--kv-heads", "4",
                "--ffn-multiple", "256", "--batch", "4"],
    # gpt-small's MLPs as 8 experts, top-2, beside a shared expert, with the
    # sequence-wise balance loss: the mixture-of-experts example.
    "gpt-moe": ["--arch", "gpt", "--vocab", "512", "--seq", "64", "--dim", "64",
                "--layers", "2", "--heads", "4", "--batch", "8", "--moe-experts", "8",
                "--moe-top-k", "2", "--moe-shared", "1", "--moe-aux-loss", "0.01"],
    # TinyLlama's shapes (1.1B parameters): the GPU benchmark's second model.
    "llama-1b": ["--arch", "llama", "--vocab", "32000", "--seq", "2048", "--dim", "2048",
                 "--layers", "22", "--heads", "32", "--kv-heads", "4",
                 "--ffn-multiple", "256", "--batch", "4"],
}


def normal(std):
    return f"normal({float(std)!r})"


def scaled_normal(std, layers):
    return f"scaled_normal({float(std)!r}, {layers})"


def gpt(a, w):
    B, T, D, H, V, L = a.batch, a.seq, a.dim, a.heads, a.vocab, a.layers
    hd = D // H
    std = a.init_std
    wte = w.param("wte", [V, D], normal(std))
    wpe = w.param("wpe", [T, D], normal(std)) if a.pos == "learned" else None
    blocks = []
    for l in range(L):
        p = f"h.{l}."
        blocks.append(dict(
            ln1w=w.param(p + "ln_1.weight", [D], "ones", block=l),
            ln1b=w.param(p + "ln_1.bias", [D], "zeros", block=l),
            attw=w.param(p + "attn.c_attn.weight", [3 * D, D], normal(std), block=l),
            attb=w.param(p + "attn.c_attn.bias", [3 * D], "zeros", block=l),
            prjw=w.param(p + "attn.c_proj.weight", [D, D], scaled_normal(std, L), block=l),
            prjb=w.param(p + "attn.c_proj.bias", [D], "zeros", block=l),
            ln2w=w.param(p + "ln_2.weight", [D], "ones", block=l),
            ln2b=w.param(p + "ln_2.bias", [D], "zeros", block=l),
        ))
        if dense_mlp(a):
            blocks[-1].update(
                fcw=w.param(p + "mlp.c_fc.weight", [4 * D, D], normal(std), block=l),
                fcb=w.param(p + "mlp.c_fc.bias", [4 * D], "zeros", block=l),
                mpw=w.param(p + "mlp.c_proj.weight", [D, 4 * D], scaled_normal(std, L), block=l),
                mpb=w.param(p + "mlp.c_proj.bias", [D], "zeros", block=l))
        if a.moe_experts:
            E = a.moe_experts
            blocks[-1].update(
                router=w.param(p + "moe.router.weight", [E, D], normal(std), block=l),
                router_bias=router_bias(w, a, p, f"h{l}", l),
                fc_e=w.param(p + "moe.experts.c_fc.weight", [E, 4 * D, D], normal(std), block=l),
                proj_e=w.param(p + "moe.experts.c_proj.weight", [E, D, 4 * D],
                               scaled_normal(std, L), block=l))
    lnfw = w.param("ln_f.weight", [D], "ones")
    lnfb = w.param("ln_f.bias", [D], "zeros")
    tokens = w.input("tokens", [B, T])
    targets = w.input("targets", [B, T])

    mask = w.key_padding_mask(tokens, a.pad_token, "pad") if a.pad_token is not None else None
    x = w.embedding(wte, tokens, "tok_emb")
    if wpe is not None:
        pos = w.broadcast(wpe, [B, T, D], "pos_emb")
        x = w.binary("add", x, pos, "x")
    x = w.dropout(x, a.dropout, "emb_drop")
    gelu = " approximate tanh" if a.gelu == "tanh" else ""
    aux = []
    for l, p in enumerate(blocks):
        n = f"h{l}_"
        h = w.layer_norm(x, p["ln1w"], p["ln1b"], a.norm_eps, n + "ln_1")
        qkv = w.linear(h, p["attw"], p["attb"], n + "qkv")
        q = w.slice(qkv, 2, 0, D, n + "q")
        k = w.slice(qkv, 2, D, D, n + "k")
        v = w.slice(qkv, 2, 2 * D, D, n + "v")
        if a.pos == "rotary":
            q = w.rotary(q, hd, a.rope_theta, n + "q_rot")
            k = w.rotary(k, hd, a.rope_theta, n + "k_rot")
        att = w.attention(q, k, v, H, H, hd, n + "att", mask)
        att = w.dropout(w.linear(att, p["prjw"], p["prjb"], n + "attn_out"), a.dropout,
                        n + "attn_drop")
        x = w.binary("add", x, att, n + "x_attn")
        h = w.layer_norm(x, p["ln2w"], p["ln2b"], a.norm_eps, n + "ln_2")
        f = None
        if dense_mlp(a):
            f = w.unary("gelu", w.linear(h, p["fcw"], p["fcb"], n + "fc"), n + "gelu", gelu)
            f = w.linear(f, p["mpw"], p["mpb"], n + "mlp_out")
        if a.moe_experts:
            def experts(rows, counts, p=p, n=n):
                hid = w.grouped_matmul(rows, p["fc_e"], counts, n + "moe_fc")
                act = w.unary("gelu", hid, n + "moe_gelu", gelu)
                return w.grouped_matmul(act, p["proj_e"], counts, n + "moe_proj")
            y = moe(w, a, h, p["router"], experts, n, aux, p["router_bias"])
            f = y if f is None else w.binary("add", f, y, n + "mlp_shared")
        f = w.dropout(f, a.dropout, n + "mlp_drop")
        x = w.binary("add", x, f, n + "x_mlp")
    x = w.layer_norm(x, lnfw, lnfb, a.norm_eps, "ln_f")
    logits = w.matmul(x, wte, "logits")  # tied head
    loss = w.cross_entropy(logits, targets, "loss", a.ignore_index, a.label_smoothing, a.z_loss)
    return with_aux_loss(w, a, loss, aux)


def dense_mlp(a):
    """A block has the dense MLP: no experts, or the shared expert."""
    return not a.moe_experts or a.moe_shared


def router_bias(w, a, prefix, layer, block):
    """--moe-bias-update R: the layer's routing bias [E], frozen (no
    gradient) and moved by the step after the optimizer by
    R · sign(1/E − load) from the layer's expert loads (DeepSeek-V3's
    balancing without an auxiliary loss); None without."""
    if not a.moe_bias_update:
        return None
    return w.param(prefix + "moe.router_bias", [a.moe_experts], "zeros", block=block, frozen=True,
                   balance=(layer + ".expert_load", a.moe_bias_update))


def moe(w, a, h, router, experts, n, aux, bias=None):
    """The mixture of experts on h [B, T, D]: router probabilities over E,
    the top K renormalised as gates (picked by probability + `bias` where
    there is one, the gates the probabilities themselves), dispatch,
    `experts(rows, counts)`, combine. Appends the layer's load-balancing term to `aux`: per
    sequence, Σ_e f_e · P_e with f_e its fraction of routed pairs at e and
    P_e its mean probability of e (only P_e carries a gradient), averaged
    over the sequences — a mean over rows like the loss's, so data
    parallelism and micro-batches leave it unchanged."""
    B, T, D = h.shape
    E, K = a.moe_experts, a.moe_top_k
    flat = w.reshape(h, [B * T, D], n + "moe_in")
    probs = w.softmax(w.matmul(flat, router, n + "router"), n + "router_probs")
    if bias is None:
        gate, expert = w.top_k(probs, K, n + "moe")
    else:
        # (In [B, T, E]: data parallelism splits a broadcast's batch there.)
        rows3 = w.reshape(probs, [B, T, E], n + "probs_bte")
        scores = w.binary("add", rows3, w.broadcast(bias, [B, T, E], n + "bias_all"),
                          n + "router_scores")
        _, expert = w.top_k(w.reshape(scores, [B * T, E], n + "scores"), K, n + "moe")
        gate = w.emit(n + "moe_gate_p", [B * T, K], f"step.gather {probs.name}, {expert.name} "
                                                    f"dim 1 : ({probs.type}, {expert.type}) -> "
                                                    f"{{out}}")
    if K > 1:
        total = w.reduce("reduce_sum", gate, [1], n + "gate_sum", keep=True)
        gate = w.binary("div", gate, w.broadcast(total, gate.shape, n + "gate_total"),
                        n + "gate_norm")
    # A capacity factor F: each expert takes at most ceil(F·T·K/E) pairs of
    # each sequence (the first in token order), the rest are dropped.
    # (No expert can take more than a sequence's T·K pairs.)
    capacity = None
    if a.moe_capacity_factor:
        capacity = (min(T * K, max(1, math.ceil(a.moe_capacity_factor * T * K / E))), T)
    rows, counts = w.moe_dispatch(flat, expert, E, n + "moe", capacity)
    out = w.moe_combine(experts(rows, counts), gate, expert, E, n + "moe_out", capacity)
    # share[b, e]: sequence b's fraction of routed pairs at expert e (a
    # one-hot of each pair's expert, [B, T, K, E], averaged over the sequence).
    hit = w.one_hot_experts(expert, E, B, n + "moe")
    share = w.reduce("reduce_mean", hit, [1, 2], n + "load_share")
    # The metric: the batch's fraction of routed pairs at each expert.
    w.metric(n.rstrip("_") + ".expert_load", w.reduce("reduce_mean", share, [0], n + "load"))
    if capacity:
        w.metric(n.rstrip("_") + ".dropped", w.dropped_share(hit, counts, n + "moe"))
    if a.moe_aux_loss:
        mean_p = w.reduce("reduce_mean", w.reshape(probs, [B, T, E], n + "probs_rows"), [1],
                          n + "mean_prob")
        term = w.reduce("reduce_sum", w.binary("mul", share, mean_p, n + "balance"), [1],
                        n + "balance_rows")
        aux.append(w.reduce("reduce_mean", term, [0], n + "balance_mean"))
    return w.reshape(out, [B, T, D], n + "moe_y")


def with_aux_loss(w, a, loss, aux):
    """loss + C · E · Σ_layers aux (--moe-aux-loss C)."""
    if not aux:
        return loss
    total = aux[0]
    for k, term in enumerate(aux[1:]):
        total = w.binary("add", total, term, f"aux_{k}")
    scale = w.emit("aux_coef", [], f"step.constant "
                                   f"dense<{a.moe_aux_loss * a.moe_experts!r}> : {{out}}")
    aux_loss = w.binary("mul", total, scale, "aux_loss")
    w.metric("moe_aux_loss", aux_loss)
    return w.binary("add", loss, aux_loss, "loss_total")


def llama_ffn_hidden(dim, multiple):
    """Meta's rule: 2/3 of 4·dim, rounded up to a multiple of `multiple`."""
    hidden = int(2 * (4 * dim) / 3)
    return multiple * ((hidden + multiple - 1) // multiple)


def llama(a, w):
    B, T, D, H, V, L = a.batch, a.seq, a.dim, a.heads, a.vocab, a.layers
    K = a.kv_heads
    hd = D // H
    F = llama_ffn_hidden(D, a.ffn_multiple)
    std = a.init_std
    emb = w.param("tok_embeddings", [V, D], normal(std))
    blocks = []
    for l in range(L):
        p = f"layers.{l}."
        blocks.append(dict(
            an=w.param(p + "attention_norm", [D], "ones", block=l),
            wq=w.param(p + "attention.wq", [H * hd, D], normal(std), block=l),
            wk=w.param(p + "attention.wk", [K * hd, D], normal(std), block=l),
            wv=w.param(p + "attention.wv", [K * hd, D], normal(std), block=l),
            wo=w.param(p + "attention.wo", [D, H * hd], scaled_normal(std, L), block=l),
            fn=w.param(p + "ffn_norm", [D], "ones", block=l),
        ))
        if dense_mlp(a):
            blocks[-1].update(
                w1=w.param(p + "feed_forward.w1", [F, D], normal(std), block=l),
                w2=w.param(p + "feed_forward.w2", [D, F], scaled_normal(std, L), block=l),
                w3=w.param(p + "feed_forward.w3", [F, D], normal(std), block=l))
        if a.moe_experts:
            E = a.moe_experts
            blocks[-1].update(
                router=w.param(p + "moe.router.weight", [E, D], normal(std), block=l),
                router_bias=router_bias(w, a, p, f"l{l}", l),
                w1_e=w.param(p + "moe.experts.w1", [E, F, D], normal(std), block=l),
                w2_e=w.param(p + "moe.experts.w2", [E, D, F], scaled_normal(std, L), block=l),
                w3_e=w.param(p + "moe.experts.w3", [E, F, D], normal(std), block=l))
    norm = w.param("norm", [D], "ones")
    out = w.param("output", [V, D], normal(std))
    tokens = w.input("tokens", [B, T])
    targets = w.input("targets", [B, T])

    mask = w.key_padding_mask(tokens, a.pad_token, "pad") if a.pad_token is not None else None
    x = w.dropout(w.embedding(emb, tokens, "tok_emb"), a.dropout, "emb_drop")
    aux = []
    for l, p in enumerate(blocks):
        n = f"l{l}_"
        h = w.rms_norm(x, p["an"], a.norm_eps, n + "attention_norm")
        q = w.rotary(w.matmul(h, p["wq"], n + "q"), hd, a.rope_theta, n + "q_rot")
        k = w.rotary(w.matmul(h, p["wk"], n + "k"), hd, a.rope_theta, n + "k_rot")
        v = w.matmul(h, p["wv"], n + "v")
        att = w.attention(q, k, v, H, K, hd, n + "att", mask)
        att = w.dropout(w.matmul(att, p["wo"], n + "attn_out"), a.dropout, n + "attn_drop")
        x = w.binary("add", x, att, n + "x_attn")
        h = w.rms_norm(x, p["fn"], a.norm_eps, n + "ffn_norm")
        m = None
        if dense_mlp(a):
            gate = w.unary("silu", w.matmul(h, p["w1"], n + "w1"), n + "silu")
            up = w.matmul(h, p["w3"], n + "w3")
            m = w.matmul(w.binary("mul", gate, up, n + "swiglu"), p["w2"], n + "ffn_out")
        if a.moe_experts:
            def experts(rows, counts, p=p, n=n):
                g = w.unary("silu", w.grouped_matmul(rows, p["w1_e"], counts, n + "moe_w1"),
                            n + "moe_silu")
                u = w.grouped_matmul(rows, p["w3_e"], counts, n + "moe_w3")
                return w.grouped_matmul(w.binary("mul", g, u, n + "moe_swiglu"), p["w2_e"],
                                        counts, n + "moe_w2")
            y = moe(w, a, h, p["router"], experts, n, aux, p["router_bias"])
            m = y if m is None else w.binary("add", m, y, n + "ffn_shared")
        m = w.dropout(m, a.dropout, n + "ffn_drop")
        x = w.binary("add", x, m, n + "x_ffn")
    x = w.rms_norm(x, norm, a.norm_eps, "norm")
    logits = w.matmul(x, out, "logits")
    loss = w.cross_entropy(logits, targets, "loss", a.ignore_index, a.label_smoothing, a.z_loss)
    return with_aux_loss(w, a, loss, aux)


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1])
    p.add_argument("--preset", choices=sorted(PRESETS), help="a shipped configuration")
    p.add_argument("--all-presets", metavar="DIR",
                   help="write every shipped model to DIR/<name>/model.mlir")
    p.add_argument("--arch", choices=["gpt", "llama"])
    p.add_argument("--vocab", type=int)
    p.add_argument("--seq", type=int)
    p.add_argument("--dim", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--kv-heads", type=int, help="llama: key/value heads (default: --heads)")
    p.add_argument("--ffn-multiple", type=int, default=256,
                   help="llama: FFN hidden size rounded up to this multiple (default 256)")
    p.add_argument("--batch", type=int)
    p.add_argument("--pos", choices=["learned", "rotary"], default=None,
                   help="gpt: position encoding (default learned; llama is always rotary)")
    p.add_argument("--gelu", choices=["exact", "tanh"], default="exact", help="gpt: GELU form")
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--norm-eps", type=float, default=1e-5)
    p.add_argument("--init-std", type=float, default=0.02)
    p.add_argument("--dropout", type=float, default=0.0, metavar="P",
                   help="dropout rate after the embedding and each attention and MLP output "
                        "(GPT-2's residual dropouts; default 0: none)")
    p.add_argument("--ignore-index", type=int, default=None, metavar="T",
                   help="targets equal to T are not counted in the loss (SFT masks prompt "
                        "tokens with -100; default: every target counts)")
    p.add_argument("--label-smoothing", type=float, default=0.0, metavar="E",
                   help="cross-entropy label smoothing in [0, 1] (default 0)")
    p.add_argument("--z-loss", type=float, default=0.0, metavar="Z",
                   help="auxiliary Z·logsumexp² per counted target (PaLM: 1e-4; default 0)")
    p.add_argument("--moe-experts", type=int, default=0, metavar="E",
                   help="each block's MLP a mixture of E experts (default 0: dense)")
    p.add_argument("--moe-top-k", type=int, default=2, metavar="K",
                   help="experts per token (default 2)")
    p.add_argument("--moe-shared", type=int, default=0, choices=[0, 1],
                   help="1: the dense MLP as a shared expert beside the routed ones")
    p.add_argument("--moe-aux-loss", type=float, default=0.0, metavar="C",
                   help="Switch load-balancing loss coefficient (e.g. 0.01; default 0: none)")
    p.add_argument("--moe-bias-update", type=float, default=0.0, metavar="R",
                   help="DeepSeek-V3's balancing without an auxiliary loss: a routing bias per "
                        "layer picks the experts (not the gates) and moves by R · sign(1/E − load) "
                        "each step (e.g. 1e-3; default 0: none)")
    p.add_argument("--moe-capacity-factor", type=float, default=0.0, metavar="F",
                   help="a fixed envelope instead of dropless routing: each expert takes at most "
                        "ceil(F·T·K/E) pairs of each sequence, the rest are dropped (counted in "
                        "the metric h<l>.dropped; default 0: dropless)")
    p.add_argument("--pad-token", type=int, default=None, metavar="T",
                   help="no query attends to a key whose token is T (a key-padding mask, "
                        "step.attention's mask operand; a row with only such keys gives 0)")
    p.add_argument("--dtype", choices=["f32", "f64"], default="f32",
                   help="parameter element type (f64 for gradient checks)")
    p.add_argument("--freeze", metavar="REGEX",
                   help="mark the parameters whose whole name matches REGEX frozen: held and "
                        "read but not trained (e.g. 'h\\.[0-9]+\\.(attn|mlp)\\..*weight')")
    p.add_argument("-o", "--output", help="output file ('-' or absent: stdout)")
    return p


def check(a, p):
    """Rejects configurations the dialect would, with the flag to blame."""
    for flag in ["arch", "vocab", "seq", "dim", "layers", "heads", "batch"]:
        if getattr(a, flag) is None:
            p.error(f"--{flag.replace('_', '-')} is required (or use --preset)")
    for flag in ["vocab", "seq", "dim", "layers", "heads", "batch", "ffn_multiple"]:
        if getattr(a, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be positive, got {getattr(a, flag)}")
    if a.dim % a.heads:
        p.error(f"--dim {a.dim} is not a multiple of --heads {a.heads}")
    if a.kv_heads is None:
        a.kv_heads = a.heads
    if a.arch == "gpt" and a.kv_heads != a.heads:
        p.error("--kv-heads applies to --arch llama only")
    if a.kv_heads < 1 or a.heads % a.kv_heads:
        p.error(f"--heads {a.heads} is not a multiple of --kv-heads {a.kv_heads}")
    if a.pos is None:
        a.pos = "rotary" if a.arch == "llama" else "learned"
    if a.arch == "llama" and a.pos != "rotary":
        p.error("--arch llama always uses rotary positions")
    if a.pos == "rotary" and (a.dim // a.heads) % 2:
        p.error(f"rotary positions need an even head dimension, got {a.dim // a.heads}")
    if not 0.0 <= a.dropout < 1.0:
        p.error(f"--dropout must be in [0, 1), got {a.dropout}")
    if not 0.0 <= a.label_smoothing <= 1.0:
        p.error(f"--label-smoothing must be in [0, 1], got {a.label_smoothing}")
    if not a.z_loss >= 0.0:
        p.error(f"--z-loss must be >= 0, got {a.z_loss}")
    if a.ignore_index is not None and not -2**31 <= a.ignore_index < 2**31:
        p.error(f"--ignore-index must fit an i32 target, got {a.ignore_index}")
    if a.moe_experts < 0 or (a.moe_experts and not 1 <= a.moe_top_k <= a.moe_experts):
        p.error(f"--moe-top-k must be in [1, --moe-experts], got {a.moe_top_k} of "
                f"{a.moe_experts}")
    if not a.moe_bias_update >= 0.0:
        p.error(f"--moe-bias-update must be >= 0, got {a.moe_bias_update}")
    if not 0.0 <= a.moe_capacity_factor < math.inf:
        p.error(f"--moe-capacity-factor must be finite and >= 0, got {a.moe_capacity_factor}")
    if (a.moe_shared or a.moe_aux_loss or a.moe_bias_update or a.moe_capacity_factor) \
            and not a.moe_experts:
        p.error("--moe-shared, --moe-aux-loss, --moe-bias-update and --moe-capacity-factor "
                "need --moe-experts")
    if not a.moe_aux_loss >= 0.0:
        p.error(f"--moe-aux-loss must be >= 0, got {a.moe_aux_loss}")
    if a.pad_token is not None and not 0 <= a.pad_token < a.vocab:
        p.error(f"--pad-token must be a token id below --vocab {a.vocab}, got {a.pad_token}")
    if a.norm_eps <= 0 or a.rope_theta <= 0 or a.init_std <= 0:
        p.error("--norm-eps, --rope-theta and --init-std must be positive")


def command_line(argv):
    return " ".join(["examples/gen_model.py"] + argv)


def generate(argv):
    p = parser()
    a = p.parse_args(argv)
    if a.preset:
        a = p.parse_args(PRESETS[a.preset] + [x for x in argv if x not in ("--preset", a.preset)])
    check(a, p)
    w = FunctionWriter(a.dtype)
    if a.freeze:
        try:
            pattern = re.compile(a.freeze)
        except re.error as e:
            p.error(f"--freeze: bad regular expression {a.freeze!r}: {e}")
        names, frozen, param = [], [], w.param

        def param_maybe_frozen(name, shape, init, block=None):
            names.append(name)
            if pattern.fullmatch(name):
                frozen.append(name)
            return param(name, shape, init, block, frozen=name in frozen)
        w.param = param_maybe_frozen
    loss = (gpt if a.arch == "gpt" else llama)(a, w)
    if a.freeze and not frozen:
        p.error(f"--freeze {a.freeze!r} matches no parameter (e.g. {names[0]!r})")
    if a.freeze and len(frozen) == len(names):
        p.error(f"--freeze {a.freeze!r} matches every parameter: nothing would train")
    header = (f"// Generated by {command_line(argv)}\n"
              f"// Do not edit: regenerate with `make examples`.\n")
    return a, w.render(header, loss)


def write(text, path):
    if path in (None, "-"):
        sys.stdout.write(text)
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def main(argv):
    a = parser().parse_args(argv)
    if a.all_presets:
        for name in sorted(PRESETS):
            _, text = generate(["--preset", name])
            write(text, os.path.join(a.all_presets, name, "model.mlir"))
        return 0
    args, text = generate(argv)
    write(text, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
