#!/usr/bin/env python3
"""The CPU Adam, SGD and Lion kernels against PyTorch, on the same float32 data.

    optimizers_vs_torch.py LIBSTEPC_KERNELS_CPU.so

Five steps of stepc_cpu_adam / stepc_cpu_sgd (plain, momentum, Nesterov) /
stepc_cpu_lion (through ctypes) and of torch.optim.Adam, torch.optim.SGD
(single-tensor path) and Lion's reference update written in torch ops, from
identical parameters, gradients and hyperparameters (weight decay on):
parameters and state must be bit-identical.
"""
import ctypes
import sys

import numpy as np
import torch

lib = ctypes.CDLL(sys.argv[1])
f32p = ctypes.POINTER(ctypes.c_float)
d, i64 = ctypes.c_double, ctypes.c_int64
lib.stepc_cpu_adam.argtypes = [f32p, f32p, f32p, f32p, i64, f32p, f32p, f32p, d, d, d, d]
lib.stepc_cpu_sgd.argtypes = [f32p, f32p, f32p, i64, f32p, f32p, d, ctypes.c_int, d]
lib.stepc_cpu_lion.argtypes = [f32p, f32p, f32p, i64, f32p, f32p, d, d, d]

rng = np.random.default_rng(0)
n = 1 << 16
lr = float(np.float32(3e-4))  # the kernels receive it as a float
wd = 0.1
p0 = rng.standard_normal(n).astype(np.float32)
grads = [rng.standard_normal(n).astype(np.float32) * 0.01 for _ in range(5)]
ptr = lambda a: a.ctypes.data_as(f32p)
lr32, scale = np.array([lr], np.float32), np.array([1.0], np.float32)


def report(name, ours, theirs):
    differ = int(np.sum(ours != theirs))
    print(f"{name}: {differ} of {n} elements differ from torch float32")
    return differ == 0


ok = True
# Adam (L2 weight decay).
param, m, v = p0.copy(), np.zeros(n, np.float32), np.zeros(n, np.float32)
for t, g in enumerate(grads, start=1):
    lib.stepc_cpu_adam(ptr(param), ptr(g), ptr(m), ptr(v), n, ptr(lr32),
                       ptr(np.array([t], np.float32)), ptr(scale), 0.9, 0.95, 1e-8, wd)
tp = torch.nn.Parameter(torch.tensor(p0))
opt = torch.optim.Adam([tp], lr=lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=wd, foreach=False)
for g in grads:
    tp.grad = torch.tensor(g)
    opt.step()
ok &= report("adam param", param, tp.detach().numpy())
ok &= report("adam exp_avg", m, opt.state[tp]["exp_avg"].numpy())
ok &= report("adam exp_avg_sq", v, opt.state[tp]["exp_avg_sq"].numpy())

# SGD: momentum 0 (the buffer unused), 0.9, 0.9 with Nesterov.
for momentum, nesterov in ((0.0, False), (0.9, False), (0.9, True)):
    param, buf = p0.copy(), np.zeros(n, np.float32)
    for g in grads:
        lib.stepc_cpu_sgd(ptr(param), ptr(g), ptr(buf), n, ptr(lr32), ptr(scale), momentum,
                          int(nesterov), wd)
    tp = torch.nn.Parameter(torch.tensor(p0))
    opt = torch.optim.SGD([tp], lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=wd,
                          foreach=False)
    for g in grads:
        tp.grad = torch.tensor(g)
        opt.step()
    label = f"sgd momentum={momentum} nesterov={nesterov}"
    ok &= report(label + " param", param, tp.detach().numpy())
    if momentum:
        ok &= report(label + " momentum_buffer", buf, opt.state[tp]["momentum_buffer"].numpy())

# Lion, the reference update (lucidrains/lion-pytorch) op for op.
param, m = p0.copy(), np.zeros(n, np.float32)
for g in grads:
    lib.stepc_cpu_lion(ptr(param), ptr(g), ptr(m), n, ptr(lr32), ptr(scale), 0.9, 0.99, wd)
tp, tm = torch.tensor(p0), torch.zeros(n)
for g in grads:
    tg = torch.tensor(g)
    tp.mul_(1 - lr * wd)
    update = tm.clone().mul_(0.9).add(tg, alpha=1 - 0.9).sign_()
    tp.add_(update, alpha=-lr)
    tm.mul_(0.99).add_(tg, alpha=1 - 0.99)
ok &= report("lion param", param, tp.numpy())
ok &= report("lion exp_avg", m, tm.numpy())
sys.exit(0 if ok else 1)
