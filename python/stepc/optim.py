"""A torch.optim optimizer's parameter groups and hyperparameters, as stepc
compiles them.

`stepc.export(model, inputs, out, optimizer=opt)` reads `opt` (AdamW, Adam
or SGD): each parameter's group gives it its own weight decay and a
learning-rate scale (the group's lr over `opt.defaults["lr"]`, the lr the
trainer's schedule sets), written into the model as `weight_decay W,
lr_scale S` on its #step.param; the hyperparameters the groups share become
the `stepc` flags that reproduce the optimizer (`Optimizer.flags`, kept in
export.json, used by `stepc.compile(exported, ...)`).

What a step cannot hold is an ExportError: another optimizer class, groups
that differ in anything but lr and weight decay, amsgrad, maximize, SGD's
dampening, a trained parameter in no group. PyTorch clips no gradients
unless the training loop does: `max_grad_norm` says what the loop does
(None: no clipping, stepc's max-grad-norm=0).
"""

from .errors import ExportError

_ALGORITHMS = {"AdamW": "adamw", "Adam": "adam", "SGD": "sgd"}
# Group keys that only say how PyTorch runs the update, never its values.
_IMPLEMENTATION = {"params", "lr", "weight_decay", "foreach", "fused", "capturable",
                   "differentiable", "name"}


class Optimizer:
    def __init__(self, algorithm, options, per_param):
        self.algorithm = algorithm
        self.options = options  # stepc's --optimizer-options, in order
        self.per_param = per_param  # parameter object id -> (weight_decay, lr_scale)

    @property
    def flags(self):
        """The stepc flags (stepc.compile's keywords) reproducing it."""
        text = " ".join(f"{k}={v}" for k, v in self.options)
        return {"optimizer": self.algorithm, "optimizer_options": text}

    def to_json(self):
        return {"algorithm": self.algorithm, "options": dict(self.options)}


def read(optimizer, max_grad_norm=None):
    """An `Optimizer` from a torch.optim instance (see the module's doc)."""
    kind = type(optimizer).__name__
    if kind not in _ALGORITHMS:
        raise ExportError(f"optimizer {kind}: stepc.export reads torch.optim.AdamW, Adam and "
                          f"SGD (other optimizers: stepc's --optimizer flag)")
    groups = optimizer.param_groups
    if not groups:
        raise ExportError(f"optimizer {kind} has no parameter groups")
    base_lr = float(optimizer.defaults.get("lr", groups[0]["lr"]))
    if not base_lr > 0:
        raise ExportError(f"optimizer {kind}: lr {base_lr} (the schedule's lr must be positive "
                          f"for the groups' lr to be its multiples)")
    first = groups[0]
    for i, g in enumerate(groups[1:], 1):
        for key in sorted(set(first) | set(g)):
            if key in _IMPLEMENTATION:
                continue
            if first.get(key) != g.get(key):
                raise ExportError(f"optimizer {kind}: group {i} has {key}={g.get(key)!r} where "
                                  f"group 0 has {first.get(key)!r}; stepc gives each parameter "
                                  f"its own lr and weight_decay only")
    if first.get("maximize"):
        raise ExportError(f"optimizer {kind} with maximize=True")
    options = []
    if kind in ("AdamW", "Adam"):
        if first.get("amsgrad"):
            raise ExportError(f"optimizer {kind} with amsgrad=True: stepc's {kind} has none")
        beta1, beta2 = first["betas"]
        options += [("beta1", float(beta1)), ("beta2", float(beta2)),
                    ("epsilon", float(first["eps"]))]
    else:
        if first.get("dampening", 0):
            raise ExportError("optimizer SGD with dampening: stepc's SGD has none")
        options += [("momentum", float(first.get("momentum", 0.0))),
                    ("nesterov", "true" if first.get("nesterov") else "false")]
    options.append(("max-grad-norm", float(max_grad_norm or 0.0)))
    per_param = {}
    for g in groups:
        scale = float(g["lr"]) / base_lr
        for p in g["params"]:
            per_param[id(p)] = (float(g.get("weight_decay", 0.0)), scale)
    return Optimizer(_ALGORITHMS[kind], options, per_param)


def markers(optimizer, params):
    """{name: (weight_decay, lr_scale)} for the trained (name, tensor) pairs;
    an ExportError for one in no group."""
    out = {}
    for name, tensor in params:
        if not tensor.requires_grad:
            continue
        if id(tensor) not in optimizer.per_param:
            raise ExportError(f"parameter '{name}' trains (requires_grad) but is in no "
                              f"parameter group of the optimizer: add it, or freeze it with "
                              f"requires_grad_(False)")
        out[name] = optimizer.per_param[id(tensor)]
    return out
