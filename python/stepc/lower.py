"""Lowers a captured ATen graph to one `step` loss function.

Composites found by patterns.py become stepc's composite ops (attention,
cross_entropy, rms_norm, rotary); the rest maps op by op (table `HANDLERS`).
Only what the loss needs is lowered; an op with no mapping is an
ExportError naming the ATen op and the model's source line.
"""

import math
import operator

import torch

from .errors import ExportError
from .mlir_writer import FunctionWriter, Value, eps_attr, ttype
from . import sdpa as sdpa_args
from .patterns import IDENTITY_CASTS, Matcher, is_call, shape_of
from . import nn as _nn  # noqa: F401  (defines torch.ops.stepc.moe)

aten = torch.ops.aten


def where(node):
    return node.meta.get("stepc_source", "<unknown source>")


def fail(node, message):
    raise ExportError(f"{where(node)}: {message}")


def argument(node, index, name, default=None):
    """Argument `name` of `node`: at position `index`, else by keyword, else
    `default` (a trace may spell an argument either way)."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def dense(value):
    """An MLIR dense literal element."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    v = float(value)
    if math.isinf(v):
        return "0xFF800000" if v < 0 else "0x7F800000"
    if math.isnan(v):
        return "0x7FC00000"
    text = repr(v)
    # MLIR's float literals need a digit after a point: 1e-05 is 1.0e-05.
    mantissa, e, exponent = text.partition("e")
    return mantissa + ("" if "." in mantissa else ".0") + e + exponent


class Lowering:
    def __init__(self, captured, blocks, inits, optimizer_markers=None):
        self.c = captured
        # {parameter name: (weight_decay, lr_scale)} from a torch.optim optimizer
        self.optimizer_markers = optimizer_markers or {}
        self.graph = captured.graph_module.graph
        self.w = FunctionWriter("f32")
        self.env = {}
        self.consts = {}
        self.blocks, self.inits = blocks, inits
        self.param_nodes = {}
        self.reshaped_from = {}
        self.input_nodes = {}  # node -> (forward's name, index in the writer's args)
        self.input_names = {}  # forward's name -> the step's input name

    # -- values ------------------------------------------------------------
    def v(self, a):
        """The step value of argument `a` (a node)."""
        if a in self.env:
            return self.env[a]
        if a in self.consts:
            return self.constant(self.consts[a], a)
        fail(a, f"internal: {a.name} used before it was lowered")

    def constant(self, tensor, node):
        t = torch.as_tensor(tensor)
        if t.dtype in (torch.int64, torch.int32, torch.bool):
            dtype = "i32"
            t = t.to(torch.int64)
        else:
            dtype = "f32"
        shape = list(t.shape)
        flat = t.reshape(-1).tolist()
        if len(set(flat)) == 1:
            body = dense(flat[0])
        else:
            if len(flat) > 1 << 20:
                fail(node, f"a constant of {len(flat)} elements is too large to embed")
            body = "[" + ", ".join(dense(x) for x in flat) + "]"
            if len(shape) > 1:  # nested literal
                body = nested(t.tolist())
        return self.w.emit("c", shape, f"step.constant dense<{body}> : {{out}}", dtype=dtype)

    def scalar_like(self, value, shape):
        """An f32 constant of `shape` (a Python int scalar, as in `x * 2`, too)."""
        return self.w.emit("c", shape, f"step.constant dense<{dense(float(value))}> : {{out}}")

    def to_shape(self, x, shape, node):
        """x broadcast (NumPy rules) to `shape`."""
        if x.shape == shape:
            return x
        if len(x.shape) > len(shape):
            fail(node, f"cannot broadcast {x.shape} to {shape}")
        if math.prod(x.shape) == math.prod(shape):
            return self.reshape(x, shape)
        return self.w.broadcast(x, shape, "bcast")

    def reshape(self, x, shape):
        """x reshaped (one -1 allowed); a reshape of a reshape starts from the
        first one's input (so a Linear's [N, K] round trip leaves no op)."""
        shape = list(shape)
        if -1 in shape:
            known = math.prod(d for d in shape if d != -1)
            shape[shape.index(-1)] = math.prod(x.shape) // known
        x = self.reshaped_from.get(x.name, x)
        if x.shape == list(shape):
            return x
        y = self.w.emit("r", list(shape), f"step.reshape {x.name} : {x.type} -> {{out}}",
                        dtype=x.dtype)
        self.reshaped_from[y.name] = x
        return y

    def operand(self, a, shape, node):
        """A binary operand: a node's value or a Python scalar, at `shape`."""
        if isinstance(a, (int, float, bool)):
            return self.scalar_like(a, shape)
        return self.to_shape(self.v(a), shape, node)

    # -- driver ------------------------------------------------------------
    def run(self):
        nodes = list(self.graph.nodes)
        placeholders = [n for n in nodes if n.op == "placeholder"]
        n_params, n_buffers = len(self.c.params), len(self.c.buffers)
        for i, node in enumerate(placeholders):
            if i < n_params:
                name, tensor = self.c.params[i]
                shape = list(tensor.shape)
                if tensor.dtype != torch.float32:
                    fail(node, f"parameter '{name}' is {tensor.dtype}; stepc imports float32 "
                               f"parameters (its precision is a compile flag)")
                decay, lr_scale = self.optimizer_markers.get(name, (None, 1.0))
                self.env[node] = self.w.param(name, shape, self.inits[name],
                                              self.blocks.get(name), name in self.c.frozen,
                                              decay, lr_scale)
                self.param_nodes[node] = name
            elif i < n_params + n_buffers:
                self.consts[node] = self.c.buffers[i - n_params][1]
            else:
                name, example = self.c.inputs[i - n_params - n_buffers]
                shape = list(example.shape)
                self.input_nodes[node] = (name, len(self.w.args))
                if example.dtype in (torch.int64, torch.int32):
                    self.env[node] = self.w.input(name, shape)
                elif example.dtype == torch.float32:
                    self.env[node] = self.w.input(name, shape, dtype="f32")
                else:
                    raise ExportError(f"input '{name}' is {example.dtype}; expected integer "
                                      f"ids or float32 features")
        self.refuse_autograd_functions(nodes)
        self.refuse_mutations(nodes, placeholders[n_params:n_params + n_buffers])
        self.refuse_dynamic_shapes(nodes)
        self.fold_constants(nodes)
        replacements = Matcher(self.graph, self.consts, placeholders[:n_params]).run()
        output = next(n for n in nodes if n.op == "output")
        loss_node = self.find_loss(output)
        needed = self.needed(loss_node, replacements)
        # The smoothing was traced away: only a step.cross_entropy can hold it.
        nll = [n for n in nodes if is_call(n, torch.ops.aten.nll_loss_forward.default) or
               is_call(n, torch.ops.aten.nll_loss2d_forward.default)]
        mapped = [r for r in replacements.values() if r.kind == "cross_entropy"]
        if self.c.label_smoothing and len(nll) > len(mapped):
            fail(nll[0], "label_smoothing on a cross-entropy other than the mean of "
                         "F.cross_entropy over [N, C] logits without weights")
        for node in nodes:
            if node not in needed or node in self.env or node in self.consts:
                continue
            r = replacements.get(node)
            value = self.composite(r) if r else self.lower(node)
            # Made under torch.no_grad(): no gradient flows back through it.
            if node.meta.get("stepc_no_grad") and value is not None and value.dtype == "f32":
                value = self.w.unary("stop_gradient", value, "no_grad")
            self.env[node] = value
        loss = self.v(loss_node)
        if loss.shape != [] or loss.dtype != "f32":
            fail(loss_node, f"the loss must be a float32 scalar, got {ttype(loss.shape, loss.dtype)}")
        self.remove_dead_ops(loss)
        self.name_language_model_inputs(replacements, needed)
        self.ignore_index = next((r.attrs["ignore_index"] for r in replacements.values()
                                  if r.kind == "cross_entropy" and r.node in needed), None)
        return loss

    def refuse_dynamic_shapes(self, nodes):
        """PyTorch 2.x traces a data-dependent shape (x[x > 0]) as a symbolic
        size; 1.13 stops at it (capture.py). Either is an error at the line."""
        for node in nodes:
            val = node.meta.get("val")
            shape = getattr(val, "shape", None)
            if shape is not None and not all(isinstance(d, int) for d in shape):
                fail(node, f"a dynamic shape (the result of {node.target} depends on tensor "
                           f"values) cannot be compiled into a static step")

    def refuse_autograd_functions(self, nodes):
        """A custom torch.autograd.Function: only its forward was traced, so
        its backward would be lost in silence (capture.py marks its nodes)."""
        for node in nodes:
            function = node.meta.get("stepc_autograd_function")
            if function is not None and node.op == "call_function":
                fail(node, f"the custom torch.autograd.Function '{function}': stepc "
                           f"differentiates the ops of a forward itself and cannot run its "
                           f"backward; write it with plain ops (a straight-through estimator "
                           f"as x + (f(x) - x).detach())")

    def refuse_mutations(self, nodes, buffers):
        """A buffer the forward updates in place (BatchNorm's running
        statistics, a counter) would be a constant of the step that silently
        stops changing: an error at the line."""
        names = dict(zip(buffers, (n for n, _ in self.c.buffers)))
        for node in nodes:
            schema = getattr(node.target, "_schema", None)
            if node.op != "call_function" or schema is None or not schema.is_mutable:
                continue
            written = [a for a, arg in zip(node.args, schema.arguments)
                       if arg.alias_info is not None and arg.alias_info.is_write]
            for a in written:
                if a in names:
                    hint = ""
                    if names[a].rsplit(".", 1)[-1] in ("running_mean", "running_var",
                                                       "num_batches_tracked"):
                        hint = ("; BatchNorm in training mode updates its running statistics: "
                                "use nn.LayerNorm or nn.GroupNorm, which normalise each "
                                "sample (model.eval() would export it as a fixed affine map "
                                "of those statistics, not as train mode normalises)")
                    fail(node, f"the forward updates buffer '{names[a]}' in place "
                               f"({node.target}); stepc compiles buffers as constants{hint}")
                fail(node, f"an in-place update ({node.target}) of a value the step cannot "
                           f"hold as state")

    def remove_dead_ops(self, loss):
        """Drops body lines whose value nothing reads (a Linear's weight
        transpose, the [N, K] views around it): the walk from the loss (and
        the metrics) lowers operands an op then looks through."""
        import re
        # A line defines one value, or several ("%a, %b = step.top_k ...").
        defined = [re.findall(r"%[\w.]+", line.split(" = ", 1)[0]) for line in self.w.body]
        live, work = set(), [loss.name] + [v.name for _, v in self.w.metrics]
        index = {name: i for i, names in enumerate(defined) for name in names}
        while work:
            name = work.pop()
            i = index.get(name)
            if i is None or i in live:
                continue
            live.add(i)
            work.extend(re.findall(r"%[\w.]+", self.w.body[i].split(" = ", 1)[1]))
        self.w.body = [line for i, line in enumerate(self.w.body) if i in live]

    def name_language_model_inputs(self, replacements, needed):
        """A language model's inputs become 'tokens' and 'targets' (the names
        stepc-run's token data and sampler feed): the cross-entropy's targets
        input, and the one other integer input of its shape."""
        ce = [r for r in replacements.values() if r.kind == "cross_entropy" and r.node in needed]
        if len(ce) != 1 or ce[0].operands[1] not in self.input_nodes:
            return
        targets = ce[0].operands[1]
        others = [n for n in self.input_nodes if n is not targets and n in needed and
                  self.env[n].dtype == "i32" and self.env[n].shape == self.env[targets].shape]
        renames = {targets: "targets"}
        if len(others) == 1:
            renames[others[0]] = "tokens"
        taken = {name for name, _ in self.input_nodes.values()}
        for node, new in renames.items():
            old, index = self.input_nodes[node]
            if new in taken and new != old:
                continue  # another input already has that name
            self.w.args[index] = self.w.args[index].replace(f'{{step.input = "{old}"}}',
                                                            f'{{step.input = "{new}"}}')
            self.input_names[old] = new

    def find_loss(self, output):
        """The scalar float among the returned values (nanoGPT: (logits, loss))."""
        flat = []

        def collect(a):
            if isinstance(a, (tuple, list)):
                for x in a:
                    collect(x)
            elif isinstance(a, torch.fx.Node):
                flat.append(a)
        collect(output.args[0])
        scalars = [n for n in flat if shape_of(n) == [] and
                   n.meta.get("tensor_meta") is not None and
                   n.meta["tensor_meta"].dtype.is_floating_point]
        if len(scalars) != 1:
            raise ExportError(f"the model must return its scalar loss (alone or beside its "
                              f"logits), found {len(scalars)} scalar float results")
        return scalars[0]

    def needed(self, root, replacements):
        seen, work = set(), [root]
        while work:
            n = work.pop()
            if n in seen:
                continue
            seen.add(n)
            r = replacements.get(n)
            work.extend(r.operands if r else n.all_input_nodes)
        return seen

    def fold_constants(self, nodes):
        for node in nodes:
            if node.op == "get_attr":
                self.consts[node] = getattr(self.c.graph_module, node.target)
            elif node.op == "call_function":
                inputs = node.all_input_nodes
                if any(a not in self.consts for a in inputs):
                    continue
                if not inputs and node.target not in (aten.arange.start, aten.arange.default,
                                                      aten.arange.start_step, aten.full.default,
                                                      aten.ones.default, aten.zeros.default,
                                                      aten.scalar_tensor.default):
                    continue
                args = torch.fx.node.map_arg(node.args, lambda a: self.consts[a])
                kwargs = dict(torch.fx.node.map_arg(node.kwargs, lambda a: self.consts[a]))
                kwargs.pop("device", None)
                kwargs.pop("pin_memory", None)
                try:
                    self.consts[node] = node.target(*args, **kwargs)
                except Exception:  # leave it to the op's own lowering
                    continue

    # -- composites --------------------------------------------------------
    def composite(self, r):
        w, a = self.w, r.attrs
        if r.kind == "attention":
            q, k, v = (self.reshape(self.v(x), [a["batch"], a["seq"], -1])
                       for x in r.operands[:3])
            mask, mask_type = "", ""
            if len(r.operands) == 4:
                m = self.attention_mask(r.operands[3], a["mask_kind"])
                mask, mask_type = f" mask {m.name}", f", {m.type}"
            out = w.emit("attn", list(q.shape),
                         f"step.attention {q.name}, {k.name}, {v.name}{mask} heads {a['heads']} "
                         f"kv_heads {a['kv_heads']} head_dim {a['head_dim']}"
                         f"{' causal' if a['causal'] else ''}"
                         f"{self.scale_attr(a['scale'], a['head_dim'])} "
                         f": ({q.type}, {k.type}, {v.type}{mask_type}) -> {{out}}")
            return self.reshape(out, shape_of(r.node))
        if r.kind == "rotary":
            x = self.reshape(self.v(r.operands[0]), [a["batch"], a["seq"], -1])
            out = w.rotary(x, a["head_dim"], a["theta"], "rot")
            return self.reshape(out, shape_of(r.node))
        if r.kind == "cross_entropy":
            logits, targets = (self.v(x) for x in r.operands)
            if targets.dtype != "i32":
                fail(r.node, "cross-entropy targets must be integer class ids")
            logits = self.reshape(logits, targets.shape + logits.shape[-1:])
            return w.cross_entropy(logits, targets, "loss", ignore_index=a.get("ignore_index"),
                                   label_smoothing=self.c.label_smoothing)
        if r.kind == "rms_norm":
            x, weight = (self.v(n) for n in r.operands)
            return w.rms_norm(x, weight, a["eps"], "rms")
        raise AssertionError(r.kind)

    def attention_mask(self, node, kind):
        """A mask as step.attention's operand: additive f32, rank 4, its key
        dim whole (patterns checked the broadcast). A boolean mask is -inf
        where it hides: where False for SDPA ("attends"), where True for
        masked_fill ("hidden")."""
        m = self.v(node)
        if m.dtype == "f32" and kind != "hidden":  # SDPA's float mask is additive
            pass
        elif kind == "additive":
            m = convert(self, m, "f32")
        else:
            flag = convert(self, m, "i1")
            zero = self.scalar_like(0.0, m.shape)
            ninf = self.scalar_like(float("-inf"), m.shape)
            seen, hidden = (zero, ninf) if kind == "attends" else (ninf, zero)
            m = self.w.emit("mask", m.shape, f"step.select {flag.name}, {seen.name}, "
                                             f"{hidden.name} : {flag.type}, {zero.type}")
        return self.reshape(m, [1] * (4 - len(m.shape)) + list(m.shape))

    @staticmethod
    def scale_attr(scale, head_dim):
        if abs(scale * math.sqrt(head_dim) - 1.0) < 1e-6:
            return ""
        return f" {{scale = {float(scale)!r} : f64}}"

    # -- op by op ----------------------------------------------------------
    def lower(self, node):
        if node.op != "call_function":
            fail(node, f"unsupported graph node {node.op} {node.target}")
        if node.target is operator.getitem:
            return self.getitem(node)
        handler = HANDLERS.get(node.target)
        if handler is not None:
            refuse_unread_arguments(node)
        if handler is None and sdpa_args.is_sdpa(node):
            handler = sdpa_math if not sdpa_args.returns_tuple(node) else lambda lw, n: None
        if handler is None:
            fail(node, f"the ATen op {node.target} has no stepc lowering "
                       f"(docs/pytorch.md lists what is supported)")
        return handler(self, node)

    def getitem(self, node):
        src, i = node.args
        if is_call(src, aten.native_layer_norm.default) and i == 0:
            return self.layer_norm(src)
        if is_call(src, *SPLITS):
            return self.split_part(src, i, node)
        if is_call(src, aten.native_dropout.default) and i == 0:
            return self.dropout(src)
        if is_call(src, aten.log_sigmoid_forward.default) and i == 0:
            return log_sigmoid(self, src)
        if sdpa_args.is_sdpa(src) and i == 0:
            return sdpa_math(self, src)
        fail(node, f"unsupported use of result #{i} of {getattr(src, 'target', src)}")

    def layer_norm(self, ln):
        x, normalized, weight, bias, eps = ln.args
        xv = self.v(x)
        if list(normalized) != xv.shape[-1:]:
            fail(ln, f"layer_norm over {list(normalized)}: stepc normalises the last dimension")
        c = xv.shape[-1]
        wv = self.v(weight) if weight is not None else self.scalar_like(1.0, [c])
        bv = self.v(bias) if bias is not None else self.scalar_like(0.0, [c])
        return self.w.layer_norm(xv, wv, bv, eps, "ln")

    def split_part(self, src, i, node):
        x = self.v(src.args[0])
        dim = argument(src, 2, "dim", 0) % len(x.shape)
        size = x.shape[dim]
        if src.target == aten.unbind.int:
            dim = argument(src, 1, "dim", 0) % len(x.shape)
            part = self.w.slice(x, dim, i, 1, "part")
            return self.reshape(part, shape_of(node))
        if src.target in (aten.split_with_sizes.default, aten.unsafe_split_with_sizes.default):
            sizes = list(src.args[1])
        elif src.target == aten.chunk.default:
            n = src.args[1]
            each = -(-x.shape[dim] // n)
            sizes = [min(each, size - k * each) for k in range(n) if k * each < size]
        else:
            each = src.args[1]
            sizes = [min(each, size - k) for k in range(0, size, each)]
        return self.w.slice(x, dim, sum(sizes[:i]), sizes[i], "part")

    def emit_pow(self, x, p):
        return self.w.emit("pow", x.shape, f"step.pow {x.name} exponent {p!r} : {x.type}")

    def dropout(self, node):
        """In training, step.dropout: stepc's own counter-based masks (the
        same on any mesh, never saved), not PyTorch's generator's."""
        p, train = node.args[1], node.args[2]
        if p == 0.0 or not train:
            return self.v(node.args[0])
        if not 0.0 < p < 1.0:
            fail(node, f"dropout with p = {p}: stepc drops with a rate in [0, 1)")
        return self.w.dropout(self.v(node.args[0]), p, "drop")


# The ops that cut a tensor into parts along one dim (split_part); the
# unsafe_ forms are what nn.LSTMCell and nn.GRUCell trace to.
SPLITS = (aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int, aten.chunk.default,
          aten.unsafe_split.Tensor, aten.unsafe_split_with_sizes.default)


def nested(values):
    if isinstance(values, list):
        return "[" + ", ".join(nested(v) for v in values) + "]"
    return dense(values)


# -- the op table ------------------------------------------------------------

def identity(lw, node):
    return lw.v(node.args[0])


# torch dtypes as step element types: integers are i32 (ids), bools masks.
STEP_DTYPES = {torch.float32: "f32", torch.int64: "i32", torch.int32: "i32", torch.bool: "i1"}


def convert(lw, x, dtype, hint="cast"):
    """x as step element type `dtype` (a step.convert unless it already is)."""
    if x.dtype == dtype:
        return x
    return lw.w.emit(hint, x.shape, f"step.convert {x.name} : {x.type} -> {{out}}", dtype=dtype)


def to_copy(lw, node):
    x = lw.v(node.args[0])
    dtype = node.kwargs.get("dtype")
    if dtype is None:
        return x
    if dtype not in STEP_DTYPES:
        fail(node, f"a cast to {dtype}: stepc imports float32 models (--precision=bf16 is "
                   f"the compiler's choice)")
    return convert(lw, x, STEP_DTYPES[dtype])


def result_dtype(node):
    """The step element type of node's (first) result."""
    val = node.meta.get("val")
    dtype = getattr(val, "dtype", None)
    if dtype not in STEP_DTYPES:
        fail(node, f"a result of dtype {dtype}: stepc imports float32, integer and bool tensors")
    return STEP_DTYPES[dtype]


def typed_operand(lw, a, shape, dtype, node):
    """Operand `a` (a node or a Python scalar) at `shape` as element type `dtype`."""
    if isinstance(a, (int, float, bool)):
        value = float(a) if dtype == "f32" else int(a)
        return lw.w.emit("c", shape, f"step.constant dense<{dense(value)}> : {{out}}", dtype=dtype)
    return convert(lw, lw.to_shape(lw.v(a), shape, node), dtype)


def compare(predicate):
    """torch.lt ... torch.ne: operands in their common type (float if either
    is), an i1 mask."""
    def lower(lw, node):
        shape = shape_of(node)
        a, b = node.args[:2]
        floats = any(isinstance(x, float) or (isinstance(x, torch.fx.Node) and
                                              lw.v(x).dtype == "f32") for x in (a, b))
        dtype = "f32" if floats else "i32"
        x, y = (typed_operand(lw, v, shape, dtype, node) for v in (a, b))
        return lw.w.emit(predicate, shape, f"step.compare {predicate}, {x.name}, {y.name} : "
                                          f"{x.type}", dtype="i1")
    return lower


def logical(op):
    """and / or / xor / not of masks (bitwise_* on bools): through 0/1 floats,
    compared back to a mask (step has no boolean arithmetic)."""
    def lower(lw, node):
        shape = shape_of(node)
        if result_dtype(node) != "i1":
            fail(node, f"{node.target} of integers: stepc combines boolean masks")
        ones = [typed_operand(lw, a, shape, "f32", node)
                for a in node.args[:1 if op == "not" else 2]]
        if op == "not":
            x, predicate, c = ones[0], "eq", 0.0
        elif op == "and":
            x, predicate, c = lw.w.binary("mul", ones[0], ones[1], "and"), "gt", 0.0
        elif op == "or":
            x, predicate, c = lw.w.binary("add", ones[0], ones[1], "or"), "gt", 0.0
        else:
            x, predicate, c = lw.w.binary("sub", ones[0], ones[1], "xor"), "ne", 0.0
        zero = lw.scalar_like(c, shape)
        return lw.w.emit(op, shape, f"step.compare {predicate}, {x.name}, {zero.name} : {x.type}",
                         dtype="i1")
    return lower


def torch_where(lw, node):
    """torch.where(mask, x, y): step.select in the result's type."""
    shape, dtype = shape_of(node), result_dtype(node)
    if dtype == "i1":
        fail(node, "torch.where choosing between masks")
    mask = typed_operand(lw, node.args[0], shape, "i1", node)
    x, y = (typed_operand(lw, v, shape, dtype, node) for v in node.args[1:3])
    return lw.w.emit("where", shape, f"step.select {mask.name}, {x.name}, {y.name} : "
                                     f"{mask.type}, {x.type}", dtype=dtype)


def masked_fill(lw, node):
    """x.masked_fill(mask, value): select(mask, value, x)."""
    shape, dtype = shape_of(node), result_dtype(node)
    mask = typed_operand(lw, node.args[1], shape, "i1", node)
    value, x = (typed_operand(lw, v, shape, dtype, node) for v in (node.args[2], node.args[0]))
    return lw.w.emit("fill", shape, f"step.select {mask.name}, {value.name}, {x.name} : "
                                    f"{mask.type}, {x.type}", dtype=dtype)


def gather(lw, node):
    """torch.gather(x, dim, index) (no sparse gradient)."""
    if node.kwargs.get("sparse_grad") or (len(node.args) > 3 and node.args[3]):
        fail(node, "torch.gather with sparse_grad=True")
    x, index = lw.v(node.args[0]), lw.v(node.args[2])
    dim = node.args[1] % len(x.shape)
    if index.dtype != "i32":
        fail(node, "torch.gather with a non-integer index")
    return lw.w.emit("gather", list(index.shape), f"step.gather {x.name}, {index.name} dim {dim} "
                                                  f": ({x.type}, {index.type}) -> {{out}}")


def argmax(lw, node):
    """torch.argmax(x, dim, keepdim): the first largest, i32 (no gradient)."""
    x = lw.v(node.args[0])
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if dim is None:
        x, dim = lw.reshape(x, [math.prod(x.shape)]), 0
    dim %= len(x.shape)
    shape = x.shape[:dim] + x.shape[dim + 1:]
    out = lw.w.emit("argmax", shape, f"step.argmax {x.name} dim {dim} : ({x.type}) -> {{out}}",
                    dtype="i32")
    return lw.reshape(out, shape_of(node))


def reshape(lw, node):
    return lw.reshape(lw.v(node.args[0]), shape_of(node))


def permute(lw, node, perm):
    x = lw.v(node.args[0])
    perm = [p % len(x.shape) for p in perm]
    if perm == list(range(len(perm))):
        return x
    shape = [x.shape[p] for p in perm]
    return lw.w.emit("tr", shape, f"step.transpose {x.name} {perm} : ({x.type}) -> {{out}}")


def transpose(lw, node):
    rank = len(shape_of(node))
    d0, d1 = node.args[1] % rank, node.args[2] % rank
    perm = list(range(rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return permute(lw, node, perm)


def expand(lw, node):
    x = lw.v(node.args[0])
    shape = shape_of(node)
    return x if x.shape == shape else lw.w.broadcast(x, shape, "exp")


def slice_(lw, node):
    x = lw.v(node.args[0])
    dim = argument(node, 1, "dim", 0) % len(x.shape)
    start = argument(node, 2, "start")
    end = argument(node, 3, "end")
    start = 0 if start is None else start
    end = x.shape[dim] if end is None else end
    step = argument(node, 4, "step", 1)
    if step != 1:
        fail(node, "a strided slice (step != 1) has no stepc lowering")
    start = max(0, start + x.shape[dim] if start < 0 else start)
    end = min(x.shape[dim], end + x.shape[dim] if end < 0 else end)
    if start == 0 and end == x.shape[dim]:
        return x
    return lw.w.slice(x, dim, start, end - start, "sl")


def select(lw, node):
    x = lw.v(node.args[0])
    dim = node.args[1] % len(x.shape)
    i = node.args[2] % x.shape[dim]
    return lw.reshape(lw.w.slice(x, dim, i, 1, "sel"), shape_of(node))


def cat(lw, node):
    parts = [lw.v(a) for a in node.args[0]]
    dim = argument(node, 1, "dim", 0) % len(parts[0].shape)
    names = ", ".join(p.name for p in parts)
    types = ", ".join(p.type for p in parts)
    return lw.w.emit("cat", shape_of(node), f"step.concat {names} dim {dim} : ({types}) -> {{out}}")


def stack(lw, node):
    shape = shape_of(node)
    dim = argument(node, 1, "dim", 0) % len(shape)
    part_shape = shape[:dim] + [1] + shape[dim + 1:]
    parts = [lw.reshape(lw.v(a), part_shape) for a in node.args[0]]
    names = ", ".join(p.name for p in parts)
    types = ", ".join(p.type for p in parts)
    return lw.w.emit("stk", shape, f"step.concat {names} dim {dim} : ({types}) -> {{out}}")


def binary(op):
    def lower(lw, node):
        if node.kwargs.get("alpha", 1) != 1:
            fail(node, f"{node.target} with alpha != 1")
        shape = shape_of(node)
        a, b = (lw.operand(x, shape, node) for x in node.args[:2])
        return lw.w.binary(op, a, b, op)
    return lower


def rsub(lw, node):
    """other - alpha · self."""
    shape = shape_of(node)
    alpha = node.args[2] if len(node.args) > 2 else node.kwargs.get("alpha", 1)
    a, b = (lw.operand(x, shape, node) for x in node.args[:2])
    return lw.w.binary("sub", b, scaled(lw, a, alpha, "alpha_x"), "rsub")


def unary(op, attrs=""):
    return lambda lw, node: lw.w.unary(op, lw.v(node.args[0]), op, attrs)


def gelu(lw, node):
    approx = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
    return lw.w.unary("gelu", lw.v(node.args[0]), "gelu",
                      " approximate tanh" if approx == "tanh" else "")


def moe(lw, node):
    """stepc.nn.MoE (the `stepc::moe` op its forward records while
    exporting): the router's softmax, top_k with renormalised gates,
    moe_dispatch, each expert as grouped products, moe_combine."""
    x, router, w1, w2, w3 = (
        lw.v(t) if t is not None else None
        for t in (argument(node, i, n) for i, n in enumerate(("x", "router", "w1", "w2", "w3"))))
    top_k = argument(node, 5, "top_k", None)
    activation = argument(node, 6, "activation", "gelu")
    capacity_factor = argument(node, 7, "capacity_factor", 0.0)
    if x is None or router is None or w1 is None or w2 is None:
        fail(node, "MoE without its input, router, w1 or w2")
    if len(x.shape) < 2 or len(router.shape) != 2 or router.shape[1] != x.shape[-1]:
        fail(node, f"MoE input of shape {x.shape} for a router of {router.shape}")
    # Each expert an nn.Linear weight: w1 (and w3) [E, hidden, dim], w2 [E, dim, hidden].
    e, d = router.shape
    h = w1.shape[1] if len(w1.shape) == 3 else None
    if list(w1.shape) != [e, h, d] or list(w2.shape) != [e, d, h] or \
            (w3 is not None and list(w3.shape) != list(w1.shape)):
        fail(node, f"MoE weights w1 {list(w1.shape)}, w2 {list(w2.shape)}"
             f"{'' if w3 is None else f', w3 {list(w3.shape)}'} for {e} experts of dim {d}: "
             "expected w1 (and w3) [E, hidden, dim], w2 [E, dim, hidden]")
    if activation not in ("gelu", "swiglu"):
        fail(node, f"MoE activation {activation!r}: stepc lowers 'gelu' and 'swiglu'")
    if (w3 is None) != (activation == "gelu"):
        fail(node, f"MoE activation {activation!r} with{'' if w3 is not None else 'out'} w3")
    if not isinstance(top_k, int) or not 1 <= top_k <= router.shape[0]:
        fail(node, f"MoE top_k {top_k!r}: expected 1 to {router.shape[0]} experts")
    w = lw.w
    experts = router.shape[0]
    flat = lw.reshape(x, [-1, x.shape[-1]])
    probs = w.softmax(w.matmul(flat, router, "router"), "router_probs")
    gate, chosen = w.top_k(probs, top_k, "moe")
    if top_k > 1:
        total = w.reduce("reduce_sum", gate, [1], "gate_sum", keep=True)
        gate = w.binary("div", gate, w.broadcast(total, gate.shape, "gate_total"), "gate_norm")
    if not isinstance(capacity_factor, (int, float)) or not 0 <= capacity_factor < math.inf:
        fail(node, f"MoE capacity_factor {capacity_factor!r}: expected a finite number >= 0")
    capacity = _nn.moe_capacity(x.shape, top_k, experts, capacity_factor)
    rows, counts = w.moe_dispatch(flat, chosen, experts, "moe", capacity)
    if activation == "swiglu":
        hidden = w.binary("mul", w.unary("silu", w.grouped_matmul(rows, w1, counts, "moe_w1"),
                                         "moe_silu"),
                          w.grouped_matmul(rows, w3, counts, "moe_w3"), "moe_swiglu")
    else:
        hidden = w.unary("gelu", w.grouped_matmul(rows, w1, counts, "moe_w1"), "moe_gelu")
    out = w.moe_combine(w.grouped_matmul(hidden, w2, counts, "moe_w2"), gate, chosen, experts,
                        "moe_out", capacity)
    # The layer's metric, named for its module ("layers.0.moe.expert_load"):
    # the batch's share of routed pairs at each expert.
    router_name = lw.param_nodes.get(argument(node, 1, "router"), "")
    suffix = ".router.weight"
    layer = router_name[:-len(suffix)] if router_name.endswith(suffix) else f"moe{len(w.metrics)}"
    # (The batch leads x's dimensions: data parallelism splits it.)
    hit = w.one_hot_experts(chosen, experts, x.shape[0], "moe")
    w.metric(f"{layer}.expert_load", w.expert_load(hit, "moe"))
    if capacity:
        w.metric(f"{layer}.dropped", w.dropped_share(hit, counts, "moe"))
    return lw.reshape(out, x.shape)


def clamp(lw, node):
    """clamp(x, min, max) = minimum(maximum(x, min), max), a missing bound
    left out. (Its gradient passes where min < x < max; PyTorch's also at
    x exactly equal to a bound.)"""
    shape = shape_of(node)
    y = lw.v(node.args[0])
    lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
    hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
    if lo is None and hi is None:
        fail(node, "clamp without a bound")
    if lo is not None:
        y = lw.w.binary("maximum", y, lw.operand(lo, shape, node), "clamp_min")
    if hi is not None:
        y = lw.w.binary("minimum", y, lw.operand(hi, shape, node), "clamp_max")
    return y


def clamp_bound(op):
    def lower(lw, node):
        shape = shape_of(node)
        return lw.w.binary(op, lw.v(node.args[0]), lw.operand(node.args[1], shape, node), op)
    return lower


def power(lw, node):
    x, p = lw.v(node.args[0]), node.args[1]
    if p == 2:
        return lw.w.binary("mul", x, x, "sq")
    if p == 0.5:
        return lw.w.unary("sqrt", x, "sqrt")
    if p == -0.5:
        return lw.w.unary("rsqrt", x, "rsqrt")
    if p == 1:
        return x
    if not isinstance(p, (int, float)) or p != p or p in (float("inf"), float("-inf")):
        fail(node, f"x ** {p}: stepc raises to a finite constant exponent")
    return lw.emit_pow(x, float(p))


def reduce(op):
    def lower(lw, node):
        x = lw.v(node.args[0])
        dims = argument(node, 1, "dim")
        if dims is None or (isinstance(dims, (list, tuple)) and not dims):
            dims = list(range(len(x.shape)))  # none given (amax's [] too): all
        dims = sorted(d % len(x.shape) for d in ([dims] if isinstance(dims, int) else dims))
        keep = argument(node, 2, "keepdim", False)
        if node.kwargs.get("dtype") not in (None, torch.float32):
            fail(node, f"{node.target} in {node.kwargs['dtype']}")
        out = [d for i, d in enumerate(x.shape) if i not in dims]
        y = lw.w.emit(op, out, f"step.{op} {x.name} dims {dims} : ({x.type}) -> {{out}}")
        return lw.reshape(y, shape_of(node)) if keep else y
    return lower


def along_dim(op, prefix):
    """softmax and log_softmax: a line op along one dim (negative dims wrap)."""
    def lower(lw, node):
        x = lw.v(node.args[0])
        dim = node.args[1] % len(x.shape)
        return lw.w.emit(prefix, x.shape, f"step.{op} {x.name} dim {dim} : ({x.type}) -> {{out}}")
    return lower


def is_param_t(lw, node):
    """node is the transpose of a 2-D parameter (a Linear's weight)."""
    if is_call(node, aten.t.default) or (is_call(node, aten.transpose.int) and
                                         sorted(a % 2 for a in node.args[1:]) == [0, 1]) or \
            (is_call(node, aten.permute.default) and list(node.args[1]) == [1, 0]):
        src = node.args[0]
        return src if src in lw.param_nodes else None
    return None


def flattened_source(lw, node):
    """x when node is x ([..., K]) viewed as [N, K]."""
    if is_call(node, aten.view.default, aten._unsafe_view.default, aten._reshape_alias.default,
               aten.reshape.default):
        src = node.args[0]
        s, n = shape_of(src), shape_of(node)
        if s and n and len(n) == 2 and s[-1] == n[-1] and math.prod(s) == math.prod(n):
            return src
    return node


def matmul(lw, node):
    """mm / addmm: a Linear (x @ Wᵀ (+ b), W a parameter) stays one matmul over
    x's own leading dimensions; any other product is a plain matmul."""
    bias = node.args[0] if node.target == aten.addmm.default else None
    lhs, rhs = node.args[-2:]
    if node.target == aten.addmm.default and \
            (node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1):
        fail(node, "addmm with alpha or beta != 1")
    weight = is_param_t(lw, rhs)
    x = lw.v(flattened_source(lw, lhs))
    if weight is not None:
        y = lw.w.matmul(x, lw.env[weight], "lin", transpose_b=True)
    else:
        y = lw.w.matmul(x, lw.v(rhs), "mm", transpose_b=False)
    if bias is not None:
        y = lw.w.binary("add", y, lw.to_shape(lw.v(bias), y.shape, node), "lin_b")
    return lw.reshape(y, shape_of(node))


def bmm(lw, node):
    return batch_product(lw, lw.v(node.args[0]), lw.v(node.args[1]), shape_of(node))


def safe_softmax(lw, x, dim):
    """softmax along dim, 0 on a line that is all -inf (PyTorch 2.x's
    _safe_softmax, SDPA's rows with every key masked), finite in both
    directions: such a line is replaced by zeros before the softmax."""
    w = lw.w
    m = reduced(lw, "reduce_max", x, [dim], True, "line_max")
    ninf = lw.scalar_like(float("-inf"), x.shape)
    dead = w.emit("dead", x.shape, f"step.compare eq, {lw.to_shape(m, x.shape, None).name}, "
                                   f"{ninf.name} : {x.type}", dtype="i1")
    zero = lw.scalar_like(0.0, x.shape)
    live = w.emit("live", x.shape, f"step.select {dead.name}, {zero.name}, {x.name} : "
                                   f"{dead.type}, {x.type}")
    p = w.emit("sm", x.shape, f"step.softmax {live.name} dim {dim} : ({live.type}) -> {{out}}")
    return w.emit("safe_sm", x.shape, f"step.select {dead.name}, {zero.name}, {p.name} : "
                                      f"{dead.type}, {x.type}")


def safe_softmax_op(lw, node):
    x = lw.v(node.args[0])
    if len(node.args) > 2 and node.args[2] not in (None, torch.float32):
        fail(node, f"_safe_softmax in {node.args[2]}")
    return safe_softmax(lw, x, node.args[1] % len(x.shape))


def sdpa_math(lw, node):
    """F.scaled_dot_product_attention that is not stepc's composite (a
    padding or block mask, dropout_p, enable_gqa, cross-attention), as
    PyTorch's math reference defines it: softmax(q·kᵀ·scale + bias)·v, the
    bias -inf where a boolean mask is False (or above the diagonal with
    is_causal), an additive mask added; dropout on the probabilities is
    stepc's counter-based dropout."""
    a = sdpa_args.arguments(node)
    if a.unsupported:
        name, value = a.unsupported[0]
        fail(node, f"{node.target} with {name}={value!r}: stepc cannot honour that argument")
    w = lw.w
    q, k, v = lw.v(a.query), lw.v(a.key), lw.v(a.value)
    if min(len(q.shape), len(k.shape), len(v.shape)) < 2:
        fail(node, "scaled_dot_product_attention of operands below rank 2")
    batch, (t, dh), s = q.shape[:-2], q.shape[-2:], k.shape[-2]
    if a.gqa and len(q.shape) >= 3 and k.shape[-3] != q.shape[-3]:
        k, v = (repeat_heads(lw, x, q.shape[-3], node) for x in (k, v))
    k = lw.to_shape(k, batch + k.shape[-2:], node)
    v = lw.to_shape(v, batch + v.shape[-2:], node)
    scores = w.emit("scores", batch + [t, s], f"step.batch_matmul {q.name}, {k.name} transpose_b "
                                             f": ({q.type}, {k.type}) -> {{out}}")
    scale = 1.0 / math.sqrt(dh) if a.scale is None else a.scale
    scores = scaled(lw, scores, scale, "scaled")
    shape = scores.shape
    if a.causal:
        if a.mask is not None:
            fail(node, "scaled_dot_product_attention with both attn_mask and is_causal=True")
        rows = w.emit("qpos", [t, s], "step.iota dim 0 : {out}", dtype="i32")
        cols = w.emit("kpos", [t, s], "step.iota dim 1 : {out}", dtype="i32")
        keep = w.emit("causal", [t, s], f"step.compare ge, {rows.name}, {cols.name} : "
                                        f"{rows.type}", dtype="i1")
        scores = masked_scores(lw, lw.to_shape(keep, shape, node), scores)
    if a.mask is not None:
        mask = lw.v(a.mask)
        if mask.dtype == "f32":
            scores = w.binary("add", scores, lw.to_shape(mask, shape, node), "biased")
        else:
            scores = masked_scores(lw, typed_operand(lw, a.mask, shape, "i1", node), scores)
    probs = safe_softmax(lw, scores, len(shape) - 1)
    if a.dropout:
        if not 0.0 < a.dropout < 1.0:
            fail(node, f"scaled_dot_product_attention with dropout_p {a.dropout}: stepc "
                       f"drops with a rate in [0, 1)")
        probs = w.dropout(probs, a.dropout, "attn_drop")
    return w.emit("sdpa", batch + [t, v.shape[-1]],
                  f"step.batch_matmul {probs.name}, {v.name} : ({probs.type}, {v.type}) "
                  f"-> {{out}}")


def masked_scores(lw, keep, scores):
    """scores where `keep` (i1) holds, else -inf."""
    ninf = lw.scalar_like(float("-inf"), scores.shape)
    return lw.w.emit("masked", scores.shape, f"step.select {keep.name}, {scores.name}, "
                                             f"{ninf.name} : {keep.type}, {scores.type}")


def repeat_heads(lw, x, heads, node):
    """[..., Hkv, S, D] -> [..., heads, S, D], each kv head repeated
    heads / Hkv times in place (enable_gqa's repeat_interleave)."""
    *lead, hkv, s, d = x.shape
    if heads % hkv:
        fail(node, f"enable_gqa with {heads} query heads over {hkv} key/value heads")
    wide = lw.w.broadcast(lw.reshape(x, lead + [hkv, 1, s, d]), lead + [hkv, heads // hkv, s, d],
                          "gqa")
    return lw.reshape(wide, lead + [heads, s, d])


def baddbmm(lw, node):
    """beta · input + alpha · (b1 @ b2) (nn.MultiheadAttention's masked scores)."""
    beta, alpha = node.kwargs.get("beta", 1), node.kwargs.get("alpha", 1)
    shape = shape_of(node)
    product = scaled(lw, batch_product(lw, lw.v(node.args[1]), lw.v(node.args[2]), shape),
                     alpha, "bmm_alpha")
    if beta == 0:
        return product
    bias = scaled(lw, lw.operand(node.args[0], shape, node), beta, "bmm_beta")
    return lw.w.binary("add", product, bias, "baddbmm")


def batch_product(lw, a, b, shape):
    """step.batch_matmul of two values into `shape`."""
    return lw.w.emit("bmm", shape, f"step.batch_matmul {a.name}, {b.name} "
                                   f": ({a.type}, {b.type}) -> {{out}}")


def transposed(lw, x, perm, hint):
    shape = [x.shape[p] for p in perm]
    return lw.w.emit(hint, shape, f"step.transpose {x.name} {perm} : ({x.type}) -> {{out}}")


def convolution(lw, node):
    """A patch embedding (a ViT's Conv2d: stride = kernel, no padding,
    dilation 1, groups 1). Its patches do not overlap, so it is one matmul
    of the patches, [N·Hp·Wp, C·kh·kw], by the flattened kernel [O, C·kh·kw]ᵀ
    (+ bias), laid out as [N, O, Hp, Wp]."""
    x_node, w_node, b_node, stride, padding, dilation, is_transposed, _, groups = node.args
    x, w = lw.v(x_node), lw.v(w_node)
    if len(x.shape) != 4 or len(w.shape) != 4:
        fail(node, "a convolution that is not 2-D: stepc lowers 2-D patch embeddings")
    n, c, h, width = x.shape
    o, _, kh, kw = w.shape
    if is_transposed or groups != 1 or any(padding) or any(d != 1 for d in dilation) or \
            list(stride) != [kh, kw] or h % kh or width % kw:
        fail(node, f"a convolution with stride {list(stride)}, padding {list(padding)}, "
                   f"dilation {list(dilation)}, groups {groups} over {h}x{width} by a {kh}x{kw} "
                   "kernel: stepc lowers patch embeddings (stride = kernel size, no padding, "
                   "dilation 1, groups 1, the image a whole number of patches)")
    hp, wp = h // kh, width // kw
    patches = transposed(lw, lw.reshape(x, [n, c, hp, kh, wp, kw]), [0, 2, 4, 1, 3, 5], "patches")
    patches = lw.reshape(patches, [n * hp * wp, c * kh * kw])
    y = lw.w.matmul(patches, lw.reshape(w, [o, c * kh * kw]), "patch_emb", transpose_b=True)
    if b_node is not None:
        y = lw.w.binary("add", y, lw.to_shape(lw.v(b_node), y.shape, node), "patch_b")
    return transposed(lw, lw.reshape(y, [n, hp, wp, o]), [0, 3, 1, 2], "conv")


def embedding(lw, node):
    """F.embedding(ids, table, padding_idx): rows gathered; the padding row
    reads like any other but gets no gradient (as in PyTorch), so its
    positions take the gathered value through a stop_gradient."""
    args = list(node.args) + [None] * (5 - len(node.args))
    padding_idx = node.kwargs.get("padding_idx", args[2] if args[2] is not None else -1)
    scale_grad = node.kwargs.get("scale_grad_by_freq", args[3] or False)
    sparse = node.kwargs.get("sparse", args[4] or False)
    if scale_grad:
        fail(node, "nn.Embedding with scale_grad_by_freq=True: stepc sums the gradient of "
                   "each row without scaling by its frequency in the batch")
    if sparse:
        fail(node, "nn.Embedding with sparse=True: stepc's embedding gradient is dense")
    t = lw.v(node.args[0])
    i = lw.v(node.args[1])
    if i.dtype != "i32":
        fail(node, "embedding ids must be integers")
    rows = lw.w.embedding(t, i, "emb")
    if padding_idx is None or padding_idx < 0:
        return rows
    if padding_idx >= t.shape[0]:
        fail(node, f"padding_idx {padding_idx} outside the table's {t.shape[0]} rows")
    pad = lw.w.emit("pad_id", i.shape, f"step.constant dense<{int(padding_idx)}> : {{out}}",
                    dtype="i32")
    is_pad = lw.w.emit("is_pad", i.shape, f"step.compare eq, {i.name}, {pad.name} : {i.type}",
                       dtype="i1")
    is_pad = lw.w.broadcast(lw.reshape(is_pad, i.shape + [1]), rows.shape, "is_pad_rows")
    frozen = lw.w.unary("stop_gradient", rows, "pad_rows")
    return lw.w.emit("emb_pad", rows.shape, f"step.select {is_pad.name}, {frozen.name}, "
                                            f"{rows.name} : {is_pad.type}, {rows.type}")


def dropout(lw, node):
    return lw.dropout(node)


# -- activations and reductions PyTorch has as one ATen op, composed of step
# ops as PyTorch defines them (autodiff differentiates the composition) ----
def positive_else(lw, x, negative, hint):
    """x where x > 0, else `negative` (PyTorch's branch for x = 0)."""
    zero = lw.scalar_like(0.0, x.shape)
    mask = lw.w.emit("pos", x.shape, f"step.compare gt, {x.name}, {zero.name} : {x.type}",
                     dtype="i1")
    return lw.w.emit(hint, x.shape, f"step.select {mask.name}, {x.name}, {negative.name} : "
                                    f"{mask.type}, {x.type}")


def scaled(lw, x, factor, hint):
    return x if factor == 1 else lw.w.binary("mul", x, lw.scalar_like(float(factor), x.shape), hint)


def softplus(lw, node):
    """softplus(βx)/β; PyTorch's threshold (βx > t gives x) is the op's 20."""
    beta = node.args[1] if len(node.args) > 1 else node.kwargs.get("beta", 1)
    threshold = node.args[2] if len(node.args) > 2 else node.kwargs.get("threshold", 20)
    if threshold != 20 or not beta > 0:
        fail(node, f"softplus with beta {beta} and threshold {threshold}: stepc's softplus has "
                   "PyTorch's default threshold 20 and takes beta > 0")
    x = lw.v(node.args[0])
    y = lw.w.unary("softplus", scaled(lw, x, beta, "bx"), "softplus")
    return scaled(lw, y, 1.0 / beta, "softplus_b")


def log_sigmoid(lw, node):
    """F.logsigmoid: -softplus(-x) (result #0 of log_sigmoid_forward)."""
    x = lw.v(node.args[0])
    return lw.w.unary("neg", lw.w.unary("softplus", lw.w.unary("neg", x, "negx"), "sp"),
                      "logsigmoid")


def leaky_relu(lw, node):
    slope = node.args[1] if len(node.args) > 1 else node.kwargs.get("negative_slope", 0.01)
    x = lw.v(node.args[0])
    return positive_else(lw, x, scaled(lw, x, slope, "slope_x"), "leaky_relu")


def elu(lw, node):
    """scale · (x above 0, else alpha·(exp(x·input_scale) - 1)) (ELU, SELU)."""
    args = list(node.args) + [None] * (4 - len(node.args))
    alpha, scale, input_scale = (a if a is not None else node.kwargs.get(k, 1)
                                 for a, k in zip(args[1:], ("alpha", "scale", "input_scale")))
    x = lw.v(node.args[0])
    e = lw.w.unary("exp", scaled(lw, x, input_scale, "ix"), "exp")
    below = scaled(lw, lw.w.binary("sub", e, lw.scalar_like(1.0, x.shape), "em1"), alpha,
                   "elu_neg")
    return scaled(lw, positive_else(lw, x, below, "elu"), scale, "elu_scaled")


def hardtanh(lw, node):
    """clamp(x, min_val, max_val) (relu6 is hardtanh(0, 6))."""
    lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min_val", -1.0)
    hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max_val", 1.0)
    x = lw.v(node.args[0])
    y = lw.w.binary("maximum", x, lw.scalar_like(float(lo), x.shape), "lo")
    return lw.w.binary("minimum", y, lw.scalar_like(float(hi), x.shape), "hardtanh")


def hardswish(lw, node):
    """x · clamp(x + 3, 0, 6) / 6."""
    x = lw.v(node.args[0])
    t = lw.w.binary("add", x, lw.scalar_like(3.0, x.shape), "xp3")
    t = lw.w.binary("maximum", t, lw.scalar_like(0.0, x.shape), "lo")
    t = lw.w.binary("minimum", t, lw.scalar_like(6.0, x.shape), "hi")
    return lw.w.binary("mul", x, scaled(lw, t, 1.0 / 6.0, "gate"), "hardswish")


def mish(lw, node):
    """x · tanh(softplus(x))."""
    x = lw.v(node.args[0])
    gate = lw.w.unary("tanh", lw.w.unary("softplus", x, "sp"), "gate")
    return lw.w.binary("mul", x, gate, "mish")


def filled_like(value):
    """zeros_like / ones_like / full_like: a constant of the operand's shape
    and the result's type (no gradient reaches the operand)."""
    def lower(lw, node):
        v = value if value is not None else node.args[1]
        shape, dtype = shape_of(node), result_dtype(node)
        v = float(v) if dtype == "f32" else bool(v) if dtype == "i1" else int(v)
        return lw.w.emit("filled", shape, f"step.constant dense<{dense(v)}> : {{out}}",
                         dtype=dtype)
    return lower


def cumsum(lw, node):
    """torch.cumsum(x, dim) of floats: step.cumsum."""
    x = lw.v(node.args[0])
    if x.dtype != "f32" or node.kwargs.get("dtype") not in (None, torch.float32):
        fail(node, "cumsum of integers (or into another dtype): stepc sums floats")
    dim = node.args[1] % len(x.shape)
    return lw.w.emit("cumsum", x.shape, f"step.cumsum {x.name} dim {dim} : ({x.type}) -> {{out}}")


def reciprocal(lw, node):
    x = lw.v(node.args[0])
    return lw.w.binary("div", lw.scalar_like(1.0, x.shape), x, "recip")


def reduce_dims(node, rank, arg=1, key="dim"):
    dims = node.args[arg] if len(node.args) > arg else node.kwargs.get(key)
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        return list(range(rank))  # none given, or [] (amax's and amin's default): all
    return sorted(d % rank for d in ([dims] if isinstance(dims, int) else dims))


def reduced(lw, op, x, dims, keep, hint):
    """step.reduce_<op> over dims, kept as size-1 dims when `keep`."""
    out = [d for i, d in enumerate(x.shape) if i not in dims]
    y = lw.w.emit(hint, out, f"step.{op} {x.name} dims {dims} : ({x.type}) -> {{out}}")
    return lw.reshape(y, [1 if i in dims else d for i, d in enumerate(x.shape)]) if keep else y


def amin(lw, node):
    """-amax(-x)."""
    x = lw.v(node.args[0])
    dims = reduce_dims(node, len(x.shape))
    keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    m = reduced(lw, "reduce_max", lw.w.unary("neg", x, "negx"), dims, keep, "max_neg")
    return lw.w.unary("neg", m, "amin")


def logsumexp(lw, node):
    """max + log Σ exp(x - max) (the max's gradient cancels: Σ softmax = 1)."""
    x = lw.v(node.args[0])
    dims = reduce_dims(node, len(x.shape))
    keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    m = reduced(lw, "reduce_max", x, dims, True, "max")
    shifted = lw.w.binary("sub", x, lw.to_shape(m, x.shape, node), "shifted")
    total = reduced(lw, "reduce_sum", lw.w.unary("exp", shifted, "e"), dims, True, "sum")
    lse = lw.w.binary("add", lw.w.unary("log", total, "log"), m, "lse")
    return lse if keep else lw.reshape(lse, shape_of(node))


def moments(lw, node, root):
    """var (root False) or std (True) with Bessel's `correction` (var.correction)."""
    x = lw.v(node.args[0])
    dims = reduce_dims(node, len(x.shape))
    correction = node.kwargs.get("correction", 1)
    correction = 1 if correction is None else correction
    keep = node.kwargs.get("keepdim", False)
    n = math.prod(x.shape[d] for d in dims)
    if n - correction <= 0:
        fail(node, f"{node.target} of {n} elements with correction {correction}")
    mean = reduced(lw, "reduce_mean", x, dims, True, "mean")
    d = lw.w.binary("sub", x, lw.to_shape(mean, x.shape, node), "dev")
    ss = reduced(lw, "reduce_sum", lw.w.binary("mul", d, d, "sq"), dims, keep, "ss")
    var = scaled(lw, ss, 1.0 / (n - correction), "var")
    return lw.w.unary("sqrt", var, "std") if root else var


def vector_norm(lw, node, p, dims, keep):
    """The 2-norm over dims: sqrt(Σ x²)."""
    if p not in (2, 2.0, None):
        fail(node, f"a {p}-norm: stepc lowers the 2-norm")
    x = lw.v(node.args[0])
    ss = reduced(lw, "reduce_sum", lw.w.binary("mul", x, x, "sq"), dims, keep, "ss")
    return lw.w.unary("sqrt", ss, "norm")


def norm(order_key):
    """torch.norm(x, p, dim, keepdim) (F.normalize's under PyTorch 1.13) and
    torch.linalg.vector_norm(x, ord, dim, keepdim) (under 2.x)."""
    def lower(lw, node):
        x = lw.v(node.args[0])
        p = node.args[1] if len(node.args) > 1 else node.kwargs.get(order_key, 2)
        dims = reduce_dims(node, len(x.shape), 2)
        keep = node.args[3] if len(node.args) > 3 else node.kwargs.get("keepdim", False)
        dtype = node.args[4] if len(node.args) > 4 else node.kwargs.get("dtype")
        if dtype not in (None, torch.float32):
            fail(node, f"{node.target} in {dtype}")
        return vector_norm(lw, node, p, dims, keep)
    return lower


def xlogy(lw, node):
    """x · log(y), 0 where x = 0 (F.kl_div's target · log target)."""
    shape = shape_of(node)
    x, y = (lw.operand(a, shape, node) for a in node.args[:2])
    zero = lw.scalar_like(0.0, shape)
    mask = lw.w.emit("x0", shape, f"step.compare eq, {x.name}, {zero.name} : {x.type}",
                     dtype="i1")
    product = lw.w.binary("mul", x, lw.w.unary("log", y, "logy"), "xlogy_raw")
    return lw.w.emit("xlogy", shape, f"step.select {mask.name}, {zero.name}, {product.name} : "
                                     f"{mask.type}, {x.type}")


def mse_loss(lw, node):
    """mean((x - y)²) (reduction mean only)."""
    reduction = node.args[2] if len(node.args) > 2 else node.kwargs.get("reduction", 1)
    if reduction != 1:
        fail(node, "mse_loss with reduction other than 'mean'")
    x, y = lw.v(node.args[0]), lw.v(node.args[1])
    d = lw.w.binary("sub", x, y, "diff")
    sq = lw.w.binary("mul", d, d, "sq")
    dims = list(range(len(sq.shape)))
    return lw.w.emit("mse", [], f"step.reduce_mean {sq.name} dims {dims} : ({sq.type}) -> {{out}}")


def bce_with_logits(lw, node):
    """mean(relu(x) - x·y + log(1 + exp(-|x|))), PyTorch's stable form
    (softplus(-|x|) never crosses softplus's threshold); no weights."""
    args = list(node.args) + [None] * (5 - len(node.args))
    weight = args[2] if args[2] is not None else node.kwargs.get("weight")
    pos_weight = args[3] if args[3] is not None else node.kwargs.get("pos_weight")
    reduction = args[4] if args[4] is not None else node.kwargs.get("reduction", 1)
    if weight is not None or pos_weight is not None:
        fail(node, "binary_cross_entropy_with_logits with weight or pos_weight")
    if reduction != 1:
        fail(node, "binary_cross_entropy_with_logits with reduction other than 'mean'")
    x, y = lw.v(node.args[0]), lw.v(node.args[1])
    if y.shape != x.shape:
        fail(node, f"binary_cross_entropy_with_logits of {x.shape} logits and {y.shape} targets")
    w = lw.w
    positive = w.binary("maximum", x, lw.scalar_like(0.0, x.shape), "relu")
    tail = w.unary("softplus", w.unary("neg", w.unary("abs", x, "abs"), "neg_abs"), "tail")
    loss = w.binary("add", w.binary("sub", positive, w.binary("mul", x, y, "xy"), "lin"), tail,
                    "bce")
    dims = list(range(len(loss.shape)))
    return w.emit("bce_mean", [], f"step.reduce_mean {loss.name} dims {dims} : "
                                  f"({loss.type}) -> {{out}}")


HANDLERS = {
    torch.ops.stepc.moe.default: moe,
    **{getattr(aten, p).Tensor: compare(p) for p in ("lt", "le", "gt", "ge", "eq", "ne")},
    **{getattr(aten, p).Scalar: compare(p) for p in ("lt", "le", "gt", "ge", "eq", "ne")},
    aten.view.default: reshape, aten._unsafe_view.default: reshape,
    aten._reshape_alias.default: reshape, aten.reshape.default: reshape,
    aten.unsqueeze.default: reshape, aten.squeeze.dim: reshape, aten.squeeze.default: reshape,
    aten.flatten.using_ints: reshape,
    aten.clone.default: identity, aten.alias.default: identity, aten.detach.default: unary("stop_gradient"),
    aten.lift_fresh_copy.default: identity, aten.contiguous.default: identity,
    aten._to_copy.default: to_copy,
    aten.t.default: lambda lw, n: permute(lw, n, [1, 0]),
    aten.transpose.int: transpose,
    aten.permute.default: lambda lw, n: permute(lw, n, list(n.args[1])),
    aten.expand.default: expand,
    aten.slice.Tensor: slice_, aten.select.int: select,
    aten.cat.default: cat, aten.stack.default: stack,
    aten.add.Tensor: binary("add"), aten.add.Scalar: binary("add"),
    aten.sub.Tensor: binary("sub"), aten.sub.Scalar: binary("sub"),
    aten.rsub.Scalar: rsub,
    aten.mul.Tensor: binary("mul"), aten.mul.Scalar: binary("mul"),
    aten.div.Tensor: binary("div"), aten.div.Scalar: binary("div"),
    aten.maximum.default: binary("maximum"), aten.minimum.default: binary("minimum"),
    aten.neg.default: unary("neg"), aten.exp.default: unary("exp"),
    aten.log.default: unary("log"), aten.tanh.default: unary("tanh"),
    aten.erf.default: unary("erf"), aten.sqrt.default: unary("sqrt"),
    aten.rsqrt.default: unary("rsqrt"), aten.silu.default: unary("silu"),
    aten.relu.default: unary("relu"), aten.sigmoid.default: unary("sigmoid"),
    aten.abs.default: unary("abs"),
    aten.logical_and.default: logical("and"), aten.bitwise_and.Tensor: logical("and"),
    aten.logical_or.default: logical("or"), aten.bitwise_or.Tensor: logical("or"),
    aten.logical_xor.default: logical("xor"), aten.bitwise_xor.Tensor: logical("xor"),
    aten.logical_not.default: logical("not"), aten.bitwise_not.default: logical("not"),
    aten.where.self: torch_where, aten.gather.default: gather, aten.argmax.default: argmax,
    aten.masked_fill.Scalar: masked_fill, aten.masked_fill.Tensor: masked_fill,
    aten.clamp.default: clamp, aten.clamp_min.default: clamp_bound("maximum"),
    aten.clamp_max.default: clamp_bound("minimum"),
    aten.gelu.default: gelu, aten.pow.Tensor_Scalar: power,
    aten.mean.dim: reduce("reduce_mean"), aten.sum.dim_IntList: reduce("reduce_sum"),
    aten.mean.default: reduce("reduce_mean"), aten.sum.default: reduce("reduce_sum"),
    aten.amax.default: reduce("reduce_max"),
    aten._softmax.default: along_dim("softmax", "sm"),
    aten._log_softmax.default: along_dim("log_softmax", "lsm"),
    aten.mm.default: matmul, aten.addmm.default: matmul, aten.bmm.default: bmm,
    aten.baddbmm.default: baddbmm,
    aten.embedding.default: embedding,
    aten.dropout.default: dropout,
    aten.mse_loss.default: mse_loss,
    aten.binary_cross_entropy_with_logits.default: bce_with_logits,
    aten.softplus.default: softplus, aten.leaky_relu.default: leaky_relu,
    aten.elu.default: elu, aten.hardtanh.default: hardtanh,
    aten.hardswish.default: hardswish, aten.mish.default: mish,
    aten.reciprocal.default: reciprocal, aten.amin.default: amin,
    aten.cumsum.default: cumsum,
    aten.zeros_like.default: filled_like(0), aten.ones_like.default: filled_like(1),
    aten.full_like.default: filled_like(None),
    aten.logsumexp.default: logsumexp,
    aten.var.correction: lambda lw, node: moments(lw, node, False),
    aten.std.correction: lambda lw, node: moments(lw, node, True),
    aten.norm.ScalarOpt_dim: norm("p"), aten.xlogy.Tensor: xlogy,
    aten.convolution.default: convolution,
}
# The defaulted arguments each handler honours: reads, or refuses values it
# cannot take. Any other defaulted argument given a value other than its
# default is refused before the handler runs (refuse_unread_arguments), so
# a handler cannot accept an argument and ignore it.
HONOURED = {
    aten.flatten.using_ints: {"start_dim", "end_dim"},  # the result's shape
    aten._to_copy.default: {"dtype"},
    aten.slice.Tensor: {"dim", "start", "end", "step"},
    aten.cat.default: {"dim"}, aten.stack.default: {"dim"},
    torch.ops.stepc.moe.default: {"capacity_factor"},
    **{op: {"alpha"} for op in (aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor,
                                aten.sub.Scalar, aten.rsub.Scalar)},
    aten.gather.default: {"sparse_grad"},
    aten.argmax.default: {"dim", "keepdim"},
    aten.clamp.default: {"min", "max"},
    aten.gelu.default: {"approximate"},
    aten.mean.dim: {"keepdim", "dtype"}, aten.sum.dim_IntList: {"keepdim", "dtype"},
    aten.mean.default: {"dtype"}, aten.sum.default: {"dtype"},
    aten.amax.default: {"dim", "keepdim"}, aten.amin.default: {"dim", "keepdim"},
    aten.addmm.default: {"beta", "alpha"}, aten.baddbmm.default: {"beta", "alpha"},
    aten.embedding.default: {"padding_idx", "scale_grad_by_freq", "sparse"},
    aten.mse_loss.default: {"reduction"},
    aten.binary_cross_entropy_with_logits.default: {"weight", "pos_weight", "reduction"},
    aten.softplus.default: {"beta", "threshold"},
    aten.leaky_relu.default: {"negative_slope"},
    aten.elu.default: {"alpha", "scale", "input_scale"},
    aten.hardtanh.default: {"min_val", "max_val"},
    aten.cumsum.default: {"dtype"},
    **{op: {"dtype"} for op in (aten.zeros_like.default, aten.ones_like.default,
                                aten.full_like.default)},  # the result's type
    aten.logsumexp.default: {"keepdim"},
    aten.var.correction: {"dim", "correction", "keepdim"},
    aten.std.correction: {"dim", "correction", "keepdim"},
    aten.norm.ScalarOpt_dim: {"keepdim"},
    **{op: {"dim"} for op in SPLITS},
}
# Arguments about where and how a result is stored, never its values.
STORAGE_ARGUMENTS = {"memory_format", "layout", "device", "pin_memory", "non_blocking",
                     "implicit"}


def refuse_unread_arguments(node):
    """An ExportError for a defaulted argument of `node` that its handler
    does not honour, given a value other than its default."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return
    honoured = HONOURED.get(node.target, set()) | STORAGE_ARGUMENTS
    for i, arg in enumerate(schema.arguments):
        if not arg.has_default_value() or arg.name in honoured:
            continue
        if i < len(node.args) and not arg.kwarg_only:
            value = node.args[i]
        elif arg.name in node.kwargs:
            value = node.kwargs[arg.name]
        else:
            continue
        if not same_value(value, arg.default_value):
            fail(node, f"{node.target} with {arg.name}={value!r}: stepc's lowering of this op "
                       f"does not honour that argument")


def same_value(value, default):
    if isinstance(value, torch.fx.Node) or isinstance(default, torch.fx.Node):
        return value is default
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return list(value) == list(default)
    try:
        return bool(value == default)
    except Exception:  # a value with no plain equality: not the default
        return False


if hasattr(aten, "_safe_softmax"):  # PyTorch >= 2.5's SDPA math path
    HANDLERS[aten._safe_softmax.default] = safe_softmax_op
    HONOURED[aten._safe_softmax.default] = {"dtype"}
if hasattr(aten, "linalg_vector_norm"):
    HANDLERS[aten.linalg_vector_norm.default] = norm("ord")
    HONOURED[aten.linalg_vector_norm.default] = {"ord", "dim", "keepdim", "dtype"}
for _name in ("ScalarOther", "ScalarSelf", "Scalar"):  # torch.where with Python scalars
    if hasattr(aten.where, _name):
        HANDLERS[getattr(aten.where, _name)] = torch_where
# Ops with several results: lowered where a getitem reads one.
for _op in (aten.native_layer_norm.default, *SPLITS, aten.native_dropout.default,
            aten.log_sigmoid_forward.default):
    HANDLERS[_op] = lambda lw, node: None
