"""One decoding step of a GPT, eager (the decode engine's, :mod:`attnlab.models.gpt_decode`, and
the fallback of its compiled step, :mod:`attnlab.models.gpt_compile`): the blocks on a flattened
residual stream, appending each block's new keys and values to its cache, then the head.

A block (``blk``) is the engine's prepared ``_Block``: ``heads (h, h_kv, d_k)``, ``qkv``, ``out``,
``norm1``, ``norm2``, ``ffn_in``, ``ffn_out`` and ``glu`` callables.
"""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor

from attnlab.nn.positions import apply_rope


def _attend(blk, x: Tensor, b: int, t: int, cache, rope, layout: str, mask) -> Tensor:
    """Self-attention of ``x [B T, d]`` (normed) for one block -> ``[B T, h d_k]`` before W^O.
    ``mask [1, T_k]`` (bool, True = may attend) or None: every key, causal among the new positions."""
    h, h_kv, d_k = blk.heads
    qkv = blk.qkv(x)  # [B T, (h + 2 h_kv) d_k]
    if qkv.dtype != x.dtype:  # bfloat16 GEMM: attention and the cache stay in the stream's dtype
        qkv = qkv.to(x.dtype)
    q, k, v = qkv.split([h * d_k, h_kv * d_k, h_kv * d_k], dim=-1)
    if t == 1:  # one position: [B, 1, h, d_k] and [B, h, 1, d_k] are the same view, no transpose
        q, k, v = q.view(b, h, 1, d_k), k.view(b, h_kv, 1, d_k), v.view(b, h_kv, 1, d_k)
    else:
        q = q.view(b, t, h, d_k).transpose(1, 2)  # [B, h, T, d_k]
        k = k.view(b, t, h_kv, d_k).transpose(1, 2)  # [B, h_kv, T, d_k]
        v = v.view(b, t, h_kv, d_k).transpose(1, 2)  # [B, h_kv, T, d_k]
    if rope is not None:
        q, k = apply_rope(q, *rope, layout), apply_rope(k, *rope, layout)
    k, v = cache.append(k, v)  # [B, h_kv, T_k, d_k]
    # one query at the end reads every key; a prompt fills empty caches, where PyTorch's upper-left
    # causal mask is the lower-right one
    causal = t > 1 and mask is None
    z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=h != h_kv)
    if t == 1:
        return z.reshape(b, h * d_k)  # [B, h, 1, d_k] -> [B, h d_k]
    return z.transpose(1, 2).reshape(b * t, h * d_k)  # [B, h, T, d_k] -> [B T, h d_k]


def run_blocks(x: Tensor, b: int, t: int, blocks: list, caches, rope, layout: str, mask=None):
    """The blocks on the residual stream ``x [B T, d]`` -> ``[B T, d]``, appending each block's new
    keys and values to its cache (anything with :meth:`KVCache.append`)."""
    for blk, cache in zip(blocks, caches):
        x = x + blk.out(_attend(blk, blk.norm1(x), b, t, cache, rope, layout, mask))  # [B T, d]
        if blk.ffn_in is not None:
            u = blk.ffn_in(blk.norm2(x))  # [B T, d_ff] (GLU: [B T, 2 d_ff])
            if blk.glu is not None:
                gate, lin = u.chunk(2, dim=-1)  # [B T, d_ff] each
                u = blk.glu(gate) * lin
            x = x + blk.ffn_out(u)  # [B T, d]
    return x


def head_logits(x: Tensor, head: Callable, final_norm: Callable) -> Tensor:
    """``logits = N_f(x) W_out``: ``x [B, d] -> [B, V]`` in ``x``'s dtype."""
    logits = head(final_norm(x))  # [B, V]
    return logits if logits.dtype == x.dtype else logits.to(x.dtype)


def forward_step(gpt, ids: Tensor, state, prepared: tuple, rope) -> Tensor:
    """The step itself (eager): ``ids [B, T]`` -> logits ``[B, V]`` of the last position; updates
    ``state.caches`` (appends) and ``state.length``. ``prepared``: :meth:`DecodeEngine.blocks`."""
    blocks, head, final_norm = prepared
    b, t = ids.shape
    x = gpt._hidden_in(ids, state.length)  # [B, T, d]
    d = x.shape[-1]
    x = run_blocks(x.reshape(b * t, d), b, t, blocks, state.caches, rope, gpt.config.rope_layout)
    state.length += t
    return head_logits(x.view(b, t, d)[:, -1], head, final_norm)  # [B, V] from the last position
