#!/usr/bin/env python3
"""stepc.hf's name maps (test/Python/export.test): both directions invert
each other; GPT-2's Conv1D weights are the Linear's transposes; and for a
Llama, attention scores computed Hugging Face's way (rotate_half rotary on
the mapped q_proj/k_proj) equal Meta's (adjacent-pair rotary on wq/wk), so
mapped weights compute the same model."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs"))
import models  # noqa: E402
from stepc import hf  # noqa: E402

torch.manual_seed(0)
gpt, _ = models.make("gpt", 1)
sd = gpt.state_dict()
to = hf.gpt2_to_hf(sd)
assert "transformer.h.0.attn.bias" not in to
assert torch.equal(to["transformer.h.0.attn.c_attn.weight"], sd["transformer.h.0.attn.c_attn.weight"].t())
back = hf.gpt2_from_hf(to)
assert all(torch.equal(back[k], sd[k]) for k in back) and len(back) == len(sd) - 2, sorted(set(sd) - set(back))
print(f"gpt2: {len(to)} tensors, Conv1D weights transposed, round trip exact")

llama, _ = models.make("llama", 1)
sd = llama.state_dict()
heads, kv, d = 4, 2, 8
to = hf.llama_to_hf(sd, heads, kv)
assert "model.layers.1.self_attn.k_proj.weight" in to and "lm_head.weight" in to
back = hf.llama_from_hf(to, heads, kv)
assert back.keys() == sd.keys() and all(torch.equal(back[k], sd[k]) for k in sd)
# Scores: Meta (pairs) with wq/wk against HF (halves) with q_proj/k_proj.
x = torch.randn(2, 16, 32)
cos, sin = models.rope_tables(d, 16)


def meta(w, n):
    return models.apply_rotary((x @ w.t()).view(2, 16, n, d), cos, sin)


def rotate_half_rope(w, n):
    q = (x @ w.t()).view(2, 16, n, d)
    c = torch.cat([cos, cos], -1)[None, :, None, :]
    s = torch.cat([sin, sin], -1)[None, :, None, :]
    half = torch.cat([-q[..., d // 2:], q[..., :d // 2]], -1)
    return q * c + half * s


q_meta, k_meta = meta(sd["layers.0.attention.wq.weight"], heads), meta(sd["layers.0.attention.wk.weight"], kv)
q_hf = rotate_half_rope(to["model.layers.0.self_attn.q_proj.weight"], heads)
k_hf = rotate_half_rope(to["model.layers.0.self_attn.k_proj.weight"], kv)
rep = heads // kv
scores_meta = torch.einsum("bthd,bshd->bhts", q_meta, k_meta.repeat_interleave(rep, 2))
scores_hf = torch.einsum("bthd,bshd->bhts", q_hf, k_hf.repeat_interleave(rep, 2))
err = float((scores_meta - scores_hf).abs().max() / scores_meta.abs().max())
assert err < 1e-6, err
print(f"llama: {len(to)} tensors, round trip exact, HF rotate_half scores = Meta's (rel {err:.1e})")
np_sd = {k: v.numpy() for k, v in sd.items()}
assert all(np.array_equal(hf.llama_from_hf(hf.llama_to_hf(np_sd, heads, kv), heads, kv)[k], np_sd[k]) for k in np_sd)
print("ok")
