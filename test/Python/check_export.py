#!/usr/bin/env python3
"""stepc.export end to end (test/Python/export.test):

    check_export.py --model gpt|llama|mlp --bin BUILD/bin --work DIR [--steps N]
    check_export.py --model gpt,llama,... --log-dir LOGS --bin BUILD/bin --work DIR

exports the module, compiles it for the CPU, trains N steps through
stepc.Session and the same module through torch.optim.AdamW (stepc's
defaults: betas (0.9, 0.95), weight decay 0.1 on matrices, global-norm
clipping at 1.0; eps 1e-3 in both, because the key bias of attention has
an exactly zero gradient whose rounding noise Adam with eps 1e-8 would turn
into full-size, implementation-dependent updates) from the same weights and
batches; every
step's loss and every final parameter must agree within --tolerance
(relative). Then model.load_state_dict(session.state_dict(), strict=True)
reproduces the compiled eval's logits. A module with nn.Dropout trains in
PyTorch with stepc's masks (scripts/torch_check.py's own Philox: the
session's seed 0, the step number, the dropouts' order as streams), so its
losses must agree too; evaluation drops nothing on either side.
"""
import argparse
import contextlib
import math
import os
import subprocess
import sys

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "Inputs"))
import models  # noqa: E402
import stepc  # noqa: E402

sys.path.insert(0, os.path.join(here, "..", "..", "scripts"))
from torch_check import dropout_mask  # noqa: E402


class StepcMasks:
    """F.dropout in training, drawing stepc's masks for step `step`."""

    def __init__(self, step):
        self.step, self.stream, self.original = step, 0, torch.nn.functional.dropout

    def __call__(self, x, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return x
        mask = dropout_mask(tuple(x.shape), p, 0, self.stream, self.step)
        self.stream += 1
        return x * mask

    def __enter__(self):
        torch.nn.functional.dropout = self
        return self

    def __exit__(self, *exc):
        torch.nn.functional.dropout = self.original

p = argparse.ArgumentParser()
p.add_argument("--model", required=True,
               help="one model, or several comma-separated (checked in turn, in this process)")
p.add_argument("--bin", required=True)
p.add_argument("--work", required=True)
p.add_argument("--steps", type=int, default=5)
p.add_argument("--tolerance", type=float, default=1e-5)
p.add_argument("--stepc-flags", default="")
p.add_argument("--groups", action="store_true",
               help="torch.optim.AdamW with parameter groups (decay 0.01 on all but the "
                    "norms, lr x0.1 on the embeddings), given to stepc.export")
p.add_argument("--log-dir", help="with several models: each one's lines to DIR/<model>.log")
args = p.parse_args()



def check(args):
    """Exports, compiles and trains args.model beside PyTorch (the module
    docstring); exits with the first difference."""
    torch.manual_seed(0)
    model, batches = models.make(args.model, args.steps)
    out = os.path.join(args.work, args.model)
    so = os.path.join(out, "step.so")
    if args.groups:
        # The optimizer as a user writes it, read by stepc.export: the stepc
        # flags come with the export (betas, eps, no clipping but the loop's).
        named = list(model.named_parameters())
        norms = [p for n, p in named if ".ln" in n or "norm" in n]
        embeddings = [p for n, p in named if "wte" in n or "wpe" in n or "emb" in n]
        rest = [p for _, p in named if all(p is not q for q in norms + embeddings)]
        opt = torch.optim.AdamW([{"params": rest, "weight_decay": 0.01},
                                 {"params": norms, "weight_decay": 0.0},
                                 {"params": embeddings, "weight_decay": 0.01, "lr": 1e-4}],
                                lr=1e-3, betas=(0.9, 0.999), eps=1e-3)
        exported = stepc.export(model, batches[0], out, optimizer=opt, max_grad_norm=1.0)
        stepc.compile(exported, so, target="cpu", report=os.path.join(out, "report.json"))
    else:
        exported = stepc.export(model, batches[0], out)
        subprocess.run([os.path.join(args.bin, "stepc"), "--target=cpu", exported.mlir, "-o", so,
                        "--optimizer-options=epsilon=1e-3",
                        "--report=" + os.path.join(out, "report.json")] + args.stepc_flags.split(),
                       check=True)
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=1e-3, betas=(0.9, 0.95), eps=1e-3)
    session = stepc.Session(so, export_dir=out)
    # Each stepc.nn.MoE's expert loads as PyTorch routes its input (the stable
    # descending sort's top k: ties to the lower index), which the step returns
    # as the metric <module>.expert_load.
    torch_loads = {}


    def record_loads(name):
        def hook(module, inputs, _):
            x = inputs[0].detach().reshape(-1, inputs[0].shape[-1])
            probs = torch.softmax(x @ module.router.weight.detach().t(), dim=-1)
            chosen = torch.sort(probs, dim=-1, descending=True, stable=True)[1][:, :module.top_k]
            share = torch.nn.functional.one_hot(chosen, module.router.out_features).double()
            torch_loads[name + ".expert_load"] = share.mean((0, 1)).numpy()
            # With a capacity: the share of those pairs it drops (written here
            # again: a pair stays while its expert has fewer than C earlier
            # pairs of its sequence).
            if module.capacity_factor:
                seq = inputs[0].shape[-2]
                cap = max(1, math.ceil(module.capacity_factor * seq * module.top_k /
                                       module.router.out_features))
                kept, taken = 0, {}
                for p, e in enumerate(chosen.reshape(-1).tolist()):
                    key = (p // module.top_k // seq, e)
                    kept += taken.get(key, 0) < cap
                    taken[key] = taken.get(key, 0) + 1
                torch_loads[name + ".dropped"] = np.float64(1 - kept / chosen.numel())
        return hook


    for name, module in model.named_modules():
        if isinstance(module, stepc.nn.MoE):
            module.register_forward_hook(record_loads(name))
    scales = [g["lr"] / 1e-3 for g in opt.param_groups]
    worst = 0.0
    for step, batch in enumerate(batches):
        lr = 1e-3 * (step + 1) / len(batches)
        for g, scale in zip(opt.param_groups, scales):
            g["lr"] = lr * scale
        opt.zero_grad()
        with StepcMasks(step + 1):
            result = model(*batch)
        loss = result[1] if isinstance(result, tuple) else result
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        got, got_norm = session.step(lr, **dict(zip(exported.inputs, batch)))
        err = abs(got - loss.item()) / abs(loss.item())
        worst = max(worst, err)
        print(f"step {step + 1}: loss stepc {got:.7f} torch {loss.item():.7f} (rel {err:.2e}), "
              f"norm stepc {got_norm:.5f} torch {norm.item():.5f}")
        if err > args.tolerance:
            sys.exit(f"FAIL: step {step + 1} loss differs by {err:.3g}")
        metrics = session.metrics()
        for name, load in torch_loads.items():
            if name not in metrics or not np.allclose(metrics[name], load, rtol=0, atol=1e-6):
                sys.exit(f"FAIL: step {step + 1} {name} is {metrics.get(name)}, PyTorch's {load}")
        if torch_loads:
            shown = [n if np.ndim(v) else f"{n} {float(v):.4f}" for n, v in sorted(torch_loads.items())]
            print(f"step {step + 1}: expert loads as PyTorch routes ({', '.join(shown)})")
    state = session.state_dict()
    for name, value in model.state_dict().items():
        if name not in state:
            continue
        a, b = state[name].numpy(), value.detach().numpy()
        if not np.issubdtype(b.dtype, np.floating):  # a mask buffer: exactly
            if not np.array_equal(a, b):
                sys.exit(f"FAIL: buffer {name} changed")
            continue
        # Infinities (an additive mask buffer's -inf) exactly; the rest within
        # the tolerance (a NaN anywhere fails: `not err <= tol`).
        finite = np.isfinite(b)
        if not np.array_equal(a[~finite], b[~finite]):
            sys.exit(f"FAIL: {name}'s non-finite entries changed")
        a, b = a[finite], b[finite]
        err = float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)) if b.size else 0.0
        worst = max(worst, err)
        if not err <= args.tolerance:
            sys.exit(f"FAIL: parameter {name} differs by {err:.3g}")
    # Frozen parameters (requires_grad=False) come back exactly as they went in;
    # the session names as frozen those and the ones PyTorch gave no gradient.
    for name, value in model.named_parameters():
        if not value.requires_grad and not torch.equal(state[name], value.detach()):
            sys.exit(f"FAIL: frozen parameter {name} changed")
    untrained = {n for n, p in model.named_parameters() if not p.requires_grad or p.grad is None}
    if set(session.frozen_parameter_names) != untrained & set(session.parameter_names):
        sys.exit(f"FAIL: the session's frozen parameters {sorted(session.frozen_parameter_names)} "
                 f"are not PyTorch's untrained ones {sorted(untrained)}")
    # safetensors round trip: the trained weights bit for bit.
    path = os.path.join(out, "trained.safetensors")
    stepc.safetensors.save({k: v.numpy() for k, v in state.items()}, path)
    for name, value in stepc.safetensors.load(path).items():
        if not np.array_equal(value, state[name].numpy()):
            sys.exit(f"FAIL: {name} changed through safetensors")
    # The trained weights back in the module, strictly, give the compiled logits.
    model.load_state_dict({k: torch.from_numpy(v) for k, v in stepc.safetensors.load(path).items()},
                          strict=True)
    for name, value in model.state_dict().items():
        if name in state and not torch.equal(value, state[name]):
            sys.exit(f"FAIL: {name} differs after load_state_dict")
    loss, logits = session.eval(**dict(zip(exported.inputs, batches[0])))
    model.eval()
    with torch.no_grad():
        result = model(*batches[0])
    ref_loss = (result[1] if isinstance(result, tuple) else result).item()
    if abs(loss - ref_loss) / abs(ref_loss) > args.tolerance:
        sys.exit(f"FAIL: eval loss {loss} vs the module's {ref_loss}")
    if logits is not None and isinstance(result, tuple):
        ref = result[0].detach().numpy().reshape(logits.shape)
        err = float(np.abs(logits - ref).max() / np.abs(ref).max())
        if err > args.tolerance:
            sys.exit(f"FAIL: eval logits differ by {err:.3g}")
    print(f"ok: {args.model}: {len(batches)} steps and {len(state)} parameters within "
          f"{args.tolerance:g} (worst {worst:.2e}); state_dict loads strictly")


models_asked = args.model.split(",")
if len(models_asked) > 1 and not args.log_dir:
    sys.exit("check_export: several models need --log-dir")
for name in models_asked:
    one = argparse.Namespace(**{**vars(args), "model": name})
    if not args.log_dir:
        check(one)
        continue
    os.makedirs(args.log_dir, exist_ok=True)
    with open(os.path.join(args.log_dir, name + ".log"), "w") as log, \
            contextlib.redirect_stdout(log):
        check(one)
    print(f"ok: {name}")
