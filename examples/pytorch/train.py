#!/usr/bin/env python3
"""nanoGPT's GPT trained by stepc from Python on the bundled corpus:
export the nn.Module, compile it, train it through stepc.Session, and load
the trained weights back into the module.

    PYTHONPATH=build/python python3 examples/pytorch/train.py [--steps 200] [--out DIR]
"""
import argparse, os
import stepc  # first: it picks OpenBLAS's kernels for this CPU before numpy loads them
import numpy as np
import torch
from model import GPT, GPTConfig

here = os.path.dirname(os.path.abspath(__file__))
p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=200)
p.add_argument("--out", default="nanogpt-out")
a = p.parse_args()

text = open(os.path.join(here, "..", "data", "sonnets.txt"), "rb").read()
vocab = sorted(set(text))                                   # a character tokenizer
data = np.array([vocab.index(c) for c in text], dtype=np.int64)
B, T = 32, 64
torch.manual_seed(0)
model = GPT(GPTConfig(vocab_size=len(vocab), block_size=T, n_layer=4, n_head=4, n_embd=128,
                      dropout=0.0, bias=True, flash=False))
rng = np.random.default_rng(0)
def batch():
    i = rng.integers(0, len(data) - T - 1, B)
    x = np.stack([data[j:j + T] for j in i])
    y = np.stack([data[j + 1:j + T + 1] for j in i])
    return torch.from_numpy(x), torch.from_numpy(y)

exported = stepc.export(model, batch(), a.out)              # model.mlir + init.safetensors
so = stepc.compile(exported, os.path.join(a.out, "step.so"), target="cpu")
session = stepc.Session(so, export_dir=a.out)               # starts from the module's weights
for step in range(1, a.steps + 1):
    lr = 3e-3 * min(1.0, step / 20)                         # warmup, then constant
    x, y = batch()
    loss, norm = session.step(lr, idx=x, targets=y)
    if step % 20 == 0 or step == 1:
        print(f"step {step:4d} | loss {loss:.4f} | grad norm {norm:.3f}")
model.load_state_dict(session.state_dict(), strict=True)    # the trained weights, back in torch
x, y = batch()
with torch.no_grad():
    print(f"torch eval loss with the trained weights: {model(x, y)[1].item():.4f}")
stepc.safetensors.save({k: v.numpy() for k, v in session.state_dict().items()},
                       os.path.join(a.out, "trained.safetensors"))
