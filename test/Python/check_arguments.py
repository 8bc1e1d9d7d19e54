#!/usr/bin/env python3
"""No argument accepted and ignored (test/Python/export.test, and under
PyTorch 2.x export-torch2.test):

1. Every defaulted argument of every ATen op in the lowering table that its
   handler does not declare as honoured (lower.HONOURED) is refused when it
   carries a value other than its default: fed to the guard on a node built
   for the op's own schema (each honoured one too, with its entry removed).
2. Every honoured argument changes what is exported: each case below traces
   a small function with the argument at its default and at another value;
   the two exports must differ (the IR) or the second must be an
   ExportError. A handler that reads an argument and drops it (delete the
   padding_idx branch of lower.embedding, or its scale_grad_by_freq check)
   exports the same IR twice and fails here. Each case is also exported
   with every defaulted argument moved to a keyword, which must give the
   same IR (a handler that reads only the position would drop it).
Prints one line per failure and "ok: N ops, M refusals, K cases".
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
from stepc import lower  # noqa: E402
from stepc.capture import capture  # noqa: E402
from stepc.errors import ExportError  # noqa: E402
from stepc.lower import HANDLERS, HONOURED, STORAGE_ARGUMENTS, Lowering  # noqa: E402

failures = []


def other_value(arg):
    """A value of `arg`'s type other than its default."""
    t, d = str(arg.type), arg.default_value
    if "bool" in t.lower() and "[]" not in t:
        return not d
    if "ScalarType" in t:
        return torch.float64
    if "[]" in t:
        return [0, 1] if d != [0, 1] else [1]
    if t.startswith("int"):
        return (d or 0) + 3
    if t.startswith("float") or t.startswith("Scalar") or t.startswith("number"):
        return (d or 0) + 0.5
    if t.startswith("str"):
        return "other"
    if "Tensor" in t:
        return torch.fx.Graph().placeholder("t")
    return object()


# 1. The guard refuses every argument no handler honours.
refused = 0
for op in HANDLERS:
    schema = getattr(op, "_schema", None)
    if schema is None:
        continue
    for name in HONOURED.get(op, set()):
        if name not in [a.name for a in schema.arguments]:
            failures.append(f"{op}: HONOURED names '{name}', which its schema lacks")
    honoured = HONOURED.get(op, set())
    for i, arg in enumerate(schema.arguments):
        if not arg.has_default_value() or arg.name in STORAGE_ARGUMENTS:
            continue
        # An honoured argument is checked with its entry taken out: the
        # guard must then refuse it (so every argument is one or the other).
        HONOURED[op] = honoured - {arg.name}
        graph = torch.fx.Graph()
        node = graph.call_function(op, (), {arg.name: other_value(arg)})
        try:
            lower.refuse_unread_arguments(node)
            failures.append(f"{op}: {arg.name}={other_value(arg)!r} is neither honoured nor "
                            f"refused")
        except ExportError:
            refused += 1
        finally:
            HONOURED[op] = honoured


# 2. Each honoured argument changes the export (or is refused).
def as_keywords(graph):
    """Every defaulted argument given by position moved to a keyword (a
    trace may spell it either way): the export must not change."""
    for node in graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None:
            continue
        args, kwargs = list(node.args), dict(node.kwargs)
        first = next((i for i, a in enumerate(schema.arguments[:len(args)])
                      if a.has_default_value()), len(args))
        for i in range(first, len(args)):
            kwargs[schema.arguments[i].name] = args[i]
        node.args, node.kwargs = tuple(args[:first]), kwargs


def export_text(fn, inputs, keywords=False):
    captured = capture(fn, inputs)
    if keywords:
        as_keywords(captured.graph_module.graph)
    lw = Lowering(captured, {}, {})
    loss = lw.run()
    return lw.w.render("", loss)


g = torch.Generator().manual_seed(0)
x = torch.randn(4, 6, generator=g)
y = torch.randn(4, 6, generator=g)
ids = torch.randint(0, 6, (4, 6), generator=g)
table = torch.randn(10, 5, generator=g)
w = torch.randn(6, 6, generator=g)
b3 = torch.randn(2, 4, 6, generator=g)

CASES = [
    # (name, inputs, function of (inputs..., variant): variant 0 the default)
    ("embedding padding_idx", (table, ids), lambda t, i, v: F.embedding(
        i, t, padding_idx=0 if v else None).sum()),
    ("embedding scale_grad_by_freq", (table, ids), lambda t, i, v: F.embedding(
        i, t, scale_grad_by_freq=bool(v)).sum()),
    ("embedding sparse", (table, ids), lambda t, i, v: F.embedding(i, t, sparse=bool(v)).sum()),
    ("gelu approximate", (x,), lambda a, v: F.gelu(a, approximate="tanh" if v else "none").sum()),
    ("softplus beta", (x,), lambda a, v: F.softplus(a, beta=2.0 if v else 1.0).sum()),
    ("softplus threshold", (x,), lambda a, v: F.softplus(a, threshold=5.0 if v else 20.0).sum()),
    ("leaky_relu slope", (x,), lambda a, v: F.leaky_relu(a, 0.2 if v else 0.01).sum()),
    ("elu alpha", (x,), lambda a, v: F.elu(a, alpha=2.0 if v else 1.0).sum()),
    ("hardtanh min_val", (x,), lambda a, v: F.hardtanh(a, min_val=-2.0 if v else -1.0).sum()),
    ("clamp min", (x,), lambda a, v: a.clamp(min=0.1 if v else None, max=1.0).sum()),
    ("mean keepdim", (x,), lambda a, v: (a.mean(1, keepdim=bool(v)) * 1.0).sum()),
    ("sum dtype", (x,), lambda a, v: a.sum(1, dtype=torch.float64 if v else None).float().sum()),
    ("var correction", (x,), lambda a, v: a.var(1, correction=0 if v else 1).sum()),
    ("std correction", (x,), lambda a, v: a.std(1, correction=0 if v else 1).sum()),
    ("logsumexp keepdim", (x,), lambda a, v: torch.logsumexp(a, 1, keepdim=bool(v)).sum()),
    ("amax keepdim", (x,), lambda a, v: a.amax(1, keepdim=bool(v)).sum()),
    ("rsub alpha", (x,), lambda a, v: torch.rsub(a, 2.0, alpha=3.0 if v else 1.0).sum()),
    ("add alpha", (x, y), lambda a, c, v: torch.add(a, c, alpha=2.0 if v else 1.0).sum()),
    ("sub alpha", (x, y), lambda a, c, v: torch.sub(a, c, alpha=2.0 if v else 1.0).sum()),
    ("addmm beta", (x, w, y), lambda a, m, c, v: torch.addmm(
        c, a, m, beta=2.0 if v else 1.0).sum()),
    ("baddbmm alpha", (b3,), lambda a, v: torch.baddbmm(
        a[:, :, :4], a, a.transpose(1, 2), alpha=0.5 if v else 1.0).sum()),
    ("mse_loss reduction", (x, y), lambda a, c, v: F.mse_loss(
        a, c, reduction="sum" if v else "mean")),
    ("bce pos_weight", (x, y), lambda a, c, v: F.binary_cross_entropy_with_logits(
        a, c.sigmoid(), pos_weight=c[0] if v else None)),
    ("gather sparse_grad", (x, ids), lambda a, i, v: torch.gather(
        a, 1, i, sparse_grad=bool(v)).sum()),
    ("slice step", (x,), lambda a, v: a[:, ::2 if v else 1].sum()),
    ("cat dim", (x, y), lambda a, c, v: torch.cat([a, c], dim=1 if v else 0).sum(0).sum()
     if not v else torch.cat([a, c], dim=1).sum(1).sum()),
    ("split dim", (x,), lambda a, v: (a.split(2, dim=1 if v else 0)[0] * 2.0).sum()),
    ("zeros_like dtype", (x,), lambda a, v: (a + torch.zeros_like(
        a, dtype=torch.int64 if v else None)).sum()),
]
if hasattr(F, "scaled_dot_product_attention"):
    q4 = torch.randn(2, 2, 4, 8, generator=g)
    mask = torch.rand(4, 4, generator=g) > 0.3
    mask[:, 0] = True
    CASES += [
        ("sdpa attn_mask", (q4,), lambda q, v: F.scaled_dot_product_attention(
            q, q * 2.0, q * 3.0, attn_mask=mask if v else None).sum()),
        ("sdpa float attn_mask", (q4,), lambda q, v: F.scaled_dot_product_attention(
            q, q * 2.0, q * 3.0, attn_mask=(mask.float() - 1.0) * 1e4 if v else None).sum()),
        ("sdpa is_causal", (q4,), lambda q, v: F.scaled_dot_product_attention(
            q, q * 2.0, q * 3.0, is_causal=bool(v)).sum()),
        ("sdpa scale", (q4,), lambda q, v: F.scaled_dot_product_attention(
            q, q * 2.0, q * 3.0, scale=0.5 if v else None).sum()),
        ("sdpa dropout_p", (q4,), lambda q, v: F.scaled_dot_product_attention(
            q, q * 2.0, q * 3.0, dropout_p=0.25 if v else 0.0).sum()),
    ]

for name, inputs, fn in CASES:
    def variant(v, fn=fn):
        return lambda *a: fn(*a, v)
    try:
        base = export_text(variant(0), inputs)
    except ExportError as e:
        failures.append(f"{name}: the default form does not export: {e}")
        continue
    try:
        other = export_text(variant(1), inputs)
    except ExportError:
        continue  # refused: fine
    if other == base:
        failures.append(f"{name}: the argument was accepted and ignored (same IR)")
    # The same, every defaulted argument spelt as a keyword: the same IR.
    if export_text(variant(1), inputs, keywords=True) != other:
        failures.append(f"{name}: the argument is read by position only (a keyword "
                        f"spelling exports differently)")

for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print(f"ok: {len(HANDLERS)} ops, {refused} refusals, {len(CASES)} cases")
