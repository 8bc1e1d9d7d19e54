#!/usr/bin/env python3
"""LoRA fine-tuning of nanoGPT's GPT with stepc: pretrain the whole model on
the first half of the bundled corpus, then freeze it (requires_grad=False),
add low-rank adapters to every attention and MLP input projection, and
fine-tune only those on the second half. The frozen weights come back bit
for bit; merging the adapters into them gives a plain GPT with the same loss.

    PYTHONPATH=build/python python3 examples/pytorch/lora.py [--steps 150] [--out DIR]
"""
import argparse, os
import stepc                       # first: its OpenBLAS before numpy's (see stepc/__init__.py)
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from model import GPT, GPTConfig

here = os.path.dirname(os.path.abspath(__file__))
p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=150)
p.add_argument("--rank", type=int, default=8)
p.add_argument("--out", default="lora-out")
a = p.parse_args()

text = open(os.path.join(here, "..", "data", "sonnets.txt"), "rb").read()
vocab = sorted(set(text))                                   # a character tokenizer
data = np.array([vocab.index(c) for c in text], dtype=np.int64)
halves = data[:len(data) // 2], data[len(data) // 2:]
B, T = 8, 64
rng = np.random.default_rng(0)
def batch(part):
    i = rng.integers(0, len(part) - T - 1, B)
    return (torch.from_numpy(np.stack([part[j:j + T] for j in i])),
            torch.from_numpy(np.stack([part[j + 1:j + T + 1] for j in i])))

class LoRALinear(nn.Module):
    """base(x) + (alpha / rank) · B A x, the base frozen; B starts at zero,
    so the fine-tune starts from the pretrained model exactly."""
    def __init__(self, base, rank, alpha=16.0):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.randn(rank, base.in_features) / base.in_features ** 0.5)
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))
        self.scale = alpha / rank
    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.lora_a), self.lora_b) * self.scale
    def merged(self):
        w = self.base.weight + self.scale * self.lora_b @ self.lora_a
        out = nn.Linear(self.base.in_features, self.base.out_features, bias=self.base.bias is not None)
        out.load_state_dict({"weight": w, **({"bias": self.base.bias} if self.base.bias is not None else {})})
        return out

def train(model, part, name, steps, lr):
    exported = stepc.export(model, batch(part), os.path.join(a.out, name))
    so = stepc.compile(exported, os.path.join(a.out, name, "step.so"), target="cpu")
    session = stepc.Session(so, export_dir=exported.directory)
    for step in range(1, steps + 1):
        x, y = batch(part)
        loss, _ = session.step(lr * min(1.0, step / 10), idx=x, targets=y)
        if step % 50 == 0 or step == 1:
            print(f"{name} step {step:4d} | loss {loss:.4f}")
    model.load_state_dict(session.state_dict(), strict=True)

def loss_on(model, part):
    g = torch.Generator().manual_seed(1)
    i = torch.randint(0, len(part) - T - 1, (16,), generator=g).tolist()
    x = torch.from_numpy(np.stack([part[j:j + T] for j in i]))
    y = torch.from_numpy(np.stack([part[j + 1:j + T + 1] for j in i]))
    with torch.no_grad():
        return model(x, y)[1].item()

torch.manual_seed(0)
model = GPT(GPTConfig(vocab_size=len(vocab), block_size=T, n_layer=4, n_head=4, n_embd=128,
                      dropout=0.0, bias=True, flash=False))
train(model, halves[0], "pretrain", a.steps, 3e-3)           # every parameter trains
base = {k: v.clone() for k, v in model.state_dict().items()}
before = loss_on(model, halves[1])

model.requires_grad_(False)                                  # freeze the pretrained model
for block in model.transformer.h:
    block.attn.c_attn = LoRALinear(block.attn.c_attn, a.rank)
    block.mlp.c_fc = LoRALinear(block.mlp.c_fc, a.rank)
trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
total = sum(p.numel() for p in model.parameters())
print(f"LoRA: {trained} of {total} parameters train ({100 * trained / total:.1f}%)")
train(model, halves[1], "lora", a.steps, 3e-3)
after = loss_on(model, halves[1])

state = model.state_dict()
changed = [k for k, v in base.items()
           if not torch.equal(state[k.replace("c_attn.", "c_attn.base.").replace("c_fc.", "c_fc.base.")], v)]
print(f"frozen weights changed: {len(changed)}")
for block in model.transformer.h:                            # merge: a plain GPT again
    block.attn.c_attn, block.mlp.c_fc = block.attn.c_attn.merged(), block.mlp.c_fc.merged()
merged = loss_on(model, halves[1])
print(f"second-half loss: pretrained {before:.4f}, LoRA {after:.4f}, merged {merged:.4f}")
