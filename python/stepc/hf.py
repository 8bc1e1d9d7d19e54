"""Name maps between the state_dicts stepc trains (nanoGPT's and Meta's
module layouts) and Hugging Face's, so a model trained here loads into
`GPT2LMHeadModel` / `LlamaForCausalLM` with strict=True and back. Arrays or
torch tensors; nothing here imports torch or transformers.

- GPT-2: the names are the same; HF's attention and MLP projections are
  `Conv1D`, whose weights are the transpose of `nn.Linear`'s; nanoGPT's
  causal-mask buffers (`attn.bias`) have no HF counterpart.
- Llama: Meta's names (`layers.N.attention.wq.weight`, ...) map to HF's
  (`model.layers.N.self_attn.q_proj.weight`, ...); HF applies rotary
  embeddings to the two halves of a head (rotate_half) where Meta rotates
  adjacent pairs, so wq and wk rows are permuted within each head.
"""

import re

_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def _t(x):
    """The transpose of a matrix, contiguous (torch tensor or NumPy array)."""
    return x.T.contiguous() if hasattr(x, "contiguous") else x.T.copy()


def gpt2_to_hf(state_dict):
    """nanoGPT's GPT state_dict -> GPT2LMHeadModel's."""
    out = {}
    for name, value in state_dict.items():
        if re.search(r"\.attn\.bias$", name) and getattr(value, "ndim", 0) == 4:
            continue  # nanoGPT's causal mask buffer
        out[name] = _t(value) if name.endswith(_CONV1D) else value
    return out


def gpt2_from_hf(state_dict):
    """GPT2LMHeadModel's state_dict -> nanoGPT's (without its mask buffers)."""
    out = {}
    for name, value in state_dict.items():
        if name.endswith(("attn.masked_bias", "attn.bias")) and getattr(value, "ndim", 0) != 1:
            continue
        out[name] = _t(value) if name.endswith(_CONV1D) else value
    return out


_LLAMA = [  # (Meta, HF) per layer
    ("attention.wq.weight", "self_attn.q_proj.weight"),
    ("attention.wk.weight", "self_attn.k_proj.weight"),
    ("attention.wv.weight", "self_attn.v_proj.weight"),
    ("attention.wo.weight", "self_attn.o_proj.weight"),
    ("feed_forward.w1.weight", "mlp.gate_proj.weight"),
    ("feed_forward.w3.weight", "mlp.up_proj.weight"),
    ("feed_forward.w2.weight", "mlp.down_proj.weight"),
    ("attention_norm.weight", "input_layernorm.weight"),
    ("ffn_norm.weight", "post_attention_layernorm.weight"),
]
_LLAMA_TOP = [("tok_embeddings.weight", "model.embed_tokens.weight"),
              ("norm.weight", "model.norm.weight"), ("output.weight", "lm_head.weight")]


def _permute_rows(w, heads, to_hf):
    """Rows of each head from pair order (2i, 2i+1) to half order (i, i+D/2)
    (to_hf), or back."""
    rows, cols = w.shape
    d = rows // heads
    split = (heads, d // 2, 2, cols) if to_hf else (heads, 2, d // 2, cols)
    return w.reshape(split).swapaxes(1, 2).reshape(rows, cols)


def llama_to_hf(state_dict, heads, kv_heads=None):
    """A Meta-layout Llama state_dict -> LlamaForCausalLM's."""
    kv_heads = kv_heads or heads
    out = {}
    for name, value in state_dict.items():
        m = re.match(r"layers\.(\d+)\.(.*)$", name)
        if m:
            hf = dict(_LLAMA).get(m.group(2))
            if hf is None:
                raise KeyError(f"no Hugging Face name for '{name}'")
            if m.group(2) == "attention.wq.weight":
                value = _permute_rows(value, heads, True)
            elif m.group(2) == "attention.wk.weight":
                value = _permute_rows(value, kv_heads, True)
            out[f"model.layers.{m.group(1)}.{hf}"] = value
        elif name in dict(_LLAMA_TOP):
            out[dict(_LLAMA_TOP)[name]] = value
        else:
            raise KeyError(f"no Hugging Face name for '{name}'")
    return out


def llama_from_hf(state_dict, heads, kv_heads=None):
    """LlamaForCausalLM's state_dict -> the Meta layout."""
    kv_heads = kv_heads or heads
    layer = {hf: meta for meta, hf in _LLAMA}
    top = {hf: meta for meta, hf in _LLAMA_TOP}
    out = {}
    for name, value in state_dict.items():
        m = re.match(r"model\.layers\.(\d+)\.(.*)$", name)
        if m:
            meta = layer.get(m.group(2))
            if meta is None:
                if m.group(2).endswith("rotary_emb.inv_freq"):
                    continue  # a buffer older versions keep
                raise KeyError(f"no Meta name for '{name}'")
            if meta == "attention.wq.weight":
                value = _permute_rows(value, heads, False)
            elif meta == "attention.wk.weight":
                value = _permute_rows(value, kv_heads, False)
            out[f"layers.{m.group(1)}.{meta}"] = value
        elif name in top:
            out[top[name]] = value
        else:
            raise KeyError(f"no Meta name for '{name}'")
    return out
