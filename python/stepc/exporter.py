"""stepc.export: a PyTorch module (or function) returning its loss, as a
`step` model that `stepc` compiles.

    exported = stepc.export(model, (idx, targets), "out")
    # out/model.mlir       the loss function in the step dialect
    # out/init.safetensors the module's current parameters (state_dict names)
    # out/buffers.safetensors  its persistent buffers (constants of the step)
    # out/export.json      names, aliases of tied parameters, inputs

The module is traced (capture.py), PyTorch's spellings of attention,
cross-entropy, RMSNorm and rotary embeddings become stepc's composite ops
(patterns.py) and the rest maps op by op (lower.py). Layers (block markers)
come from the module tree: the children of the largest nn.ModuleList.
"""

import json
import os

import torch

from . import optim, safetensors
from .capture import capture
from .errors import ExportError
from .lower import Lowering


class Exported:
    def __init__(self, directory, params, aliases, inputs, ignore_index, input_names=None,
                 compile_flags=None):
        self.directory = directory
        self.mlir = os.path.join(directory, "model.mlir")
        self.init = os.path.join(directory, "init.safetensors")
        self.params = params
        self.aliases = aliases
        # the forward's argument names, in order (what Session.step takes)
        self.inputs = inputs
        self.ignore_index = ignore_index
        # forward name -> the step's input name, where they differ (a
        # language model's 'idx' is the step's 'tokens')
        self.input_names = input_names or {}
        # stepc flags reproducing the torch.optim optimizer given to export
        # (stepc.compile(exported, ...) passes them), else {}
        self.compile_flags = compile_flags or {}

    def to_json(self):
        return {"params": self.params, "aliases": self.aliases, "inputs": self.inputs,
                "input_names": self.input_names, "ignore_index": self.ignore_index,
                "compile_flags": self.compile_flags}


def layer_blocks(model):
    """{parameter name: block index} for the parameters under the children of
    the nn.ModuleList holding the most parameters (a transformer's layers)."""
    best, best_count = None, 0
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) >= 2:
            count = sum(p.numel() for p in module.parameters())
            if count > best_count:
                best, best_count = name, count
    if best is None:
        return {}
    blocks = {}
    layers = model.get_submodule(best)
    for i, layer in enumerate(layers):
        for local, _ in layer.named_parameters():
            blocks[f"{best}.{i}.{local}" if best else f"{i}.{local}"] = i
    return blocks


def initialiser(tensor):
    """The #step.param initialiser that best describes a parameter's current
    values (stepc-run --init-params draws from it; the exported values are in
    init.safetensors)."""
    t = tensor.detach()
    if bool((t == 0).all()):
        return "zeros"
    if bool((t == 1).all()):
        return "ones"
    std = float(t.float().std()) if t.numel() > 1 else 0.02
    return f"normal({std if std > 0 else 0.02!r})"


def export(model, example_inputs, out_dir, input_names=None, optimizer=None,
           max_grad_norm=None):
    """Traces `model(*example_inputs)` and writes out_dir/{model.mlir,
    init.safetensors, export.json}; returns an `Exported`. With `optimizer`
    (a torch.optim AdamW, Adam or SGD over the model's parameters), each
    parameter takes its group's weight decay and lr scale, and
    `exported.compile_flags` the shared hyperparameters (optim.py);
    `max_grad_norm` is the training loop's clip_grad_norm_ (None: none)."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ExportError(f"the output '{out_dir}' exists and is not a directory")
    read_optimizer = optim.read(optimizer, max_grad_norm) if optimizer is not None else None
    captured = capture(model, example_inputs, input_names)
    names = [n for n, _ in captured.params]
    blocks = {}
    if isinstance(model, torch.nn.Module):
        by_alias = layer_blocks(model)
        for alias, name in captured.aliases.items():
            if alias in by_alias and name == alias:
                blocks[name] = by_alias[alias]
    inits = {n: initialiser(t) for n, t in captured.params}
    markers = optim.markers(read_optimizer, captured.params) if read_optimizer else None
    lowering = Lowering(captured, blocks, inits, markers)
    loss = lowering.run()
    os.makedirs(out_dir, exist_ok=True)
    header = (f"// Exported by stepc.export from {type(model).__name__} "
              f"(PyTorch {torch.__version__}).\n")
    text = lowering.w.render(header, loss)
    with open(os.path.join(out_dir, "model.mlir"), "w") as f:
        f.write(text)
    safetensors.save({n: t.detach().float().cpu().numpy() for n, t in captured.params},
                     os.path.join(out_dir, "init.safetensors"))
    # Persistent buffers (nanoGPT's causal mask) are constants of the step;
    # kept so that the state_dict a Session returns loads with strict=True.
    persistent = set(model.state_dict()) if isinstance(model, torch.nn.Module) else set()
    safetensors.save({n: b.cpu().numpy() for n, b in captured.buffers if n in persistent},
                     os.path.join(out_dir, "buffers.safetensors"))
    exported = Exported(out_dir, names, captured.aliases,
                        [n for n, _ in captured.inputs], lowering.ignore_index,
                        lowering.input_names,
                        read_optimizer.flags if read_optimizer else None)
    with open(os.path.join(out_dir, "export.json"), "w") as f:
        json.dump(exported.to_json(), f, indent=1)
    return exported


__all__ = ["export", "Exported", "ExportError"]
