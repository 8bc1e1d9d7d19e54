#!/usr/bin/env python3
"""Writes a GPT or Llama loss function in the `step` dialect.

    gen_model.py --arch gpt|llama --vocab V --seq T --dim D --layers L \\
        --heads H [--kv-heads K] [--ffn-multiple M] --batch B -o FILE
    gen_model.py --preset gpt-capstone -o FILE
    gen_model.py --all-presets examples       # every shipped model

GPT (GPT-2 / nanoGPT): learned or rotary positions, pre-LN, biased Linears,
exact-erf GELU (or tanh), tied head. Llama: RMSNorm, rotary positions,
SwiGLU MLP, grouped-query attention, untied head. Linear weights use
PyTorch's nn.Linear layout [out, in]. Standard library only.
"""

import argparse
import os
import sys

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
}


def ttype(shape, dtype):
    """The MLIR spelling of a ranked tensor type."""
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


class Value:
    def __init__(self, name, shape, dtype):
        self.name, self.shape, self.dtype = name, list(shape), dtype

    @property
    def type(self):
        return ttype(self.shape, self.dtype)


class FunctionWriter:
    """Collects arguments and body lines of one loss function."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.args = []
        self.body = []
        self.used = set()

    def _fresh(self, hint):
        name = "%" + hint.replace(".", "_")
        base, n = name, 0
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name

    def param(self, name, shape, init):
        v = Value(self._fresh(name), shape, self.dtype)
        self.args.append(f'{v.name}: {v.type} {{step.param = #step.param<"{name}", {init}>}}')
        return v

    def input(self, name, shape):
        v = Value(self._fresh(name), shape, "i32")
        self.args.append(f'{v.name}: {v.type} {{step.input = "{name}"}}')
        return v

    def emit(self, hint, shape, text, dtype=None):
        v = Value(self._fresh(hint), shape, dtype or self.dtype)
        self.body.append(f"  {v.name} = {text.format(out=v.type)}")
        return v

    # -- ops ---------------------------------------------------------------
    def unary(self, op, x, hint, attrs=""):
        return self.emit(hint, x.shape, f"step.{op} {x.name}{attrs} : {x.type}")

    def binary(self, op, a, b, hint):
        return self.emit(hint, a.shape, f"step.{op} {a.name}, {b.name} : {a.type}")

    def broadcast(self, x, shape, hint):
        return self.emit(hint, shape, f"step.broadcast {x.name} : {x.type} -> {{out}}")

    def embedding(self, table, ids, hint):
        shape = ids.shape + [table.shape[1]]
        return self.emit(hint, shape, f"step.embedding {table.name}, {ids.name} "
                                      f": ({table.type}, {ids.type}) -> {{out}}")

    def matmul(self, x, w, hint, transpose_b=True):
        n = w.shape[0] if transpose_b else w.shape[1]
        flag = " transpose_b" if transpose_b else ""
        return self.emit(hint, x.shape[:-1] + [n], f"step.matmul {x.name}, {w.name}{flag} "
                                                  f": ({x.type}, {w.type}) -> {{out}}")

    def linear(self, x, w, b, hint):
        """x @ w^T (+ b), w in nn.Linear layout [out, in]."""
        y = self.matmul(x, w, hint)
        if b is None:
            return y
        bb = self.broadcast(b, y.shape, hint + "_bias")
        return self.binary("add", y, bb, hint + "_biased")

    def slice(self, x, dim, start, size, hint):
        offsets = [0] * len(x.shape)
        sizes = list(x.shape)
        offsets[dim], sizes[dim] = start, size
        return self.emit(hint, sizes, f"step.slice {x.name} offsets {offsets} sizes {sizes} "
                                      f": ({x.type}) -> {{out}}")

    def layer_norm(self, x, w, b, eps, hint):
        return self.emit(hint, x.shape, f"step.layer_norm {x.name}, {w.name}, {b.name}"
                                        f"{eps_attr(eps)} : ({x.type}, {w.type}, {b.type}) -> {{out}}")

    def rms_norm(self, x, w, eps, hint):
        return self.emit(hint, x.shape, f"step.rms_norm {x.name}, {w.name}{eps_attr(eps)} "
                                        f": ({x.type}, {w.type}) -> {{out}}")

    def rotary(self, x, head_dim, theta, hint):
        attr = "" if theta == 10000.0 else f" {{theta = {float(theta)!r} : f64}}"
        return self.emit(hint, x.shape, f"step.rotary {x.name} head_dim {head_dim}{attr} "
                                        f": ({x.type}) -> {{out}}")

    def attention(self, q, k, v, heads, kv_heads, head_dim, hint):
        return self.emit(hint, q.shape,
                         f"step.attention {q.name}, {k.name}, {v.name} heads {heads} "
                         f"kv_heads {kv_heads} head_dim {head_dim} causal "
                         f": ({q.type}, {k.type}, {v.type}) -> {{out}}")

    def cross_entropy(self, logits, targets, hint):
        return self.emit(hint, [], f"step.cross_entropy {logits.name}, {targets.name} "
                                   f": ({logits.type}, {targets.type}) -> {{out}}",
                         dtype="f64" if self.dtype == "f64" else "f32")

    def render(self, header, loss):
        args = ",\n    ".join(self.args)
        lines = [header, f"func.func @loss(\n    {args})\n    -> {loss.type} attributes {{step.loss}} {{"]
        lines += self.body
        lines += [f"  return {loss.name} : {loss.type}", "}", ""]
        return "\n".join(lines)


def eps_attr(eps):
    return "" if eps == 1e-5 else f" {{epsilon = {float(eps)!r} : f64}}"


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
            ln1w=w.param(p + "ln_1.weight", [D], "ones"),
            ln1b=w.param(p + "ln_1.bias", [D], "zeros"),
            attw=w.param(p + "attn.c_attn.weight", [3 * D, D], normal(std)),
            attb=w.param(p + "attn.c_attn.bias", [3 * D], "zeros"),
            prjw=w.param(p + "attn.c_proj.weight", [D, D], scaled_normal(std, L)),
            prjb=w.param(p + "attn.c_proj.bias", [D], "zeros"),
            ln2w=w.param(p + "ln_2.weight", [D], "ones"),
            ln2b=w.param(p + "ln_2.bias", [D], "zeros"),
            fcw=w.param(p + "mlp.c_fc.weight", [4 * D, D], normal(std)),
            fcb=w.param(p + "mlp.c_fc.bias", [4 * D], "zeros"),
            mpw=w.param(p + "mlp.c_proj.weight", [D, 4 * D], scaled_normal(std, L)),
            mpb=w.param(p + "mlp.c_proj.bias", [D], "zeros"),
        ))
    lnfw = w.param("ln_f.weight", [D], "ones")
    lnfb = w.param("ln_f.bias", [D], "zeros")
    tokens = w.input("tokens", [B, T])
    targets = w.input("targets", [B, T])

    x = w.embedding(wte, tokens, "tok_emb")
    if wpe is not None:
        pos = w.broadcast(wpe, [B, T, D], "pos_emb")
        x = w.binary("add", x, pos, "x")
    gelu = " approximate tanh" if a.gelu == "tanh" else ""
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
        att = w.attention(q, k, v, H, H, hd, n + "att")
        x = w.binary("add", x, w.linear(att, p["prjw"], p["prjb"], n + "attn_out"), n + "x_attn")
        h = w.layer_norm(x, p["ln2w"], p["ln2b"], a.norm_eps, n + "ln_2")
        f = w.unary("gelu", w.linear(h, p["fcw"], p["fcb"], n + "fc"), n + "gelu", gelu)
        x = w.binary("add", x, w.linear(f, p["mpw"], p["mpb"], n + "mlp_out"), n + "x_mlp")
    x = w.layer_norm(x, lnfw, lnfb, a.norm_eps, "ln_f")
    logits = w.matmul(x, wte, "logits")  # tied head
    return w.cross_entropy(logits, targets, "loss")


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
            an=w.param(p + "attention_norm", [D], "ones"),
            wq=w.param(p + "attention.wq", [H * hd, D], normal(std)),
            wk=w.param(p + "attention.wk", [K * hd, D], normal(std)),
            wv=w.param(p + "attention.wv", [K * hd, D], normal(std)),
            wo=w.param(p + "attention.wo", [D, H * hd], scaled_normal(std, L)),
            fn=w.param(p + "ffn_norm", [D], "ones"),
            w1=w.param(p + "feed_forward.w1", [F, D], normal(std)),
            w2=w.param(p + "feed_forward.w2", [D, F], scaled_normal(std, L)),
            w3=w.param(p + "feed_forward.w3", [F, D], normal(std)),
        ))
    norm = w.param("norm", [D], "ones")
    out = w.param("output", [V, D], normal(std))
    tokens = w.input("tokens", [B, T])
    targets = w.input("targets", [B, T])

    x = w.embedding(emb, tokens, "tok_emb")
    for l, p in enumerate(blocks):
        n = f"l{l}_"
        h = w.rms_norm(x, p["an"], a.norm_eps, n + "attention_norm")
        q = w.rotary(w.matmul(h, p["wq"], n + "q"), hd, a.rope_theta, n + "q_rot")
        k = w.rotary(w.matmul(h, p["wk"], n + "k"), hd, a.rope_theta, n + "k_rot")
        v = w.matmul(h, p["wv"], n + "v")
        att = w.attention(q, k, v, H, K, hd, n + "att")
        x = w.binary("add", x, w.matmul(att, p["wo"], n + "attn_out"), n + "x_attn")
        h = w.rms_norm(x, p["fn"], a.norm_eps, n + "ffn_norm")
        gate = w.unary("silu", w.matmul(h, p["w1"], n + "w1"), n + "silu")
        up = w.matmul(h, p["w3"], n + "w3")
        m = w.matmul(w.binary("mul", gate, up, n + "swiglu"), p["w2"], n + "ffn_out")
        x = w.binary("add", x, m, n + "x_ffn")
    x = w.rms_norm(x, norm, a.norm_eps, "norm")
    logits = w.matmul(x, out, "logits")
    return w.cross_entropy(logits, targets, "loss")


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
    p.add_argument("--dtype", choices=["f32", "f64"], default="f32",
                   help="parameter element type (f64 for gradient checks)")
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
    loss = (gpt if a.arch == "gpt" else llama)(a, w)
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
