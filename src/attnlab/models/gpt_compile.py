"""``torch.compile`` for the decode engine's one-token step (optional: ``DecodeEngine(compile=True)``).

The step is compiled with static shapes, so that one graph serves every position of a generation:
each layer writes its new key and value into slot ``pos`` of the whole
:class:`~attnlab.nn.StaticKVCache` buffer ``[B, h_kv, capacity, d_k]`` (``index_copy_`` at a
position *tensor*), and the query attends over the whole buffer with the mask ``j <= pos``. The
graph is the blocks, the final norm and the head (:func:`~attnlab.models.gpt_decode.run_blocks`,
the eager step's code); the embedding lookup and the RoPE angles, which index by a Python
position, run eagerly before it. Inductor fuses each norm, residual add, activation and RoPE into
one loop and calls the same BLAS GEMVs on the engine's ``W^T`` copies, so what it saves is the
Python and dispatch between ~10 kernels per block. The first call compiles (its seconds are
``DecodeEngine.compile_seconds``; Inductor caches the generated code on disk, so a later process
compiles faster); a new batch size or capacity compiles again.
"""

from __future__ import annotations

import time

import torch
from torch import Tensor

from attnlab._compile import compiled
from attnlab.models.gpt_step import forward_step, head_logits, run_blocks
from attnlab.nn.static_cache import StaticKVCache


class _Slots:
    """A cache view for the compiled step: ``append`` writes slot ``pos [1]`` of the buffers
    ``k, v [B, h_kv, capacity, d]`` and returns the whole buffers (the mask hides empty slots)."""

    def __init__(self, k: Tensor, v: Tensor, pos: Tensor):
        self.k, self.v, self.pos = k, v, pos

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        self.k.index_copy_(2, self.pos, k)  # [B, h_kv, 1, d] into slot pos
        self.v.index_copy_(2, self.pos, v)
        return self.k, self.v


def _graph(x: Tensor, pos: Tensor, ks: list, vs: list, rope, prepared: tuple, layout: str) -> Tensor:
    """``x [B, d]`` (position ``pos [1]``'s embedding) -> logits ``[B, V]``; writes slot pos."""
    blocks, head, final_norm = prepared
    mask = torch.arange(ks[0].shape[2], device=x.device)[None] <= pos[:, None]  # [1, capacity]: filled
    caches = [_Slots(k, v, pos) for k, v in zip(ks, vs)]
    x = run_blocks(x, x.shape[0], 1, blocks, caches, rope, layout, mask)  # [B, d]
    return head_logits(x, head, final_norm)  # [B, V]


_compiled = None


def compiled_step(engine, ids: Tensor, state, prepared: tuple, rope) -> Tensor:
    """One token ``ids [B, 1]`` through the compiled graph (a prompt, or a cache that would
    overflow, through the eager step): logits ``[B, V]``; updates ``state``."""
    caches = state.caches
    room = all(isinstance(c, StaticKVCache) and c._k is not None and c.filled < c.capacity for c in caches)
    if ids.shape[1] != 1 or not room:
        return forward_step(engine.gpt, ids, state, prepared, rope)
    global _compiled
    if _compiled is None:
        _compiled = compiled(_graph, dynamic=False)
    x = engine.gpt._hidden_in(ids, state.length)[:, 0]  # [B, d]
    pos = torch.tensor([state.length], device=x.device)  # [1]
    ks, vs = [c._k for c in caches], [c._v for c in caches]
    t0 = time.perf_counter()
    logits = _compiled(x, pos, ks, vs, rope, prepared, engine.gpt.config.rope_layout)
    if engine.compile_seconds is None:
        engine.compile_seconds = time.perf_counter() - t0  # the first call: tracing and compiling
    for c in caches:
        c.filled += 1
    state.length += 1
    return logits
