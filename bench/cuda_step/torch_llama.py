"""The peer of the second CUDA benchmark: a Llama of about 1.1B parameters
(examples/llama-1b, TinyLlama's shapes: dim 2048, 22 layers, 32 query heads
on 4 key/value heads, SwiGLU of 5632, RMSNorm, rotary positions in Meta's
pair layout, untied output, vocabulary 32000, T = 2048) under
torch.compile with bf16 autocast, fused AdamW and PyTorch's flash attention
(grouped-query through enable_gqa), on random tokens, in the same run on the
same GPU as stepc (scripts/gpu-check.sh). Prints one JSON object: tokens/s
(median over the timed steps), step times and the loss.

Usage: python3 bench/cuda_step/torch_llama.py --batch B [--steps N] [--warmup W]
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import peer


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary(x, cos, sin):
    """Meta's layout: channel pairs (2i, 2i+1) of each head rotate together."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, d, heads, kv_heads, hidden):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.attention_norm = RMSNorm(d)
        self.wq = nn.Linear(d, heads * self.hd, bias=False)
        self.wk = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(heads * self.hd, d, bias=False)
        self.ffn_norm = RMSNorm(d)
        self.w1 = nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)
        self.w3 = nn.Linear(d, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        h = self.attention_norm(x)
        q = rotary(self.wq(h).view(b, t, self.heads, self.hd), cos, sin)
        k = rotary(self.wk(h).view(b, t, self.kv_heads, self.hd), cos, sin)
        v = self.wv(h).view(b, t, self.kv_heads, self.hd)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True, enable_gqa=True)
        x = x + self.wo(y.transpose(1, 2).reshape(b, t, d))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, vocab=32000, d=2048, layers=22, heads=32, kv_heads=4, hidden=5632,
                 seq=2048, theta=10000.0):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Block(d, heads, kv_heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.output = nn.Linear(d, vocab, bias=False)
        hd = d // heads
        freqs = 1.0 / theta ** (torch.arange(0, hd, 2).float() / hd)
        angles = torch.outer(torch.arange(seq).float(), freqs)  # [T, hd/2]
        self.register_buffer("cos", angles.cos()[None, :, None, :], persistent=False)
        self.register_buffer("sin", angles.sin()[None, :, None, :], persistent=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, self.cos[:, :t], self.sin[:, :t])
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def main():
    a = peer.arguments(4, 2048, 15, 5)
    torch.manual_seed(0)
    peer.run(Llama(seq=a.seq).cuda(), 32000, a, lr=3e-4)


if __name__ == "__main__":
    main()
