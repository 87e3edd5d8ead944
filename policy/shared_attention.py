"""Attention for a batch whose rows begin with the same tokens (the system prompt), on a CPU.

The transformers engine samples a batch of chats from one cached system prompt, so every row of
its KV cache holds the same keys and values for the first `tokens` positions. At a decode step
SDPA reads those keys again for every row and every query head, and that reading was half of a
token's time here (4 rows of ~1,700 positions, 1,350 of them the system prompt). This attention
splits the keys in two:

- the shared head: row 0's keys (transposed once per generate call) and values, one matrix product
  for every row and every query head of the group; no mask, since padding lies after the head;
- the rest, row by row, under the mask the model built;

and takes one softmax over both, so its result is SDPA's to float error (tested).

Prompts (several query positions after the head) take plain matrix products in the model's dtype
with the mask added, over the cache's filled part only, a row and a block of queries at a time so
that the scores stay in cache. SDPA's CPU kernel computes in float32, far below the bfloat16 matrix
product's speed: it was 60% of a prompt's time here, and this takes half as long at the demo's
shapes. In float32 both give the same numbers to float error (tested); in bfloat16 these scores are
rounded as the model's are.

Registered with transformers as "shared_prefix"; outside a `shared_prefix(tokens)` block it is
plain SDPA.
"""

from __future__ import annotations

import contextlib
import threading

NAME = "shared_prefix"
SCORES_PER_BLOCK = 4 << 20  # a prompt's attention scores computed at once (8 MB in bfloat16)


class _State(threading.local):
    tokens = 0  # positions every row of the KV cache holds alike, from the start (0 = none)
    head: dict = {}  # layer -> (its head's keys transposed, its head's values), for this block
    prompt_mask: tuple = ()  # (the model's mask, its filled length, it as an additive bias), for this forward


STATE = _State()


@contextlib.contextmanager
def shared_prefix(tokens: int):
    """Within: this thread's decode steps treat the first `tokens` cached positions as shared."""
    saved = STATE.tokens, STATE.head, STATE.prompt_mask
    STATE.tokens, STATE.head, STATE.prompt_mask = tokens, {}, ()
    try:
        yield
    finally:
        STATE.tokens, STATE.head, STATE.prompt_mask = saved


def shared_prefix_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                            is_causal=None, **kwargs):
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    h = STATE.tokens
    b, heads, q, d = query.shape
    if not h or dropout or key.shape[2] <= h or attention_mask is None or (q == 1 and b == 1):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    kv_heads = key.shape[1]
    g = heads // kv_heads  # query heads per key head: query head i reads key head i // g
    scaling = scaling if scaling is not None else d ** -0.5
    if q > 1:
        return prompt_attention(query, key, value, attention_mask, g, scaling)
    layer = getattr(module, "layer_idx", id(module))
    if layer not in STATE.head:
        STATE.head[layer] = (key[0, :, :h].transpose(-1, -2).contiguous(), value[0, :, :h].contiguous())
    head_keys, head_values = STATE.head[layer]
    grouped = query.reshape(b, kv_heads, g, d)
    # The head, every row at once: (kv_heads, b·g, d) @ (kv_heads, d, h).
    across = grouped.transpose(0, 1).reshape(kv_heads, b * g, d)
    head_scores = torch.matmul(across, head_keys).float().reshape(kv_heads, b, g, h).transpose(0, 1)
    # The rest, row by row, where the mask allows.
    rest_scores = torch.matmul(grouped.float(), key[:, :, h:].float().transpose(-1, -2))  # (b, kv, g, rest)
    allowed = attention_mask[:, :, :, h:] if attention_mask.dtype == torch.bool else attention_mask[:, :, :, h:] == 0
    rest_scores = rest_scores.masked_fill(~allowed, float("-inf"))  # (b, 1, 1, rest): the same for every head
    weights = torch.softmax(torch.cat([head_scores, rest_scores], -1) * scaling, -1)
    out = torch.matmul(weights[..., h:].to(value.dtype), value[:, :, h:])  # (b, kv, g, d)
    shared = torch.matmul(weights[..., :h].transpose(0, 1).reshape(kv_heads, b * g, h).to(value.dtype), head_values)
    out = out + shared.reshape(kv_heads, b, g, d).transpose(0, 1)
    return out.reshape(b, 1, heads, d), None  # (b, q, heads, d), as transformers' attention functions return it


def prompt_attention(query, key, value, attention_mask, g: int, scaling: float):
    """A prompt's attention as matrix products (scores, plus the mask as a bias, softmax, values), a
    row and a block of queries at a time so that each block's scores stay in the CPU's cache."""
    import torch

    b, heads, q, d = query.shape
    if not STATE.prompt_mask or STATE.prompt_mask[0] is not attention_mask:  # once per forward: layers share it
        allowed = attention_mask if attention_mask.dtype == torch.bool else attention_mask == 0
        filled = int(allowed.any(0).any(0).any(0).nonzero().max()) + 1  # a static cache's tail is empty
        bias = torch.zeros(allowed[..., :filled].shape, dtype=query.dtype, device=query.device)
        bias = bias.masked_fill_(~allowed[..., :filled], float("-inf")).unsqueeze(2)  # (b, 1, 1, q, filled)
        STATE.prompt_mask = (attention_mask, filled, bias)
    _, filled, bias = STATE.prompt_mask
    kv_heads = key.shape[1]
    grouped = (query * scaling).reshape(b, kv_heads, g, q, d)
    out = torch.empty_like(grouped)
    block = max(1, SCORES_PER_BLOCK // (heads * filled))
    for row in range(b):
        keys, values = key[row, :, :filled].transpose(-1, -2), value[row, :, :filled]
        for i in range(0, q, block):
            n = min(block, q - i)
            # A key head's g query heads as the rows of one product: broadcasting the keys over them
            # copied the keys g times (15.6 -> 13.3 ms a layer for the demo's 4 prompts here).
            scores = torch.matmul(grouped[row, :, :, i:i + n].reshape(kv_heads, g * n, d), keys)
            weights = torch.softmax(scores.view(kv_heads, g, n, filled).add_(bias[row, :, :, i:i + n]), -1)
            out[row, :, :, i:i + n] = torch.matmul(weights.view(kv_heads, g * n, filled), values).view(
                kv_heads, g, n, d)
    return out.reshape(b, heads, q, d).transpose(1, 2), None


def register() -> str:
    """Register the attention (with SDPA's mask) with transformers; returns its name."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(NAME, shared_prefix_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME
