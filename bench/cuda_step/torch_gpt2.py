"""The peer of the CUDA benchmark: GPT-2 124M (examples/gpt2-124m: the same
shapes, exact GELU, tied head) under torch.compile with bf16 autocast, fused
AdamW and PyTorch's flash attention, on random tokens, in the same run on the
same GPU as stepc (scripts/gpu-check.sh). Prints one JSON object: tokens/s
(median over the timed steps), step times and the loss.

Usage: python3 bench/cuda_step/torch_gpt2.py --batch B [--steps N] [--warmup W]
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import peer


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=50257, ctx=1024, d=768, layers=12, heads=12):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        # GPT-2's initialisation (as stepc's gpt2-124m): PyTorch's default
        # N(0, 1) embeddings, tied to the output layer, start the loss at ~75
        # instead of ln(50257) = 10.8.
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def main():
    a = peer.arguments(8, 1024, 30, 5)
    torch.manual_seed(0)
    peer.run(GPT().cuda(), 50257, a, lr=6e-4)


if __name__ == "__main__":
    main()
