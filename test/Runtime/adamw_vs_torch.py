#!/usr/bin/env python3
"""The CPU AdamW kernel against torch.optim.AdamW, on the same float32 data.

    adamw_vs_torch.py LIBSTEPC_KERNELS_CPU.so

Five steps of stepc_cpu_adamw (through ctypes) and of torch.optim.AdamW
(single-tensor path, float32) from identical parameters, gradients and
hyperparameters: parameters and both moments must be bit-identical, i.e.
the kernel rounds every intermediate exactly as PyTorch does (weights such
as 1 - beta1 computed in double, then rounded; exp_avg by lerp). Also
reports the mean relative bias of both against a float64 reference.
"""
import ctypes
import sys

import numpy as np
import torch

lib = ctypes.CDLL(sys.argv[1])
f32p = ctypes.POINTER(ctypes.c_float)
lib.stepc_cpu_adamw.argtypes = [f32p, f32p, f32p, f32p, ctypes.c_int64, f32p, f32p, f32p,
                                ctypes.c_double, ctypes.c_double, ctypes.c_double, ctypes.c_double]
lib.stepc_cpu_adamw.restype = None

rng = np.random.default_rng(0)
n = 1 << 16
beta1, beta2, eps, wd, lr = 0.9, 0.95, 1e-8, 0.1, 3e-4
p0 = rng.standard_normal(n).astype(np.float32)
grads = [rng.standard_normal(n).astype(np.float32) * 0.01 for _ in range(5)]


def ptr(a):
    return a.ctypes.data_as(f32p)


param, m, v = p0.copy(), np.zeros(n, np.float32), np.zeros(n, np.float32)
lr32, scale = np.array([lr], np.float32), np.array([1.0], np.float32)
for t, g in enumerate(grads, start=1):
    step = np.array([t], np.float32)
    lib.stepc_cpu_adamw(ptr(param), ptr(g), ptr(m), ptr(v), n, ptr(lr32), ptr(step), ptr(scale),
                        beta1, beta2, eps, wd)


def torch_run(dtype):
    p = torch.nn.Parameter(torch.tensor(p0, dtype=dtype))
    # The kernel receives the learning rate as a float: give torch the same value.
    opt = torch.optim.AdamW([p], lr=float(lr32[0]), betas=(beta1, beta2), eps=eps, weight_decay=wd,
                            foreach=False)
    for g in grads:
        p.grad = torch.tensor(g, dtype=dtype)
        opt.step()
    s = opt.state[p]
    return p.detach().numpy(), s["exp_avg"].numpy(), s["exp_avg_sq"].numpy()


tp, tm, tv = torch_run(torch.float32)
rp, rm, rv = torch_run(torch.float64)
failed = False
for name, ours, theirs, ref in (("param", param, tp, rp), ("exp_avg", m, tm, rm),
                                ("exp_avg_sq", v, tv, rv)):
    differ = int(np.count_nonzero(ours != theirs))
    bias_ours = float(np.mean((ours - ref) / np.where(ref == 0, 1, ref)))
    bias_torch = float(np.mean((theirs - ref) / np.where(ref == 0, 1, ref)))
    print(f"{name}: {differ} of {n} elements differ from torch float32; mean relative bias vs "
          f"float64: stepc {bias_ours:+.2e}, torch {bias_torch:+.2e}")
    failed |= differ > 0
sys.exit(1 if failed else 0)
