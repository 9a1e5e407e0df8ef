"""Attention as score -> softmax -> weighted sum: scaled dot-product, additive (Bahdanau) and
Luong (dot / general / concat).

Shapes follow the notes' row convention: ``Q [..., T_q, d_k]``, ``K [..., T_k, d_k]``,
``V [..., T_k, d_v]``, weights ``A [..., T_q, T_k]`` (each row sums to one over the keys) and
output ``Z = A V [..., T_q, d_v]``.
"""

from __future__ import annotations

import math

import numpy as np

from attnlab.ref._checks import as_float, as_mask, check_additive, check_attention, check_luong, check_scores
from attnlab.ref.masks import check_rows
from attnlab.ref.softmax import softmax


def masked_softmax(scores: np.ndarray, mask=None, *, empty_rows: str = "error") -> np.ndarray:
    """alpha = softmax(scores + M) over the last axis, M = -inf where ``mask`` is False.

    Args:
        scores: logits ``[..., T_q, T_k]``.
        mask: bool, broadcastable to ``scores`` (True = may attend), or None.
        empty_rows: a row with every key masked raises (``"error"``) or gives zeros (``"zero"``).
    Returns:
        weights ``[..., T_q, T_k]``; rows sum to 1 (or are all 0 for empty rows with ``"zero"``).
    """
    scores = as_float("scores", scores, min_ndim=1)  # integer scores would be cast back: weights 0
    if mask is None:
        return softmax(scores, axis=-1)
    m = as_mask("mask", mask, scores.shape)
    empty = check_rows(m, empty_rows)
    filled = np.where(m, scores, -np.inf)
    filled = np.where(empty[..., None], 0.0, filled)  # keep empty rows finite
    row_max = filled.max(axis=-1, keepdims=True)
    e = np.where(m, np.exp(filled - row_max), 0.0)
    denom = e.sum(axis=-1, keepdims=True)
    return np.where(empty[..., None], 0.0, e / np.where(denom == 0, 1.0, denom)).astype(scores.dtype)


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, bias=None, empty_rows: str = "error"):
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V.

    In the Week 19 course page's einsum form, with heads ``[B, h, T, d_k]``:
    ``scores = einsum('bhqd,bhkd->bhqk', Q, K) / sqrt(d_k)``, ``weights = softmax(scores + M)``,
    ``out = einsum('bhqk,bhkd->bhqd', weights, V)`` (docs/reference.md checks the two forms agree).

    Args:
        q: queries ``[..., T_q, d_k]``.
        k: keys ``[..., T_k, d_k]`` (leading dims broadcast with ``q``).
        v: values ``[..., T_k, d_v]`` (``d_v`` may differ from ``d_k``).
        mask: bool broadcastable to ``[..., T_q, T_k]``, True = may attend; None = all keys.
        scale: multiplier of the scores; default ``1 / sqrt(d_k)``.
        bias: optional float additive term broadcastable to the scores (ALiBi).
        empty_rows: ``"error"`` (default) raises ``ValueError`` for a query row with no key left;
            ``"zero"`` returns zeros for it, PyTorch's convention. Never NaN.
    Returns:
        ``(out, weights)``: ``out [..., T_q, d_v]``, ``weights [..., T_q, T_k]``.
    """
    q, k, v, scale, bias = check_attention(q, k, v, scale, bias, empty_rows)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale  # 1 / sqrt(d_k)
    scores = _scores(q, k, scale)  # [..., T_q, T_k]
    if bias is not None:
        scores = scores + bias  # ALiBi
    weights = masked_softmax(scores, mask, empty_rows=empty_rows)  # [..., T_q, T_k]
    out = weights @ v  # [..., T_q, d_v]
    return out, weights


def _scores(q: np.ndarray, k: np.ndarray, scale: float) -> np.ndarray:
    """S = Q K^T * scale, ``q [..., T_q, d_k]``, ``k [..., T_k, d_k]`` -> ``[..., T_q, T_k]``; finite
    ``q`` and ``k`` whose products overflow are a ``ValueError``, not an inf."""
    with np.errstate(over="ignore", invalid="ignore"):
        return check_scores((q @ np.swapaxes(k, -1, -2)) * scale, q, k)


def additive_attention(s_prev, h, W_a, U_a, v_a, mask=None):
    """Bahdanau (additive) attention.

    e_ti = v_a^T tanh(W_a s_{t-1} + U_a h_i),  alpha_ti = softmax_i(e_ti),  c_t = sum_i alpha_ti h_i.
    In the row convention ``W_a s_{t-1}`` is ``s_prev @ W_a`` and ``U_a h_i`` is ``h @ U_a``.

    Args:
        s_prev: previous decoder states ``[..., T_tgt, d_s]``.
        h: encoder annotations ``[..., T_src, d_h]``.
        W_a: ``[d_s, d_a]``. U_a: ``[d_h, d_a]``. v_a: ``[d_a]``.
        mask: bool broadcastable to ``[..., T_tgt, T_src]`` (True = source position is real).
    Returns:
        ``(scores, weights, context)``: scores and weights ``[..., T_tgt, T_src]`` (the alignment
        matrix; each row sums to one over source positions), context ``[..., T_tgt, d_h]``.
    """
    s_prev, h, W_a, U_a, v_a = check_additive(s_prev, h, W_a, U_a, v_a)
    proj_s = (s_prev @ W_a)[..., :, None, :]  # [..., T_tgt, 1, d_a]
    proj_h = (h @ U_a)[..., None, :, :]  # [..., 1, T_src, d_a]
    scores = np.tanh(proj_s + proj_h) @ v_a  # [..., T_tgt, T_src]
    weights = masked_softmax(scores, mask)  # [..., T_tgt, T_src]
    return scores, weights, weights @ h  # context [..., T_tgt, d_h]


def luong_attention(s, h, kind: str = "dot", W=None, v=None, mask=None):
    """Luong (multiplicative) attention with the current decoder state ``s_t``.

    score(s_t, h_i) = s_t^T h_i                      (``"dot"``, needs d_s == d_h)
                    = s_t^T W_a h_i                  (``"general"``, row form ``s @ W @ h^T``)
                    = v_a^T tanh(W_a [s_t; h_i])     (``"concat"``)
    then alpha_ti = softmax_i(score) and c_t = sum_i alpha_ti h_i.

    Args:
        s: decoder states ``[..., T_tgt, d_s]``. h: encoder states ``[..., T_src, d_h]``.
        kind: ``"dot"``, ``"general"`` or ``"concat"``.
        W: ``[d_s, d_h]`` for general; ``[d_s + d_h, d_a]`` for concat.
        v: ``[d_a]`` for concat.
        mask: bool broadcastable to ``[..., T_tgt, T_src]``.
    Returns:
        ``(scores, weights, context)`` with shapes ``[..., T_tgt, T_src]`` x2 and ``[..., T_tgt, d_h]``.
    """
    s, h, W, v = check_luong(s, h, kind, W, v)
    if kind == "dot":
        scores = s @ np.swapaxes(h, -1, -2)  # [..., T_tgt, T_src]
    elif kind == "general":
        scores = s @ W @ np.swapaxes(h, -1, -2)  # [..., T_tgt, T_src]
    else:  # concat: W [s; h] = s @ W[:d_s] + h @ W[d_s:]
        d_s = s.shape[-1]
        proj_s = (s @ W[:d_s])[..., :, None, :]  # [..., T_tgt, 1, d_a]
        proj_h = (h @ W[d_s:])[..., None, :, :]  # [..., 1, T_src, d_a]
        scores = np.tanh(proj_s + proj_h) @ v  # [..., T_tgt, T_src]
    weights = masked_softmax(scores, mask)  # [..., T_tgt, T_src]
    return scores, weights, weights @ h  # context [..., T_tgt, d_h]
