"""Captures a PyTorch module's loss as an ATen-level FX graph.

`capture(model, example_inputs)` traces `model(*example_inputs)` with every
parameter as a graph input (a tied parameter is one input used twice), so
the graph is the whole forward in ATen ops with concrete shapes. It uses
`make_fx` (PyTorch 1.13 and 2.x alike), whose graph every version we meet
produces the same way; docs/pytorch.md says why not `torch.export`.
"""

import contextlib
import inspect
import os
import traceback

import torch
import torch.fx.proxy
from torch.fx.experimental.proxy_tensor import make_fx

from . import nn

from .errors import ExportError

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_OWN_DIR = os.path.dirname(os.path.abspath(__file__))


def functional_call(module, params, args):
    """`module(*args)` with `params` in place of its parameters."""
    try:
        from torch.func import functional_call as call  # PyTorch >= 2.0
    except ImportError:
        from torch.nn.utils.stateless import functional_call as call
    return call(module, params, args)


def user_frame(frames):
    """"file:line: code" of the innermost frame outside torch and stepc."""
    for f in reversed(frames):
        path = os.path.abspath(f.filename)
        if not path.startswith(_TORCH_DIR) and not path.startswith(_OWN_DIR) \
                and not f.filename.startswith("<"):
            return f"{f.filename}:{f.lineno}: {(f.line or '').strip()}"
    return "<unknown source>"


@contextlib.contextmanager
def recording_sources():
    """Every FX node made while tracing records the user's source line
    (node.meta["stepc_source"]): how errors name the model's line; and
    whether the model made it under torch.no_grad() (node.meta["stepc_no_grad"]:
    the trace itself runs with gradients enabled, on tensors that require
    none, so only the model's own no_grad regions turn the mode off)."""
    original = torch.fx.proxy.TracerBase.create_node

    def create_node(self, *args, **kwargs):
        node = original(self, *args, **kwargs)
        node.meta["stepc_source"] = user_frame(traceback.extract_stack())
        node.meta["stepc_no_grad"] = not torch.is_grad_enabled()
        if _FUNCTIONS:
            node.meta["stepc_autograd_function"] = _FUNCTIONS[-1]
        return node

    torch.fx.proxy.TracerBase.create_node = create_node
    try:
        yield
    finally:
        torch.fx.proxy.TracerBase.create_node = original


class Captured:
    """The traced graph and what its placeholders are."""

    def __init__(self, graph_module, params, aliases, buffers, inputs, label_smoothing=0.0):
        self.graph_module = graph_module
        # (state_dict name, tensor) of each distinct parameter, in graph order.
        self.params = params
        # every state_dict name of a parameter -> the name it is exported as
        self.aliases = aliases
        # (state_dict name, tensor) of each buffer: constants of the graph
        self.buffers = buffers
        # (name, example tensor) of each input
        self.inputs = inputs
        # F.cross_entropy's label_smoothing (traced as the plain loss)
        self.label_smoothing = label_smoothing
        # names of the parameters that do not require grad: held, not trained
        self.frozen = {name for name, t in params if not t.requires_grad}


def distinct_parameters(model):
    """(names, tensors, aliases): one entry per parameter object, named by its
    first state_dict name; aliases maps every name to that one."""
    first, names, tensors, aliases = {}, [], [], {}
    for module_name, module in model.named_modules(remove_duplicate=False):
        for local, p in module._parameters.items():
            if p is None:
                continue
            full = f"{module_name}.{local}" if module_name else local
            if id(p) not in first:
                first[id(p)] = full
                names.append(full)
                tensors.append(p)
            aliases[full] = first[id(p)]
    return names, tensors, aliases


def input_names(model, count):
    """The forward's own argument names (`idx`, `targets`), else in0, in1..."""
    try:
        forward = model.forward if isinstance(model, torch.nn.Module) else model
        names = [p.name for p in inspect.signature(forward).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return [names[i] if i < len(names) else f"in{i}" for i in range(count)]


# The custom torch.autograd.Function subclasses whose forward is being
# traced, innermost last.
_FUNCTIONS = []


@contextlib.contextmanager
def recording_autograd_functions():
    """Nodes traced inside a custom torch.autograd.Function's forward record
    its name (node.meta["stepc_autograd_function"]): make_fx traces only the
    forward, under no_grad, so without this the Function would be exported
    as a stop-gradient and its backward silently lost."""
    base = torch.autograd.Function
    own = base.__dict__.get("apply")
    descriptor = inspect.getattr_static(base, "apply")

    def apply(cls, *args, **kwargs):
        _FUNCTIONS.append(cls.__name__)
        try:
            return descriptor.__get__(None, cls)(*args, **kwargs)
        finally:
            _FUNCTIONS.pop()

    base.apply = classmethod(apply)
    try:
        yield
    finally:
        if own is not None:
            base.apply = own
        else:
            del base.apply


def functionalized(fn):
    """fn with in-place ops rewritten as their out-of-place forms
    (x += y, relu(inplace=True), masked_fill_): a mutation of a graph input
    (a buffer) stays as a copy_ into it, which the lowering refuses."""
    try:
        from torch.func import functionalize  # PyTorch >= 2.0
    except ImportError:
        from functorch.experimental import functionalize
    return functionalize(fn, remove="mutations")


def writes_in_place(graph):
    """The graph's in-place ops all write values computed in the forward
    (x += y, relu_): a functional trace can replace them. One that writes a
    graph input (a buffer, a parameter) is left for the lowering to refuse
    at its line."""
    found = False
    for node in graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None or not schema.is_mutable:
            continue
        for a, arg in zip(node.args, schema.arguments):
            if arg.alias_info is not None and arg.alias_info.is_write:
                if getattr(a, "op", None) == "placeholder" or placeholder_view(a):
                    return False
                found = True
    return found


def placeholder_view(node):
    """node is a view (view, slice, select, ...) of a graph input."""
    while getattr(node, "op", None) == "call_function" and node.args and \
            isinstance(node.args[0], torch.fx.Node) and \
            getattr(node.target, "_schema", None) is not None and \
            any(r.alias_info is not None for r in node.target._schema.returns):
        node = node.args[0]
    return getattr(node, "op", None) == "placeholder"


@contextlib.contextmanager
def dropout_as_one_op():
    """F.dropout in training traced as aten.native_dropout: PyTorch 1.13
    decomposes it into bernoulli_ on an empty tensor first (an in-place
    update the step cannot hold), 2.x keeps native_dropout; both lower to
    step.dropout."""
    original = torch.nn.functional.dropout

    def dropout(x, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return x
        return torch.ops.aten.native_dropout.default(x, p, True)[0]

    torch.nn.functional.dropout = dropout
    try:
        yield
    finally:
        torch.nn.functional.dropout = original


@contextlib.contextmanager
def cross_entropy_smoothing(recorded):
    """F.cross_entropy's label_smoothing recorded (into the set `recorded`)
    and traced as the plain loss: PyTorch 1.13 cannot trace its smoothed form
    under fake tensors, and the importer maps the plain form to one
    step.cross_entropy, which takes the smoothing as an attribute."""
    original = torch.nn.functional.cross_entropy
    # PyTorch 2.x's cross_entropy dispatches __torch_function__ through its
    # module's global name, which is this wrapper while tracing: only the
    # user's own call records a smoothing.
    depth = [0]

    def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                      reduce=None, reduction="mean", label_smoothing=0.0):
        if depth[0] == 0:
            recorded.add(float(label_smoothing))
        depth[0] += 1
        try:
            return original(input, target, weight, size_average, ignore_index, reduce, reduction)
        finally:
            depth[0] -= 1

    torch.nn.functional.cross_entropy = cross_entropy
    try:
        yield
    finally:
        torch.nn.functional.cross_entropy = original


def capture(model, example_inputs, names=None):
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise ExportError(f"example input #{i} is a {type(x).__name__}, expected a tensor")
    is_module = isinstance(model, torch.nn.Module)
    if is_module:
        # Recurrent modules run their cells over time in one fused ATen op
        # that holds its own references to the weights: not a static graph
        # of the step's ops.
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.RNNBase):
                raise ExportError(f"{type(module).__name__} '{name}': recurrent modules (RNN, "
                                  f"LSTM, GRU) have no stepc lowering; the same recurrence "
                                  f"written as a Python loop over the time steps (nn.LSTMCell, "
                                  f"nn.GRUCell or nn.Linear layers) traces into a static step")
        pnames, tensors, aliases = distinct_parameters(model)
        if not any(t.requires_grad for t in tensors):
            raise ExportError(f"every parameter ({len(tensors)}) is frozen (requires_grad="
                              f"False): the step would train nothing")
        # A NaN or Inf weight would be written to init.safetensors and end
        # the first step on a non-finite loss: said here, by name.
        for name, t in zip(pnames, tensors):
            if t.is_floating_point() and not bool(torch.isfinite(t.detach()).all()):
                bad = (~torch.isfinite(t.detach())).flatten().nonzero()[0].item()
                raise ExportError(f"parameter {name!r} holds {t.detach().flatten()[bad].item()} "
                                  f"at element {bad}: its values must be finite")
        buffers = [(n, b.detach().clone()) for n, b in model.named_buffers()]
    else:
        pnames, tensors, aliases, buffers = [], [], {}, []
    n, nb = len(pnames), len(buffers)

    def flat_forward(*flat):
        if not is_module:
            return model(*flat)
        by_name = dict(zip(pnames, flat[:n]))
        every = {alias: by_name[name] for alias, name in aliases.items()}
        every.update(zip([b for b, _ in buffers], flat[n:n + nb]))
        return functional_call(model, every, tuple(flat[n + nb:]))

    # Fake tensors: shapes without data, so a branch on a value is an error
    # rather than a silently specialised graph.
    try:
        smoothing = set()
        flat_inputs = [*[t.detach() for t in tensors], *[b for _, b in buffers], *example_inputs]
        with torch.enable_grad(), recording_sources(), recording_autograd_functions(), \
                dropout_as_one_op(), cross_entropy_smoothing(smoothing), nn.exporting():
            graph_module = make_fx(flat_forward, tracing_mode="fake")(*flat_inputs)
            if writes_in_place(graph_module.graph) and not any(
                    "stepc_autograd_function" in n.meta for n in graph_module.graph.nodes):
                # Traced again without the in-place ops (only then: the
                # functional trace spells some ops differently).
                smoothing.clear()
                graph_module = make_fx(functionalized(flat_forward), tracing_mode="fake")(
                    *flat_inputs)
    except Exception as e:
        frame = user_frame(traceback.extract_tb(e.__traceback__))
        first = str(e).strip().split("\n")[0]
        if "data-dependent" in str(e) or "get value out of a tracing tensor" in str(e):
            raise ExportError(f"{frame}: data-dependent control flow (a Python branch or "
                              f"value read from a tensor) cannot be compiled into a static "
                              f"step") from None
        if "non-Fake Tensor" in str(e) or "convert all Tensors to FakeTensors" in str(e):
            raise ExportError(f"{frame}: the forward reads a tensor that is neither an input "
                              f"nor a parameter of the model (a module's weights captured by "
                              f"a function, a global tensor): export the nn.Module itself, or "
                              f"pass the tensor as an example input") from None
        if type(e).__name__ == "DynamicOutputShapeException":
            raise ExportError(f"{frame}: a dynamic shape (the result of {first} depends on "
                              f"tensor values) cannot be compiled into a static step") from None
        raise ExportError(f"{frame}: tracing failed: {type(e).__name__}: {first}") from None
    if len(smoothing) > 1:
        raise ExportError(f"cross-entropies with different label_smoothing "
                          f"({', '.join(str(x) for x in sorted(smoothing))}): a step has one")
    inames = names or input_names(model, len(example_inputs))
    return Captured(graph_module, list(zip(pnames, tensors)), aliases, buffers,
                    list(zip(inames, example_inputs)), max(smoothing, default=0.0))
