"""PyTorch modules stepc compiles to ops of its own.

`MoE` is a mixture-of-experts feed-forward: a PyTorch module like any
other (its forward is plain PyTorch, differentiable, trainable by
torch.optim), which `stepc.export` compiles to the step dialect's routing
ops (`top_k`, `moe_dispatch`, `grouped_matmul`, `moe_combine`: dropless or
with a capacity factor, one static plan) instead of tracing its per-expert
loop.
"""

import math
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch.library import Library

# The op `stepc.export` records for a MoE (its forward while exporting):
# one node with the module's tensors, lowered by stepc.lower.moe.
_LIB = Library("stepc", "DEF")
_LIB.define("moe(Tensor x, Tensor router, Tensor w1, Tensor w2, Tensor? w3, int top_k, "
            "str activation, float capacity_factor=0.) -> Tensor")

_exporting = [False]


@contextmanager
def exporting():
    """While stepc.export traces a model: MoE modules record `stepc::moe`."""
    _exporting[0] = True
    try:
        yield
    finally:
        _exporting[0] = False


def moe_capacity(shape, top_k, experts, capacity_factor):
    """A capacity factor's (C, S): each expert keeps at most C = ceil(F·S·K/E)
    pairs of each sequence of S tokens (x's second-to-last dimension; all
    rows of a [N, D] input); None without a capacity (dropless)."""
    if not capacity_factor:
        return None
    seq = shape[-2] if len(shape) >= 3 else shape[0]
    # (No expert can take more than a sequence's S·K pairs.)
    if capacity_factor >= experts:
        return seq * top_k, seq
    return max(1, math.ceil(capacity_factor * seq * top_k / experts)), seq


def kept_pairs(chosen, experts, capacity):
    """[N, K] bool: the (token, k) pairs a capacity (C, S) keeps, the first C
    of each expert in each sequence in (token, k) order (all without one)."""
    if capacity is None:
        return torch.ones_like(chosen, dtype=torch.bool)
    cap, seq = capacity
    n, k = chosen.shape
    hits = F.one_hot(chosen.reshape(n // seq, seq * k), experts)
    before = ((hits.cumsum(1) - 1) * hits).sum(-1)
    return (before < cap).reshape(n, k)


def moe_reference(x, router, w1, w2, w3, top_k, activation, capacity_factor=0.0):
    """The MoE's semantics in plain PyTorch (differentiable): the router's
    softmax over the experts, the top K (a stable descending sort: ties to
    the lower index, as step.top_k) renormalised as gates, each expert on
    the tokens routed to it (dropless, or those its capacity keeps), the
    outputs summed by the gates."""
    shape = x.shape
    flat = x.reshape(-1, shape[-1])
    probs = F.softmax(flat @ router.t(), dim=-1)
    values, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    gate, chosen = values[:, :top_k], order[:, :top_k]
    if top_k > 1:
        gate = gate / gate.sum(-1, keepdim=True)
    keep = kept_pairs(chosen, router.shape[0],
                      moe_capacity(shape, top_k, router.shape[0], capacity_factor))
    out = torch.zeros_like(flat)
    for e in range(router.shape[0]):
        token, slot = ((chosen == e) & keep).nonzero(as_tuple=True)
        if not token.numel():
            continue
        rows = flat[token]
        if activation == "swiglu":
            hidden = F.silu(rows @ w1[e].t()) * (rows @ w3[e].t())
        else:
            hidden = F.gelu(rows @ w1[e].t())
        out = out.index_add(0, token, gate[token, slot, None] * (hidden @ w2[e].t()))
    return out.reshape(shape)


def _moe_cpu(x, router, w1, w2, w3, top_k, activation, capacity_factor=0.0):
    with torch.no_grad():
        return moe_reference(x, router, w1, w2, w3, top_k, activation, capacity_factor)


_LIB.impl("moe", _moe_cpu, "CPU")
_LIB.impl("moe", lambda x, *rest: torch.empty_like(x), "Meta")


# A per-expert checkpoint's names for MoE's stacked weights: Mixtral's
# (experts.E.w1/w2/w3, the router as gate) and DeepSeek's (gate_proj,
# down_proj, up_proj).
_PER_EXPERT_NAMES = {"w1": ("w1", "gate_proj"), "w2": ("w2", "down_proj"),
                     "w3": ("w3", "up_proj")}


def _stack_per_expert(state_dict, prefix, *args):
    """load_state_dict's pre-hook of MoE: where the stacked `w1`, `w2`, `w3`
    are absent and `experts.0.<name>.weight` (and every other expert's) are
    present, stacks them in expert order; `gate.weight` stands for
    `router.weight`. The keys it reads go; what it cannot complete (an
    expert missing) is left for load_state_dict to report."""
    if prefix + "router.weight" not in state_dict and prefix + "gate.weight" in state_dict:
        state_dict[prefix + "router.weight"] = state_dict.pop(prefix + "gate.weight")
    for stacked, names in _PER_EXPERT_NAMES.items():
        if prefix + stacked in state_dict:
            continue
        for name in names:
            keys = []
            while f"{prefix}experts.{len(keys)}.{name}.weight" in state_dict:
                keys.append(f"{prefix}experts.{len(keys)}.{name}.weight")
            if keys:
                state_dict[prefix + stacked] = torch.stack([state_dict.pop(k) for k in keys])
                break


class MoE(torch.nn.Module):
    """A mixture of `experts` feed-forward experts of width `hidden` on
    inputs [..., dim], each token using `top_k` of them.

    activation "gelu": expert e is `w2[e] · gelu(w1[e] · x)`; "swiglu":
    `w2[e] · (silu(w1[e] · x) ∘ w3[e] · x)`. The weights are stacked, one
    nn.Linear weight ([out, in]) per expert: `router.weight` [E, dim],
    `w1` (and `w3`) [E, hidden, dim], `w2` [E, dim, hidden]. A state dict
    with one tensor per expert loads too: `experts.E.w1.weight` ... (Mixtral,
    the router as `gate.weight`) or `experts.E.gate_proj.weight`,
    `down_proj`, `up_proj` (DeepSeek), stacked in expert order.

    capacity_factor F > 0 trades dropless routing for a fixed envelope:
    each expert takes at most ceil(F·S·K/E) of the (token, expert) pairs of
    each sequence of S tokens (the input's second-to-last dimension), the
    first in token order, and the rest are dropped (the token keeps its
    other experts; the exported step reports `<module>.dropped`).
    """

    def __init__(self, dim, hidden, experts, top_k=2, activation="gelu", init_std=0.02,
                 capacity_factor=0.0):
        super().__init__()
        if activation not in ("gelu", "swiglu"):
            raise ValueError(f"MoE activation {activation!r}: expected 'gelu' or 'swiglu'")
        if not 1 <= top_k <= experts:
            raise ValueError(f"MoE top_k {top_k} must be in [1, experts={experts}]")
        if not 0 <= capacity_factor < math.inf:
            raise ValueError(f"MoE capacity_factor {capacity_factor} must be finite and >= 0 "
                             "(0: dropless)")
        self.top_k, self.activation = top_k, activation
        self.capacity_factor = float(capacity_factor)
        self.router = torch.nn.Linear(dim, experts, bias=False)

        def stacked(*shape):
            return torch.nn.Parameter(torch.randn(*shape) * init_std)
        self.w1 = stacked(experts, hidden, dim)
        self.w2 = stacked(experts, dim, hidden)
        self.w3 = stacked(experts, hidden, dim) if activation == "swiglu" else None
        torch.nn.init.normal_(self.router.weight, std=init_std)
        # Checkpoints of other MoE code hold one tensor per expert: loaded
        # stacked (see _stack_per_expert).
        self._register_load_state_dict_pre_hook(_stack_per_expert)

    def forward(self, x):
        args = (x, self.router.weight, self.w1, self.w2, self.w3, self.top_k, self.activation,
                self.capacity_factor)
        if _exporting[0]:
            return torch.ops.stepc.moe(*args)
        return moe_reference(*args)

    def extra_repr(self):
        e, h, d = self.w1.shape
        return f"dim={d}, hidden={h}, experts={e}, top_k={self.top_k}, activation={self.activation}"
