"""Writes one `step` loss function as MLIR text: arguments (parameters with
their initialisers and block markers, inputs) and a body of `step` ops.

Shared by examples/gen_model.py (our GPT and Llama) and stepc.export (the
PyTorch importer), so both front ends spell every op the same way.
Standard library only.
"""


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
        self.metrics = []  # (name, value): results after the loss

    def _fresh(self, hint):
        name = "%" + hint.replace(".", "_")
        base, n = name, 0
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name

    def param(self, name, shape, init, block=None, frozen=False, weight_decay=None,
              lr_scale=1.0, balance=None):
        """A parameter; `block` marks it as part of the block-th layer,
        `frozen` as held but not trained (requires_grad=False);
        `weight_decay` and `lr_scale` its own optimizer settings (a
        torch.optim parameter group); `balance` (metric, rate) a frozen
        routing bias the step moves by that metric (step.balance)."""
        v = Value(self._fresh(name), shape, self.dtype)
        marker = ("" if block is None else f", block {block}") + (", frozen" if frozen else "")
        if weight_decay is not None:
            marker += f", weight_decay {float(weight_decay)!r}"
        if lr_scale != 1.0:
            marker += f", lr_scale {float(lr_scale)!r}"
        extra = ""
        if balance is not None:
            extra = (f', step.balance = {{metric = "{balance[0]}", '
                     f'rate = {float(balance[1])!r} : f64}}')
        self.args.append(f'{v.name}: {v.type} {{step.param = #step.param<"{name}", {init}{marker}>'
                         f'{extra}}}')
        return v

    def input(self, name, shape, dtype="i32"):
        v = Value(self._fresh(name), shape, dtype)
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

    def dropout(self, x, rate, hint):
        """Inverted dropout; each gets the next stream (its draws' key)."""
        if not rate:
            return x
        stream = self.streams = getattr(self, "streams", -1) + 1
        return self.emit(hint, x.shape, f"step.dropout {x.name} rate {float(rate)!r} "
                                        f"stream {stream} : ({x.type}) -> {{out}}")

    def broadcast(self, x, shape, hint):
        return self.emit(hint, shape, f"step.broadcast {x.name} : {x.type} -> {{out}}",
                         dtype=x.dtype)

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

    def attention(self, q, k, v, heads, kv_heads, head_dim, hint, mask=None):
        """Causal attention; `mask` an additive f32 [B|1, H|1, T|1, T] mask."""
        operand, mask_type = (f" mask {mask.name}", f", {mask.type}") if mask else ("", "")
        return self.emit(hint, q.shape,
                         f"step.attention {q.name}, {k.name}, {v.name}{operand} heads {heads} "
                         f"kv_heads {kv_heads} head_dim {head_dim} causal "
                         f": ({q.type}, {k.type}, {v.type}{mask_type}) -> {{out}}")

    def key_padding_mask(self, tokens, pad, hint):
        """[B, 1, 1, T] f32: -inf at the keys whose token is `pad`, else 0."""
        b, t = tokens.shape
        pads = self.emit(hint + "_id", [b, t], f"step.constant dense<{int(pad)}> : {{out}}",
                         dtype="i32")
        is_pad = self.emit(hint + "_is", [b, t], f"step.compare eq, {tokens.name}, {pads.name} "
                                                 f": {tokens.type}", dtype="i1")
        ninf = self.emit(hint + "_ninf", [b, t], "step.constant dense<0xFF800000> : {out}",
                         dtype="f32")
        zero = self.emit(hint + "_zero", [b, t], "step.constant dense<0.0> : {out}",
                         dtype="f32")
        bias = self.emit(hint, [b, t], f"step.select {is_pad.name}, {ninf.name}, {zero.name} "
                                       f": {is_pad.type}, {ninf.type}", dtype="f32")
        return self.emit(hint + "_4d", [b, 1, 1, t],
                         f"step.reshape {bias.name} : {bias.type} -> {{out}}", dtype="f32")

    def emit2(self, hints, shapes, dtypes, text):
        """An op of two results."""
        a = Value(self._fresh(hints[0]), shapes[0], dtypes[0])
        b = Value(self._fresh(hints[1]), shapes[1], dtypes[1])
        self.body.append(f"  {a.name}, {b.name} = {text.format(a=a.type, b=b.type)}")
        return a, b

    def reshape(self, x, shape, hint):
        return self.emit(hint, shape, f"step.reshape {x.name} : {x.type} -> {{out}}",
                         dtype=x.dtype)

    def softmax(self, x, hint):
        dim = len(x.shape) - 1
        return self.emit(hint, x.shape, f"step.softmax {x.name} dim {dim} "
                                        f": ({x.type}) -> {{out}}")

    def reduce(self, op, x, dims, hint, keep=False):
        shape = [d if keep else None for i, d in enumerate(x.shape)]
        shape = [1 if i in dims else d for i, d in enumerate(x.shape)] if keep else \
            [d for i, d in enumerate(x.shape) if i not in dims]
        keep_attr = " keep_dims" if keep else ""
        return self.emit(hint, shape, f"step.{op} {x.name} dims {list(dims)}{keep_attr} "
                                      f": ({x.type}) -> {{out}}", dtype=x.dtype)

    def top_k(self, x, k, hint):
        shape = x.shape[:-1] + [k]
        return self.emit2((hint + "_gate", hint + "_expert"), (shape, shape), (x.dtype, "i32"),
                          f"step.top_k {x.name} k {k} : ({x.type}) -> ({{a}}, {{b}})")

    @staticmethod
    def _capacity(capacity):
        """The ops' `capacity C per S` clause for capacity = (C, S), or none."""
        return f" capacity {capacity[0]} per {capacity[1]}" if capacity else ""

    def moe_dispatch(self, x, experts, num_experts, hint, capacity=None):
        """capacity = (C, S): at most C pairs per expert in each S tokens."""
        pairs = x.shape[0] * experts.shape[1]
        if capacity:
            pairs = min(pairs, x.shape[0] // capacity[1] * num_experts * capacity[0])
        return self.emit2((hint + "_rows", hint + "_counts"), ([pairs, x.shape[1]], [num_experts]),
                          (x.dtype, "i32"),
                          f"step.moe_dispatch {x.name}, {experts.name} experts {num_experts}"
                          f"{self._capacity(capacity)} : ({x.type}, {experts.type}) "
                          f"-> ({{a}}, {{b}})")

    def grouped_matmul(self, rows, w, counts, hint, transpose_b=True):
        n = w.shape[1] if transpose_b else w.shape[2]
        flag = " transpose_b" if transpose_b else ""
        return self.emit(hint, [rows.shape[0], n],
                         f"step.grouped_matmul {rows.name}, {w.name}, {counts.name}{flag} "
                         f": ({rows.type}, {w.type}, {counts.type}) -> {{out}}")

    def moe_combine(self, rows, gates, experts, num_experts, hint, capacity=None):
        return self.emit(hint, [experts.shape[0], rows.shape[1]],
                         f"step.moe_combine {rows.name}, {gates.name}, {experts.name} "
                         f"experts {num_experts}{self._capacity(capacity)} : ({rows.type}, "
                         f"{gates.type}, {experts.type}) -> {{out}}")

    def cross_entropy(self, logits, targets, hint, ignore_index=None, label_smoothing=0.0,
                      z_loss=0.0):
        """The mean over the counted targets (those not ignore_index)."""
        options = ""
        if ignore_index is not None:
            options += f" ignore_index {int(ignore_index)}"
        if label_smoothing:
            options += f" label_smoothing {float(label_smoothing)!r}"
        if z_loss:
            options += f" z_loss {float(z_loss)!r}"
        return self.emit(hint, [], f"step.cross_entropy {logits.name}, {targets.name}{options} "
                                   f": ({logits.type}, {targets.type}) -> {{out}}",
                         dtype="f64" if self.dtype == "f64" else "f32")

    def expert_load(self, hit, hint):
        """[E]: the share of the (token, expert) pairs at each expert, from
        their one-hot `hit` (one_hot_experts), a mean over the rows: an MoE
        layer's load."""
        return self.reduce("reduce_mean", hit, [0, 1, 2], hint + "_load")

    def dropped_share(self, hit, counts, hint):
        """[]: the share of the (token, expert) pairs a capacity dropped: the
        pairs routed (their one-hot `hit`) less those the dispatch kept (its
        `counts`), over the pairs routed. (Both from the batch's tensors, not
        a constant: a data-parallel rank counts its own.)"""
        routed = self.reduce("reduce_sum", hit, [0, 1, 2, 3], hint + "_routed")
        kept = self.emit(hint + "_kept_f", [counts.shape[0]],
                         f"step.convert {counts.name} : {counts.type} -> {{out}}")
        kept = self.reduce("reduce_sum", kept, [0], hint + "_kept")
        return self.binary("div", self.binary("sub", routed, kept, hint + "_dropped_pairs"),
                           routed, hint + "_dropped")

    def one_hot_experts(self, experts, num_experts, batch, hint):
        """[B, N/B, K, E] f32: 1 where pair (n, k) is routed to expert e. The
        batch leads, as in the model's inputs, so that data parallelism
        splits it (the expert ids broadcast from [E] take its part's rows)."""
        n, k = experts.shape
        e = num_experts
        shape = [batch, n // batch, k, e]
        picks = self.reshape(experts, [batch, n // batch, k, 1], hint + "_picks")
        picks = self.emit(hint + "_picks_all", shape,
                          f"step.broadcast {picks.name} : {picks.type} -> {{out}}", dtype="i32")
        ids = self.emit(hint + "_ids", [e], "step.iota dim 0 : {out}", dtype="i32")
        ids = self.emit(hint + "_ids_all", shape,
                        f"step.broadcast {ids.name} : {ids.type} -> {{out}}", dtype="i32")
        hit = self.emit(hint + "_hit", shape,
                        f"step.compare eq, {picks.name}, {ids.name} : {picks.type}", dtype="i1")
        return self.emit(hint + "_hit_f", shape,
                         f"step.convert {hit.name} : {hit.type} -> {{out}}")

    def metric(self, name, value):
        """Returns `value` (f32) as the metric `name`: a measure of the batch
        that every training step reports, averaged over ranks as the loss."""
        self.metrics.append((name, value))

    def render(self, header, loss):
        args = ",\n    ".join(self.args)
        results = [loss.type] + [f'{v.type} {{step.result = #step.result<metric, "{name}">}}'
                                 for name, v in self.metrics]
        signature = results[0] if len(results) == 1 else "(" + ",\n        ".join(results) + ")"
        values = [loss] + [v for _, v in self.metrics]
        lines = [header, f"func.func @loss(\n    {args})\n    -> {signature} attributes {{step.loss}} {{"]
        lines += self.body
        lines += [f"  return {', '.join(v.name for v in values)} : "
                  f"{', '.join(v.type for v in values)}", "}", ""]
        return "\n".join(lines)


def eps_attr(eps):
    return "" if eps == 1e-5 else f" {{epsilon = {float(eps)!r} : f64}}"
