"""Recognises PyTorch's spellings of stepc's composite ops in an ATen graph.

Each matcher finds one composite (attention, cross-entropy, RMSNorm,
rotary embedding) however the model wrote it, and proves the match by
evaluation rather than by trusting shapes:

- data movement (views, transposes, expands, clones, slices) is checked by
  running the chain on an index tensor (`arange`) and comparing with the
  layout the composite expects;
- a linear region (rotary embedding: multiplies by constant tables, adds,
  selects, stacks) is checked by running it on random probes against the
  composite's definition.

A match is a `Replacement`: the node it replaces, the composite's kind and
its operands (nodes). Nodes only the composite used are never lowered.
"""

import math
import operator

import torch

from . import sdpa as sdpa_args

aten = torch.ops.aten

# Ops that only move or copy data: evaluated on index tensors.
MOVEMENT = {
    aten.view.default, aten._unsafe_view.default, aten._reshape_alias.default,
    aten.reshape.default, aten.transpose.int, aten.permute.default, aten.t.default,
    aten.expand.default, aten.clone.default, aten.unsqueeze.default, aten.squeeze.dim,
    aten.alias.default, aten.detach.default, aten.slice.Tensor, aten.select.int,
    aten.lift_fresh_copy.default,
}
# Value-preserving for float32 models (casts to the type it already has).
IDENTITY_CASTS = {aten._to_copy.default}


def is_call(node, *targets):
    return node is not None and getattr(node, "op", None) == "call_function" and \
        node.target in targets


def shape_of(node):
    meta = node.meta.get("tensor_meta")
    if meta is None:
        val = node.meta.get("val")
        return list(val.shape) if val is not None else None
    return list(meta.shape)


def strip_casts(node):
    while is_call(node, *IDENTITY_CASTS):
        node = node.args[0]
    return node


def movement_chain(node):
    """(source, ops): the first node back from `node` that is not data
    movement, and the movement ops from it to `node`, source first."""
    ops = []
    while is_call(node, *MOVEMENT) or is_call(node, *IDENTITY_CASTS):
        ops.append(node)
        node = node.args[0]
    return node, list(reversed(ops))


def replay(ops, tensor):
    """`tensor` through the movement ops (their other arguments literal)."""
    for op in ops:
        if op.target in IDENTITY_CASTS or op.target in (aten.clone.default, aten.alias.default,
                                                          aten.detach.default,
                                                          aten.lift_fresh_copy.default):
            continue
        if op.target in (aten.view.default, aten._unsafe_view.default,
                         aten._reshape_alias.default):
            # Values, not strides: a view of a copy reads as a reshape.
            tensor = tensor.reshape(op.args[1])
            continue
        tensor = op.target(tensor, *op.args[1:], **op.kwargs)
    return tensor


def index_probe(source_shape, ops):
    base = torch.arange(math.prod(source_shape)).view(source_shape)
    return replay(ops, base)


RESHAPES = {aten.view.default, aten._unsafe_view.default, aten._reshape_alias.default,
            aten.reshape.default, aten.clone.default, aten.alias.default, aten.detach.default,
            aten.unsqueeze.default, aten.squeeze.dim, aten.lift_fresh_copy.default}


def ops_key(ops):
    return tuple((op.target, repr(op.args[1:]), repr(sorted(op.kwargs.items()))) for op in ops)


_LAYOUTS = {}


def layout_is(source_shape, ops, expected_spec, expected_fn):
    """Whether the movement `ops` take a tensor of `source_shape` to the
    element order `expected_fn()` describes. Pure reshapes keep the order
    (no probe); other chains are probed once per (shape, ops, expectation):
    a model's layers repeat theirs."""
    if all(op.target in RESHAPES or op.target in IDENTITY_CASTS for op in ops):
        return expected_spec == "identity"
    key = (tuple(source_shape), ops_key(ops), expected_spec)
    if key not in _LAYOUTS:
        probe = index_probe(source_shape, ops)
        expected = expected_fn() if expected_spec != "identity" else \
            torch.arange(math.prod(source_shape))
        _LAYOUTS[key] = same_indices(probe, expected)
    return _LAYOUTS[key]


def heads_layout(b, t, heads, head_dim, kv_heads=None, transpose_last=False):
    """Indices of a [B, T, heads·Dh] tensor viewed as [B, H, T, Dh] (keys and
    values repeated from kv_heads to heads; transposed to [B, H, Dh, T])."""
    kv = kv_heads or heads
    e = torch.arange(b * t * kv * head_dim).view(b, t, kv, head_dim).transpose(1, 2)
    if kv != heads:
        e = e.repeat_interleave(heads // kv, dim=1)
    if transpose_last:
        e = e.transpose(-2, -1)
    return e


def same_indices(probe, expected):
    """The same elements in the same row-major order (shapes may differ)."""
    return probe.numel() == expected.numel() and \
        torch.equal(probe.contiguous().reshape(-1), expected.contiguous().reshape(-1))


class Replacement:
    def __init__(self, node, kind, operands, **attrs):
        self.node, self.kind, self.operands, self.attrs = node, kind, operands, attrs


class Matcher:
    """Finds composites in `graph`; `consts` maps constant nodes to values."""

    def __init__(self, graph, consts, params=()):
        self.graph, self.consts, self.params = graph, consts, set(params)
        self.replacements = {}

    def run(self):
        nodes = list(self.graph.nodes)
        for node in nodes:
            if is_call(node, aten._softmax.default):
                self.attention(node)
            elif sdpa_args.is_sdpa(node):
                self.sdpa(node)
            elif is_call(node, aten.nll_loss_forward.default):
                self.cross_entropy(node)
            elif is_call(node, aten.mul.Tensor):
                self.rms_norm(node)
        return self.replacements

    # -- attention ---------------------------------------------------------
    def attention(self, softmax):
        if softmax.args[1] not in (-1, len(shape_of(softmax)) - 1):
            return
        # Forward: P -> movement -> bmm(P, V) -> movement -> [B, T, H·Dh].
        users = list(softmax.users)
        p = softmax
        while len(users) == 1 and (is_call(users[0], *MOVEMENT) or
                                   is_call(users[0], *IDENTITY_CASTS)):
            p = users[0]
            users = list(p.users)
        if len(users) != 1 or not is_call(users[0], aten.bmm.default) or users[0].args[0] is not p:
            return
        bmm2 = users[0]
        # Backward: softmax(scale · S + mask), S = movement(bmm(Q, Kᵀ)). A
        # constant causal mask is the op's `causal`; any other mask no
        # parameter reaches, on [B, H, T, T] scores, its mask operand.
        s = strip_casts(softmax.args[0])
        causal, mask = False, None
        if is_call(s, aten.masked_fill.Scalar) and s.args[2] == float("-inf"):
            causal = self.causal_mask(s.args[1], boolean=True)
            if not causal:
                mask = self.score_mask(s, s.args[1], "hidden")
            s = s.args[0] if causal or mask else None
        elif is_call(s, aten.add.Tensor) and isinstance(s.args[1], torch.fx.Node) and \
                s.kwargs.get("alpha", s.args[2] if len(s.args) > 2 else 1) == 1:
            causal = s.args[1] in self.consts and self.causal_mask(s.args[1], boolean=False)
            if not causal:
                mask = self.score_mask(s, s.args[1], "additive")
            s = s.args[0] if causal or mask else None
        if s is None:
            return
        s = strip_casts(s)
        scale = 1.0
        if is_call(s, aten.mul.Tensor) and isinstance(s.args[1], (int, float)):
            scale, s = float(s.args[1]), s.args[0]
        elif is_call(s, aten.div.Tensor) and isinstance(s.args[1], (int, float)):
            scale, s = 1.0 / float(s.args[1]), s.args[0]
        bmm1, _ = movement_chain(s)
        if not is_call(bmm1, aten.bmm.default):
            return
        bh, t, head_dim = shape_of(bmm1.args[0])
        self.match_heads(bmm1.args[0], bmm1.args[1], bmm2.args[1], bmm2, bh, t, head_dim,
                         causal, scale, keys_transposed=True, mask=mask)

    def score_mask(self, scores, mask, kind):
        """(mask node, kind) when `mask` on `scores` can be step.attention's
        mask operand: the scores [B, H, T, T], the mask broadcast to them and
        computed from no parameter; kind "hidden" (masked_fill's True hides)
        or "additive"."""
        shape, m = shape_of(scores), shape_of(mask)
        if shape is None or m is None or len(shape) != 4 or shape[2] != shape[3] or \
                not 1 <= len(m) <= 4 or m[-1] != shape[3] or self.reaches_parameter(mask):
            return None
        if not all(x in (1, y) for x, y in zip(m, shape[4 - len(m):])):
            return None
        return mask, kind

    def sdpa(self, node):
        """PyTorch >= 2.0's scaled_dot_product_attention (nanoGPT's flash
        path), any overload it traces to: q, k, v as [B, H, T, Dh]. The
        composite when there is no mask, the mask is a constant causal one,
        or any other mask no parameter reaches (the step.attention's mask
        operand); anything else (a mask computed from a parameter, dropout,
        GQA by enable_gqa) is lowered op by op from the same arguments
        (lower.py)."""
        if not sdpa_args.is_sdpa(node):
            return
        a = sdpa_args.arguments(node)
        if a.unsupported or a.dropout or a.gqa:
            return
        causal, mask = a.causal, None
        if a.mask is not None:
            if causal:
                return
            if self.causal_sdpa_mask(a.mask):
                causal = True
            elif self.reaches_parameter(a.mask) or not self.mask_broadcasts(a.mask, a.query):
                return
            else:
                mask = (a.mask, "attends")
        out = sdpa_args.output_node(node)
        if out is None:
            return
        shape = shape_of(a.query)
        if shape is None or len(shape) != 4 or shape_of(a.key) is None or \
                shape_of(a.key)[-2] != shape[-2]:
            return  # cross-attention or unusual ranks: op by op
        b, h, t, d = shape
        self.match_heads(a.query, a.key, a.value, out, b * h, t, d, causal,
                         1.0 / math.sqrt(d) if a.scale is None else a.scale,
                         keys_transposed=False, mask=mask)

    def reaches_parameter(self, node):
        """Whether a parameter flows into `node` (its gradient would be
        needed: step.attention's mask gets none)."""
        seen, work = set(), [node]
        while work:
            n = work.pop()
            if n in seen or n in self.consts:
                continue
            seen.add(n)
            if n in self.params:
                return True
            work.extend(n.all_input_nodes)
        return False

    @staticmethod
    def mask_broadcasts(mask, query):
        """An attn_mask step.attention takes: broadcast to [B, H, T, T] with
        its key dim whole (PyTorch's broadcasting, right-aligned)."""
        m, q = shape_of(mask), shape_of(query)
        if m is None or q is None or not 1 <= len(m) <= 4 or m[-1] != q[-2]:
            return False
        full = [q[0], q[1], q[2], q[2]]
        return all(x in (1, y) for x, y in zip(m, full[4 - len(m):]))

    def causal_sdpa_mask(self, node):
        """SDPA's attn_mask is a constant causal mask: boolean True where a
        query may attend (on and below the diagonal), or additive 0 / -inf."""
        mask = self.consts.get(node)
        if not isinstance(mask, torch.Tensor) or mask.dim() < 2:
            return False
        if mask.dtype == torch.bool:
            t = mask.shape[-1]
            if mask.shape[-2] != t:
                return False
            above = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
            return all(torch.equal(~m, above) for m in mask.reshape(-1, t, t))
        return self.causal_mask(node, boolean=False)

    def match_heads(self, q, k, v, product, bh, t, head_dim, causal, scale, keys_transposed,
                    mask=None):
        """The composite, when q, k, v are heads views of [B, T, H·Dh] values
        and `product` ([B·H, T, Dh] or [B, H, T, Dh]) moves back to one;
        `mask` (node, kind): an attn_mask to give the op (mask_broadcasts),
        kind "attends" (SDPA's boolean True attends), "hidden"
        (masked_fill's True hides) or "additive"."""
        q_src, q_ops = movement_chain(q)
        k_src, k_ops = movement_chain(k)
        v_src, v_ops = movement_chain(v)
        bmm2 = product
        qs, ks, vs = shape_of(q_src), shape_of(k_src), shape_of(v_src)
        if None in (qs, ks, vs) or min(len(qs), len(ks), len(vs)) < 2:
            return
        # Sources are [B, T, ...] or, out of a Linear's matmul, [B·T, C].
        b = qs[0] if len(qs) >= 3 else qs[0] // t
        if not b or bh % b:
            return
        n_heads = bh // b
        cq, ck, cv = (math.prod(x) // (b * t) for x in (qs, ks, vs))
        if cq != n_heads * head_dim or ck % head_dim or ck != cv or \
                any(math.prod(x) != b * t * c for x, c in ((qs, cq), (ks, ck), (vs, cv))):
            return
        kv_heads = ck // head_dim
        if n_heads % kv_heads:
            return
        def layout(*spec):
            return ("heads",) + spec, lambda: heads_layout(*spec)
        if not (layout_is(qs, q_ops, *layout(b, t, n_heads, head_dim)) and
                layout_is(ks, k_ops, *layout(b, t, n_heads, head_dim, kv_heads,
                                             keys_transposed)) and
                layout_is(vs, v_ops, *layout(b, t, n_heads, head_dim, kv_heads))):
            return
        # The output: the first layout [B, T, H·Dh] after bmm2.
        out, ops = bmm2, []

        def merged():
            return torch.arange(bh * t * head_dim).view(b, n_heads, t, head_dim).transpose(1, 2)
        while True:
            if shape_of(out) == [b, t, n_heads * head_dim] and \
                    layout_is(shape_of(bmm2), ops, ("merge", b, n_heads, t, head_dim), merged):
                break
            users = list(out.users)
            if len(users) != 1 or not is_call(users[0], *MOVEMENT):
                return
            out = users[0]
            ops.append(out)
        self.replacements[out] = Replacement(
            out, "attention", [q_src, k_src, v_src] + ([mask[0]] if mask is not None else []),
            mask_kind=mask[1] if mask is not None else None, heads=n_heads, kv_heads=kv_heads,
            head_dim=head_dim, causal=causal, scale=scale, batch=b, seq=t)
        for src, nh in ((q_src, n_heads), (k_src, kv_heads)):
            self.rotary(src, b, t, nh, head_dim)

    def causal_mask(self, node, boolean):
        mask = self.consts.get(node)
        if not isinstance(mask, torch.Tensor) or mask.dim() < 2:
            return False
        t = mask.shape[-1]
        if mask.shape[-2] != t:
            return False
        above = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        flat = mask.reshape(-1, t, t)
        if boolean:
            return all(torch.equal(m.bool(), above) for m in flat)
        return all(torch.equal(torch.isneginf(m), above) and
                   bool((m[~above] == 0).all()) for m in flat)

    # -- rotary embedding --------------------------------------------------
    LINEAR = MOVEMENT | IDENTITY_CASTS | {
        aten.mul.Tensor, aten.add.Tensor, aten.sub.Tensor, aten.neg.default,
        aten.stack.default, aten.cat.default, aten.unbind.int,
    }

    def rotary(self, y, b, t, heads, head_dim):
        """y = rotary(x) (Meta's adjacent pairs) for one node x: proved on
        probes, with theta read off the tables."""
        def closure(stop):
            """The linear ops between y and `stop` (or the first non-linear
            nodes), and the nodes they start from."""
            region, leaves, work = set(), set(), [y]
            while work:
                n = work.pop()
                if n in region or n in self.consts:
                    continue
                if n is not stop and (is_call(n, *self.LINEAR) or (
                        is_call(n, operator.getitem) and is_call(n.args[0], aten.unbind.int))):
                    region.add(n)
                    for a in n.all_input_nodes:
                        work.append(a)
                else:
                    leaves.add(n)
            return region, leaves

        region, leaves = closure(None)
        if len(leaves) != 1:
            # The input is itself a sum (a LoRA projection: base(x) + B A x):
            # the rotary starts at the earliest node of the region that every
            # path from y goes back to.
            for stop in [n for n in self.graph.nodes if n in region]:
                region, leaves = closure(stop)
                if leaves == {stop}:
                    break
        if len(leaves) != 1 or not any(is_call(n, aten.mul.Tensor) for n in region):
            return
        x = next(iter(leaves))
        xs = shape_of(x)
        # x is [B, T, ...] or a Linear's [B·T, C]: the same elements in order.
        if xs is None or math.prod(xs) != b * t * heads * head_dim \
                or head_dim % 2 or head_dim < 4 or t < 2:
            return
        order = [n for n in self.graph.nodes if n in region]

        def run(probe):
            env = {x: probe}
            for n in order:
                args = torch.fx.node.map_arg(
                    n.args, lambda a: env[a] if a in env else self.consts[a])
                kwargs = {k: v for k, v in n.kwargs.items() if k != "memory_format"}
                env[n] = args[0] if n.target in IDENTITY_CASTS else n.target(*args, **kwargs)
            return env[y]

        try:
            # theta from the response to one pair at position 1.
            probe = torch.zeros(xs)
            flat = probe.view(b, t, heads, head_dim // 2, 2)
            flat[0, 1, 0, 1, 0] = 1.0
            out = run(probe).reshape(b, t, heads, head_dim // 2, 2)
            freq = math.atan2(float(out[0, 1, 0, 1, 1]), float(out[0, 1, 0, 1, 0]))
            if not freq > 0:
                return
            theta = freq ** (-head_dim / 2.0)
            for seed in (1, 2):
                g = torch.Generator().manual_seed(seed)
                probe = torch.randn(xs, generator=g, dtype=torch.float64).float()
                got = run(probe).double()
                want = reference_rotary(probe.double().reshape(b, t, heads, head_dim), theta)
                if got.numel() != want.numel() or \
                        not torch.allclose(got.reshape(-1), want.reshape(-1), rtol=1e-4, atol=1e-5):
                    return
        except (RuntimeError, KeyError, TypeError, IndexError):
            return
        # Tables computed in float32 from a theta given in decimal: round the
        # estimate to 6 significant digits (10000.0, 500000.0).
        theta = float(f"{theta:.6g}")
        self.replacements[y] = Replacement(y, "rotary", [x], head_dim=head_dim, theta=theta,
                                           batch=b, seq=t)

    # -- cross-entropy -----------------------------------------------------
    def cross_entropy(self, nll):
        lsm, target, weight, reduction, ignore_index = nll.args[:5]
        if weight is not None or reduction != 1 or not is_call(lsm, aten._log_softmax.default):
            return
        users = [u for u in nll.users if u.args[1] == 0]
        if len(users) != 1:
            return
        logits, l_ops = movement_chain(lsm.args[0])
        targets, t_ops = movement_chain(target)
        ls, ts = shape_of(logits), shape_of(targets)
        if ls is None or ts is None or math.prod(ls[:-1]) != math.prod(ts):
            return
        # Only pure reshapes of [..., V] and [...]: the same tokens in order.
        if not layout_is(ls, l_ops, "identity", None) or \
                not layout_is(ts, t_ops, "identity", None):
            return
        self.replacements[users[0]] = Replacement(users[0], "cross_entropy", [logits, targets],
                                                  ignore_index=ignore_index)

    # -- RMSNorm -----------------------------------------------------------
    def rms_norm(self, node):
        """x · rsqrt(mean(x², -1, keepdim) + eps) · w, in either order."""
        for a, w in ((node.args[0], node.args[1]), (node.args[1], node.args[0])):
            if not hasattr(w, "op") or w.op != "placeholder":
                continue
            a = strip_casts(a)
            if not is_call(a, aten.mul.Tensor):
                continue
            for x, r in ((a.args[0], a.args[1]), (a.args[1], a.args[0])):
                if not is_call(r, aten.rsqrt.default):
                    continue
                add = r.args[0]
                if not is_call(add, aten.add.Tensor, aten.add.Scalar) or \
                        not isinstance(add.args[1], float):
                    continue
                mean = add.args[0]
                xs = shape_of(x)
                if not is_call(mean, aten.mean.dim) or xs is None or \
                        list(mean.args[1]) not in ([-1], [len(xs) - 1]) or \
                        not (len(mean.args) > 2 and mean.args[2]):
                    continue
                sq = mean.args[0]
                ok = (is_call(sq, aten.pow.Tensor_Scalar) and sq.args[0] is x and sq.args[1] == 2) \
                    or (is_call(sq, aten.mul.Tensor) and sq.args[0] is x and sq.args[1] is x)
                if ok and shape_of(w) == [xs[-1]]:
                    self.replacements[node] = Replacement(node, "rms_norm", [strip_casts(x), w],
                                                          eps=add.args[1])
                    return


def reference_rotary(x, theta):
    """Meta's rotary embedding of x [B, T, H, Dh]: pairs (2i, 2i+1) rotated by
    position · theta^(-2i/Dh)."""
    b, t, h, d = x.shape
    freqs = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = torch.arange(t, dtype=torch.float64)[:, None] * freqs[None, :]
    cos, sin = angle.cos()[None, :, None, :], angle.sin()[None, :, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).reshape(b, t, h, d)
