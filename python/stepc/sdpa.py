"""F.scaled_dot_product_attention as PyTorch traces it, by argument name.

PyTorch 2.x traces SDPA to its public op or to one of its back ends'
overloads (`_scaled_dot_product_flash_attention_for_cpu` on the CPU, the
CUDA flash, efficient and cuDNN ones, the math reference), each with its
own positional order and keyword-only arguments (the CPU flash takes the
mask as `attn_mask=`, the efficient one as `attn_bias`). `arguments(node)`
reads every one of them through the op's schema, so no overload's mask,
scale or dropout can be dropped by reading the wrong position; an argument
stepc cannot honour is named in `unsupported`.
"""

import operator

# The overloads (name prefixes) that compute SDPA; result 0 is the output.
OVERLOADS = (
    "aten.scaled_dot_product_attention",
    "aten._scaled_dot_product_attention_math",
    "aten._scaled_dot_product_flash_attention",  # also _for_cpu
    "aten._scaled_dot_product_efficient_attention",
    "aten._scaled_dot_product_cudnn_attention",
)
# Arguments that only ask for extra results (log-sum-exp, debug masks): no
# effect on the output.
_RESULT_ONLY = {"return_debug_mask", "compute_log_sumexp"}
# The argument names each meaning goes by across the overloads.
_MASK_NAMES = ("attn_mask", "attn_bias")


def is_sdpa(node):
    name = str(getattr(node, "target", ""))
    return getattr(node, "op", None) == "call_function" and name.startswith(OVERLOADS)


def returns_tuple(node):
    """The back ends' overloads return (output, log-sum-exp, ...)."""
    return not str(node.target).startswith("aten.scaled_dot_product_attention")


class Arguments:
    def __init__(self):
        self.query = self.key = self.value = self.mask = None
        self.dropout = 0.0
        self.causal = False
        self.scale = None
        self.gqa = False
        self.unsupported = []  # (name, value) stepc cannot honour


def arguments(node):
    """An `Arguments` of an SDPA node, every schema argument accounted for."""
    schema = node.target._schema
    values = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            values[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            values[arg.name] = node.kwargs[arg.name]
        else:
            values[arg.name] = arg.default_value if arg.has_default_value() else None
    a = Arguments()
    for name, value in values.items():
        if name in ("query", "key", "value"):
            setattr(a, name, value)
        elif name in _MASK_NAMES:
            a.mask = value
        elif name == "dropout_p":
            a.dropout = float(value or 0.0)
        elif name == "is_causal":
            a.causal = bool(value)
        elif name == "scale":
            a.scale = None if value is None else float(value)
        elif name == "enable_gqa":
            a.gqa = bool(value)
        elif name in _RESULT_ONLY:
            continue
        elif value is not None and value is not False:
            a.unsupported.append((name, value))  # dropout_mask, philox seeds, ...
    return a


def output_node(node):
    """The node holding SDPA's output: the op itself, or its getitem 0."""
    if not returns_tuple(node):
        return node
    users = [u for u in node.users
             if u.op == "call_function" and u.target is operator.getitem and u.args[1] == 0]
    return users[0] if len(users) == 1 else None
