#!/usr/bin/env python3
"""Skews every MoE layer's routing toward expert 0 on purpose: from the
parameters `stepc-run --save-npy IN` wrote, writes OUT/<name>.npy (what
--init-npy reads) with each block's ln_2 bias set to 1 and its router's
row 0 (expert 0's weights) to SCALE, so that expert 0's logit is SCALE · dim for every token
(a layer norm's outputs sum to dim when its bias is 1).

    skew_router.py IN OUT [--scale 0.05]
"""
import argparse
import os

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("src")
p.add_argument("dst")
p.add_argument("--scale", type=float, default=0.05)
a = p.parse_args()
os.makedirs(a.dst, exist_ok=True)
skewed = 0
for f in sorted(os.listdir(a.src)):
    if not f.startswith("param.") or not f.endswith(".npy"):
        continue
    name = f[len("param."):-len(".npy")]
    x = np.load(os.path.join(a.src, f))
    if name.endswith(".moe.router.weight"):  # [experts, dim], nn.Linear's layout
        x[0, :] = a.scale
        skewed += 1
    elif name.endswith(".ln_2.bias"):
        x[:] = 1.0
    np.save(os.path.join(a.dst, name + ".npy"), x.astype(np.float32))
if not skewed:
    raise SystemExit("no router found")
print(f"skewed {skewed} routers")
