"""Sentence embeddings from an encoder: pooling over tokens and :func:`embed`.

:func:`embed` turns sentences into sentence embeddings the way the checkpoint's own
``1_Pooling`` / ``modules.json`` say (MiniLM: mean over real tokens, then L2 normalisation),
sorting by length so that batches carry almost no padding, and running each batch through
:meth:`attnlab.models.bert.BertEncoder.encode_packed` (no padding token in any projection or FFN).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.models.bert import BertEncoder, fused_qkv


def pool(hidden: Tensor, mask: Tensor | None, how: str) -> Tensor:
    """Sentence vector from token vectors ``hidden [B, T, d]`` over real tokens ``mask [B, T]``:
    mean = sum_t m_t x_t / sum_t m_t; mean_sqrt_len = sum_t m_t x_t / sqrt(sum_t m_t);
    max = max over real t; cls = x_0. Returns ``[B, d]``."""
    if how == "cls":
        return hidden[:, 0]  # [B, d]
    if mask is None:
        if how == "max":
            return hidden.amax(dim=1)
        total, count = hidden.sum(dim=1), float(hidden.shape[1])  # [B, d]
    else:
        m = mask.to(hidden.dtype).unsqueeze(-1)  # [B, T, 1]
        if how == "max":
            return hidden.masked_fill(m == 0, float("-inf")).amax(dim=1)  # [B, d]
        total, count = (hidden * m).sum(dim=1), m.sum(dim=1)  # [B, d], [B, 1]
    return total / (count if how == "mean" else count**0.5)


def pool_packed(hidden: Tensor, lengths: Sequence[int], how: str) -> Tensor:
    """:func:`pool` for packed token vectors ``hidden [N_tok, d]`` of sentences of ``lengths``: ``[b, d]``."""
    parts = hidden.split(list(lengths))  # b tensors [L_i, d]
    if how == "cls":
        return torch.stack([p[0] for p in parts])  # [b, d]
    if how == "max":
        return torch.stack([p.amax(dim=0) for p in parts])  # [b, d]
    lens = torch.tensor(list(lengths), device=hidden.device, dtype=hidden.dtype)[:, None]  # [b, 1]
    sentence = torch.repeat_interleave(torch.arange(len(parts), device=hidden.device), lens[:, 0].long())
    total = hidden.new_zeros(len(parts), hidden.shape[1]).index_add_(0, sentence, hidden)  # [b, d]
    return total / (lens if how == "mean" else lens.sqrt())


def embed(model: BertEncoder, tokenizer, sentences: Sequence[str], batch_size: int = 32) -> Tensor:
    """Sentence embeddings ``[N, d_model]`` (float32, on the model's device), row i for sentence i.

    Tokenise all sentences (Rust, in parallel), sort them by length (longest first), and run
    each batch of ``batch_size`` sentences packed (:meth:`BertEncoder.encode_packed`): no
    padding token goes through a projection or the FFN, and the sorting keeps the attention's
    padded grid nearly full. Under ``torch.inference_mode``, the fused SDPA kernel gets a
    key-padding mask only when a batch has padding. Pool as the checkpoint says
    (``model.config.pooling``; MiniLM: the mean over real tokens), L2-normalise if
    ``model.config.normalize``, and put every row back in the caller's order.
    """
    if isinstance(sentences, str):
        raise ValueError("sentences must be a list of strings, not one string")
    sentences = list(sentences)
    if not all(isinstance(s, str) for s in sentences):
        raise ValueError("sentences must all be strings")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    c = model.config
    device = next(model.parameters()).device
    out = torch.empty(len(sentences), c.d_model, device=device)  # [N, d]
    if not sentences:
        return out
    encodings = tokenizer.encode_batch(sentences)
    padded = tokenizer.padding is not None
    ids = [e.ids[: sum(e.attention_mask)] if padded else e.ids for e in encodings]
    types = [e.type_ids[: len(i)] for e, i in zip(encodings, ids)]
    limit = c.max_seq_length or c.max_len
    longest = max(range(len(ids)), key=lambda i: len(ids[i]))
    if len(ids[longest]) > c.max_len:
        raise ValueError(
            f"sentence {longest} has {len(ids[longest])} tokens, more than the model's "
            f"{c.max_len} positions; enable truncation to {limit} on the tokenizer"
        )
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # longest first
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            qkv = [fused_qkv(layer.self_attn) for layer in model.layers]  # per layer [3d, d], [3d]
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                lengths = [len(ids[i]) for i in rows]
                flat = torch.tensor(list(chain.from_iterable(ids[i] for i in rows)), device=device)  # [N_tok]
                segs = None
                if any(any(types[i]) for i in rows):
                    segs = torch.tensor(list(chain.from_iterable(types[i] for i in rows)), device=device)
                hidden = model.encode_packed(flat, lengths, segs, qkv)  # [N_tok, d]
                vec = pool_packed(hidden, lengths, c.pooling)  # [b, d]
                if c.normalize:
                    vec = F.normalize(vec, p=2.0, dim=-1)
                out[torch.tensor(rows, device=device)] = vec.float()
    finally:
        model.train(was_training)
    return out
