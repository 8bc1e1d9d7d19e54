"""The PyTorch modules test/Python imports: nanoGPT's GPT (the module
examples/pytorch trains), a Llama (RMSNorm, rotary embeddings, SwiGLU,
grouped-query attention as Meta writes them) and an MLP regressor."""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "examples", "pytorch"))
from model import GPT, GPTConfig  # noqa: E402


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, seq, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angle = torch.outer(torch.arange(seq).float(), freqs)
    return angle.cos(), angle.sin()


def apply_rotary(x, cos, sin):
    """Meta's convention: channel pairs (2i, 2i+1) rotate together; x [B, T, H, D]."""
    b, t, h, d = x.shape
    pairs = x.reshape(b, t, h, d // 2, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(3)


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads, seq):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)
        cos, sin = rope_tables(self.head_dim, seq)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1),
                             persistent=False)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.heads, self.head_dim)
        k = self.wk(x).view(b, t, self.kv_heads, self.head_dim)
        v = self.wv(x).view(b, t, self.kv_heads, self.head_dim)
        q, k = apply_rotary(q, self.cos[:t], self.sin[:t]), apply_rotary(k, self.cos[:t], self.sin[:t])
        rep = self.heads // self.kv_heads
        k = k[:, :, :, None, :].expand(b, t, self.kv_heads, rep, self.head_dim).reshape(
            b, t, self.heads, self.head_dim)
        v = v[:, :, :, None, :].expand(b, t, self.kv_heads, rep, self.head_dim).reshape(
            b, t, self.heads, self.head_dim)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        scores = scores + self.mask[:t, :t]
        scores = F.softmax(scores.float(), dim=-1).type_as(q)
        out = torch.matmul(scores, v).transpose(1, 2).contiguous().view(b, t, -1)
        return self.wo(out)


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Layer(nn.Module):
    def __init__(self, dim, heads, kv_heads, seq, hidden):
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = Attention(dim, heads, kv_heads, seq)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = FeedForward(dim, hidden)

    def forward(self, x):
        x = x + self.attention(self.attention_norm(x))
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, vocab=96, dim=32, layers=2, heads=4, kv_heads=2, seq=16, hidden=64,
                 label_smoothing=0.0):
        super().__init__()
        self.label_smoothing = label_smoothing
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Layer(dim, heads, kv_heads, seq, hidden)
                                    for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, targets):
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x)
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                               label_smoothing=self.label_smoothing)


class LoRALinear(nn.Module):
    """A frozen Linear plus a trained low-rank update (LoRA): base(x) +
    (alpha / rank) · B A x. B starts small, not zero, so that both adapters
    have gradients from the first step."""

    def __init__(self, base, rank=4, alpha=8.0):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.randn(rank, base.in_features) * 0.1)
        self.lora_b = nn.Parameter(torch.randn(base.out_features, rank) * 0.01)
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.lora_a), self.lora_b) * self.scale


def lora_llama():
    """A Llama whose pretrained weights are frozen: adapters on every
    attention query and value projection and on the MLP's gate; the final
    norm trains too."""
    model = Llama().requires_grad_(False)
    for layer in model.layers:
        layer.attention.wq = LoRALinear(layer.attention.wq)
        layer.attention.wv = LoRALinear(layer.attention.wv)
        layer.feed_forward.w1 = LoRALinear(layer.feed_forward.w1)
    model.norm.requires_grad_(True)
    return model


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.fc2 = nn.Linear(32, 32)
        self.head = nn.Linear(32, 1)

    def forward(self, x, y):
        h = F.gelu(self.fc1(x))
        h = torch.tanh(self.fc2(h)) + h
        return F.mse_loss(self.head(h).squeeze(-1), y)


class UnusedHead(MLP):
    """An MLP with a second head its loss never reads (a multi-task model
    trained on one task): PyTorch's AdamW skips its parameters (their .grad
    stays None), so they must not decay either."""

    def __init__(self):
        super().__init__()
        self.aux = nn.Linear(32, 4)


class RobustMLP(nn.Module):
    """An L1 regressor with a clipped activation: abs, clamp and pow."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.head = nn.Linear(32, 1)

    def forward(self, x, y):
        h = torch.clamp(self.fc1(x), -0.5, 0.8)
        h = h + 0.5 * torch.abs(h) + 0.1 * h ** 3 + 0.05 * torch.pow(torch.exp(h), 1.5)
        return (self.head(h).squeeze(-1) - y).abs().mean()


class DropoutMLP(nn.Module):
    """nn.Dropout after each hidden layer (two streams, in forward order)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.fc2 = nn.Linear(32, 32)
        self.head = nn.Linear(32, 1)
        self.drop1 = nn.Dropout(0.25)
        self.drop2 = nn.Dropout(0.5)

    def forward(self, x, y):
        h = self.drop1(F.gelu(self.fc1(x)))
        h = self.drop2(torch.tanh(self.fc2(h))) + h
        return F.mse_loss(self.head(h).squeeze(-1), y)


class Logistic(nn.Module):
    """A binary classifier trained with BCE on logits."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.head = nn.Linear(16, 1)

    def forward(self, x, y):
        logits = self.head(torch.tanh(self.fc1(x))).squeeze(-1) * 4.0
        return F.binary_cross_entropy_with_logits(logits, y)


class MaskedHead(nn.Module):
    """Masks and index ops by hand: a leaky ReLU and a position mask by
    torch.where on comparisons (a mask from torch.arange), masked_fill, a per-row output
    picked by torch.gather with indices computed from the input, and a
    Huber loss whose two branches (and a bool-to-float weight) are where's
    and casts."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.head = nn.Linear(32, 4)

    def forward(self, x, y):
        h = self.fc1(x)
        h = torch.where(h > 0, h, 0.1 * h)
        h = torch.where(torch.arange(32) < 16, h, torch.tanh(h))
        h = h.masked_fill(h.abs() > 2.0, 2.0)
        out = self.head(h)
        pick = torch.where(y > 1.0, 3, torch.where(y > 0.0, 2, torch.where(y < -1.0, 0, 1)))
        picked = torch.gather(out, 1, pick.unsqueeze(-1)).squeeze(-1)
        err = picked - y
        huber = torch.where(err.abs() < 1.0, 0.5 * err * err, err.abs() - 0.5)
        weight = 1.0 + 0.5 * (err > 0).float()
        return (huber * weight).mean()


class Policy(nn.Module):
    """A policy-gradient objective (REINFORCE with an entropy bonus): the
    log-probabilities of F.log_softmax, the taken actions' picked by
    torch.gather and weighted by their advantages, the entropy from the same
    log-probabilities."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.head = nn.Linear(32, 6)

    def forward(self, x, actions, advantages):
        logp = F.log_softmax(self.head(torch.tanh(self.fc1(x))) * 3.0, dim=-1)
        taken = torch.gather(logp, 1, actions.unsqueeze(-1)).squeeze(-1)
        entropy = -(logp.exp() * logp).sum(-1)
        return -(taken * advantages).mean() - 0.01 * entropy.mean()


class Activations(nn.Module):
    """The activations and reductions PyTorch has as single ATen ops that
    stepc composes: softplus (two betas), logsigmoid, leaky ReLU, ELU, SELU,
    relu6/hardtanh, hardswish, mish, reciprocal, amin, cumsum, logsumexp, var/std, a
    hand-written LayerNorm on x.var(), F.normalize, and a KL divergence
    (xlogy) to a softmax of the targets."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.fc2 = nn.Linear(32, 32)
        self.head = nn.Linear(32, 4)
        self.gain = nn.Parameter(torch.ones(32))

    def forward(self, x, y):
        h = self.fc1(x)
        h = (F.softplus(h) + F.softplus(h, beta=2.0) + F.logsigmoid(h) + F.leaky_relu(h, 0.2)
             + F.elu(h) + F.selu(h) + F.relu6(h) + F.hardtanh(h) + F.hardswish(h) + F.mish(h)
             + torch.reciprocal(h.abs() + 1.0))
        mu = h.mean(-1, keepdim=True)
        h = (h - mu) / torch.sqrt(h.var(-1, unbiased=False, keepdim=True) + 1e-5) * self.gain
        h = self.fc2(h) + h.std(-1, keepdim=True) + h.amin(-1, keepdim=True)
        h = h + 0.1 * torch.cumsum(h, dim=-1)
        h = F.normalize(h, dim=-1) * 4.0
        out = self.head(h)
        lse = torch.logsumexp(out, dim=-1)
        kl = F.kl_div(F.log_softmax(out, -1), F.softmax(y, -1), reduction="batchmean")
        return kl + 0.1 * lse.mean()


class ViTBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.softmax(q @ k.transpose(-2, -1) * (1.0 / math.sqrt(c // self.heads)), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class ViT(nn.Module):
    """A Vision Transformer: a Conv2d patch embedding, a class token,
    learned positions, pre-norm blocks with bidirectional attention written
    out, and cross-entropy over the class token's logits."""

    def __init__(self, image=16, patch=4, dim=32, depth=2, heads=4, classes=10):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, 1 + (image // patch) ** 2, dim) * 0.02)
        self.blocks = nn.ModuleList([ViTBlock(dim, heads) for _ in range(depth)])
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, images, labels):
        x = self.patch(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for block in self.blocks:
            x = block(x)
        return F.cross_entropy(self.head(self.ln_f(x[:, 0])), labels)


class Detached(nn.Module):
    """Gradients stopped two ways: a straight-through estimator (the forward
    sees a squashed h, the backward the identity, through .detach()) and an
    advantage baseline computed under torch.no_grad() from a value head that
    its own loss still trains."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.policy = nn.Linear(32, 4)
        self.value = nn.Linear(32, 1)

    def forward(self, x, y):
        h = torch.tanh(self.fc1(x))
        q = h + (0.5 * torch.sigmoid(4.0 * h) - h).detach()
        logp = F.log_softmax(self.policy(q), -1)
        v = self.value(h).squeeze(-1)
        with torch.no_grad():
            baseline = v * 0.9
        return -(logp[:, 0] * (y - baseline)).mean() + F.mse_loss(v, y)


class Padded(nn.Module):
    """nn.Embedding(padding_idx=0) before a small MLP: the padding row must
    get no gradient (PyTorch keeps it at zero), however often 0 appears."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(96, 32, padding_idx=0)
        self.fc = nn.Linear(32, 32)
        self.head = nn.Linear(32, 96)

    def forward(self, idx, targets):
        h = F.gelu(self.fc(self.emb(idx)))
        return F.cross_entropy(self.head(h).view(-1, 96), targets.view(-1))


class MHADecoder(nn.Module):
    """nn.MultiheadAttention as people write it: batch_first or not, a
    causal float mask as a buffer and (key_padding) the padded keys of each
    row as a boolean mask; residuals by `+=` and ReLU(inplace=True), which
    PyTorch traces as in-place ops."""

    def __init__(self, batch_first=True, key_padding=False, seq=16):
        super().__init__()
        self.batch_first, self.key_padding = batch_first, key_padding
        self.emb = nn.Embedding(96, 32)
        self.pos = nn.Parameter(torch.randn(seq, 32) * 0.02)
        self.attn = nn.MultiheadAttention(32, 4, batch_first=batch_first)
        self.norm = nn.LayerNorm(32)
        self.fc = nn.Linear(32, 64)
        self.act = nn.ReLU(inplace=True)
        self.proj = nn.Linear(64, 32)
        self.head = nn.Linear(32, 96)
        self.register_buffer("causal", torch.triu(torch.full((seq, seq), float("-inf")), 1))

    def forward(self, idx, targets):
        x = self.emb(idx) + self.pos
        h = x if self.batch_first else x.transpose(0, 1)
        pad = (idx == 0) if self.key_padding else None
        a, _ = self.attn(h, h, h, attn_mask=self.causal, key_padding_mask=pad,
                         need_weights=False)
        x += a if self.batch_first else a.transpose(0, 1)
        x = x + self.proj(self.act(self.fc(self.norm(x))))
        return F.cross_entropy(self.head(x).view(-1, 96), targets.view(-1))


class MaskedSDPA(nn.Module):
    """A decoder on F.scaled_dot_product_attention (PyTorch 2.x) with a mask
    tensor: `padding` combines the causal mask with each row's padded keys
    (boolean, True = attend); `additive` passes a float block-diagonal mask
    for two packed sequences; `gqa` uses enable_gqa with 2 key/value heads."""

    def __init__(self, kind, seq=16):
        super().__init__()
        self.kind = kind
        self.emb = nn.Embedding(96, 32)
        self.q = nn.Linear(32, 32)
        self.kv = nn.Linear(32, 64 if kind != "gqa" else 32)
        self.proj = nn.Linear(32, 32)
        self.head = nn.Linear(32, 96)
        keep = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
        half = seq // 2
        block = torch.zeros(seq, seq, dtype=torch.bool)
        block[:half, :half] = block[half:, half:] = True
        self.register_buffer("keep", keep)
        self.register_buffer("block", torch.zeros(seq, seq).masked_fill(~(block & keep),
                                                                         float("-inf")))

    def forward(self, idx, targets):
        b, t = idx.shape
        x = self.emb(idx)
        q = self.q(x).view(b, t, 4, 8).transpose(1, 2)
        k, v = self.kv(x).split(self.kv.out_features // 2, dim=2)
        kv_heads = 4 if self.kind != "gqa" else 2
        k = k.reshape(b, t, kv_heads, 8).transpose(1, 2)
        v = v.reshape(b, t, kv_heads, 8).transpose(1, 2)
        if self.kind == "padding":
            mask = self.keep & (idx != 0)[:, None, None, :]
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        elif self.kind == "additive":
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.block)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, 32))
        return F.cross_entropy(self.head(x).view(-1, 96), targets.view(-1))


class ManualMasked(nn.Module):
    """Attention written out as nanoGPT's non-flash path does, with a mask
    beyond the causal one (PyTorch 1.13 traces it; no SDPA): `padding`
    hides each row's padded keys with masked_fill on the [B, H, T, T]
    scores; `alibi` adds a constant per-head linear bias (ALiBi's slopes)
    with the causal -inf in it; `learned` adds a trained per-head bias (T5's
    relative-position bias: its gradient is needed, so it stays op by op)."""

    def __init__(self, kind, seq=16):
        super().__init__()
        self.kind = kind
        self.emb = nn.Embedding(96, 32)
        self.qkv = nn.Linear(32, 96)
        self.proj = nn.Linear(32, 32)
        self.head = nn.Linear(32, 96)
        self.register_buffer("keep", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))
        slopes = torch.tensor([2.0 ** (-(h + 1)) for h in range(4)])
        distance = torch.arange(seq)[None, :] - torch.arange(seq)[:, None]
        alibi = slopes[:, None, None] * distance[None].float()
        self.register_buffer("alibi", alibi.masked_fill(~self.keep, float("-inf"))[None])
        if kind == "learned":
            self.rel = nn.Parameter(torch.randn(1, 4, seq, seq) * 0.1)

    def forward(self, idx, targets):
        b, t = idx.shape
        x = self.emb(idx)
        q, k, v = self.qkv(x).split(32, dim=2)
        q, k, v = (z.view(b, t, 4, 8).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(8))
        if self.kind == "padding":
            seen = self.keep[None, None] & (idx != 0)[:, None, None, :]
            att = att.masked_fill(~seen, float("-inf"))
        elif self.kind == "alibi":
            att = att + self.alibi
        elif self.kind == "alibi-alpha":  # the bias scaled by add's alpha
            att = torch.add(att, self.alibi, alpha=0.5)
        else:
            att = (att + self.rel).masked_fill(~self.keep, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, 32))
        return F.cross_entropy(self.head(x).view(-1, 96), targets.view(-1))


class MoEDecoder(nn.Module):
    """stepc.nn.MoE dropped into a PyTorch model (4 experts, top-2, GELU or
    SwiGLU experts) as a residual feed-forward after a norm; trained by
    torch.optim like any module, exported as stepc's MoE ops."""

    def __init__(self, activation, ties=False, capacity_factor=0.0):
        super().__init__()
        import stepc.nn
        torch.manual_seed(5)
        self.emb = nn.Embedding(96, 32)
        self.norm = nn.LayerNorm(32)
        self.moe = stepc.nn.MoE(32, 48, experts=4, top_k=2, activation=activation, init_std=0.2,
                                capacity_factor=capacity_factor)
        self.head = nn.Linear(32, 96)
        if ties:
            # Experts 2 and 3 route as 1 and 0 do: every token's
            # probabilities tie exactly in pairs (the lower index wins), and
            # as training moves the rows apart, nearly.
            with torch.no_grad():
                self.moe.router.weight[2].copy_(self.moe.router.weight[1])
                self.moe.router.weight[3].copy_(self.moe.router.weight[0])

    def forward(self, idx, targets):
        x = self.emb(idx)
        x = x + self.moe(self.norm(x))
        return F.cross_entropy(self.head(x).view(-1, 96), targets.view(-1))


class CellRNN(nn.Module):
    """A recurrence written as a loop over time steps of nn.LSTMCell or
    nn.GRUCell (what stepc's error for nn.LSTM suggests): traced into a
    static step of the cells' ops."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.emb = nn.Embedding(96, 16)
        self.cell = nn.LSTMCell(16, 16) if kind == "lstm" else nn.GRUCell(16, 16)
        self.head = nn.Linear(16, 96)

    def forward(self, idx, targets):
        x = self.emb(idx)
        h = torch.zeros(x.shape[0], 16)
        c = torch.zeros(x.shape[0], 16)
        outs = []
        for t in range(x.shape[1]):
            if self.kind == "lstm":
                h, c = self.cell(x[:, t], (h, c))
            else:
                h = self.cell(x[:, t], h)
            outs.append(h)
        y = torch.stack(outs, dim=1)
        return F.cross_entropy(self.head(y).view(-1, 96), targets.view(-1))


def padded_tokens(g, steps):
    """Batches whose rows end in a run of padding (id 0) of random length."""
    batches = []
    for _ in range(steps):
        tokens = torch.randint(1, 96, (4, 16), generator=g)
        for row, length in enumerate(torch.randint(4, 17, (4,), generator=g).tolist()):
            tokens[row, length:] = 0
        batches.append((tokens, torch.randint(0, 96, (4, 16), generator=g)))
    return batches


def make(name, steps):
    g = torch.Generator().manual_seed(1)
    if name in ("gpt", "gpt-flash"):
        # gpt-flash: scaled_dot_product_attention where PyTorch has it (2.x).
        model = GPT(GPTConfig(vocab_size=96, block_size=16, n_layer=2, n_head=4, n_embd=32,
                              flash=name == "gpt-flash"))
        batches = [(torch.randint(0, 96, (4, 16), generator=g),
                    torch.randint(0, 96, (4, 16), generator=g)) for _ in range(steps)]
    elif name in ("llama", "lora"):
        model = Llama() if name == "llama" else lora_llama()
        batches = [(torch.randint(0, 96, (4, 16), generator=g),
                    torch.randint(0, 96, (4, 16), generator=g)) for _ in range(steps)]
    elif name in ("padded", "mha", "mha-seq-first", "mha-key-padding", "sdpa-padding",
                  "sdpa-additive", "sdpa-gqa", "lstm-cell", "gru-cell", "manual-padding",
                  "manual-alibi", "manual-alibi-alpha", "manual-learned", "moe-gelu",
                  "moe-swiglu", "moe-ties", "moe-capacity"):
        model = {"padded": Padded, "mha": MHADecoder,
                 "mha-seq-first": lambda: MHADecoder(batch_first=False),
                 "mha-key-padding": lambda: MHADecoder(key_padding=True),
                 "sdpa-padding": lambda: MaskedSDPA("padding"),
                 "sdpa-additive": lambda: MaskedSDPA("additive"),
                 "sdpa-gqa": lambda: MaskedSDPA("gqa"),
                 "lstm-cell": lambda: CellRNN("lstm"), "gru-cell": lambda: CellRNN("gru"),
                 "manual-padding": lambda: ManualMasked("padding"),
                 "manual-alibi": lambda: ManualMasked("alibi"),
                 "manual-alibi-alpha": lambda: ManualMasked("alibi-alpha"),
                 "manual-learned": lambda: ManualMasked("learned"),
                 "moe-gelu": lambda: MoEDecoder("gelu"),
                 "moe-swiglu": lambda: MoEDecoder("swiglu"),
                 "moe-ties": lambda: MoEDecoder("gelu", ties=True),
                 "moe-capacity": lambda: MoEDecoder("swiglu", capacity_factor=0.75)}[name]()
        batches = padded_tokens(g, steps)
    elif name == "sft":
        # Supervised fine-tuning: each row's prompt (a random length) has
        # target -100, F.cross_entropy's default ignore_index; label smoothing.
        model = Llama(label_smoothing=0.1)
        batches = []
        for _ in range(steps):
            tokens = torch.randint(0, 96, (4, 16), generator=g)
            targets = torch.randint(0, 96, (4, 16), generator=g)
            for row, prompt in enumerate(torch.randint(0, 15, (4,), generator=g).tolist()):
                targets[row, :prompt] = -100
            batches.append((tokens, targets))
    elif name in ("mlp", "robust", "dropout", "masked", "unused"):
        model = {"mlp": MLP, "robust": RobustMLP, "dropout": DropoutMLP,
                 "masked": MaskedHead, "unused": UnusedHead}[name]()
        batches = [(torch.randn(64, 8, generator=g), torch.randn(64, generator=g))
                   for _ in range(steps)]
    elif name == "logistic":
        model = Logistic()
        batches = [(torch.randn(64, 8, generator=g),
                    torch.randint(0, 2, (64,), generator=g).float()) for _ in range(steps)]
    elif name == "activations":
        model = Activations()
        batches = [(torch.randn(64, 8, generator=g), torch.randn(64, 4, generator=g))
                   for _ in range(steps)]
    elif name == "vit":
        model = ViT()
        batches = [(torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g))
                   for _ in range(steps)]
    elif name == "detached":
        model = Detached()
        batches = [(torch.randn(64, 8, generator=g), torch.randn(64, generator=g))
                   for _ in range(steps)]
    elif name == "policy":
        model = Policy()
        batches = [(torch.randn(64, 8, generator=g), torch.randint(0, 6, (64,), generator=g),
                    torch.randn(64, generator=g)) for _ in range(steps)]
    else:
        raise ValueError(name)
    return model, batches
