"""Attention as score -> softmax -> weighted sum: scaled dot-product, additive (Bahdanau) and
Luong (dot / general / concat).

Shapes follow the notes' row convention: ``Q [..., T_q, d_k]``, ``K [..., T_k, d_k]``,
``V [..., T_k, d_v]``, weights ``A [..., T_q, T_k]`` (each row sums to one over the keys) and
output ``Z = A V [..., T_q, d_v]``.
"""

from __future__ import annotations

import math

import numpy as np

from attnlab._checks import EMPTY_ROWS, choice
from attnlab.ref._checks import as_float, as_mask, check_qkv
from attnlab.ref.masks import check_rows
from attnlab.ref.softmax import softmax


def _broadcast_lead(name_a: str, a: np.ndarray, name_b: str, b: np.ndarray) -> None:
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(
            f"leading (batch/head) dims of {name_a} {list(a.shape)} and {name_b} {list(b.shape)} "
            f"do not broadcast"
        ) from None


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
    q = as_float("q", q, min_ndim=2)
    k = as_float("k", k, min_ndim=2)
    v = as_float("v", v, min_ndim=2)
    check_qkv(q, k, v)
    _broadcast_lead("q", q, "k", k)
    _broadcast_lead("k", k, "v", v)
    choice("empty_rows", empty_rows, EMPTY_ROWS)  # checked here too: without a mask it is never consulted
    if k.shape[-2] == 0:
        raise ValueError(f"k has T_k=0: there is no key to attend to (q {list(q.shape)}, k {list(k.shape)})")
    d_k = q.shape[-1]
    if scale is not None and (
        isinstance(scale, bool) or not isinstance(scale, (int, float, np.number)) or not np.isfinite(scale)
    ):
        raise ValueError(f"scale must be a finite number, got {scale!r}")
    # a Python float keeps float32 inputs float32 (a NumPy float64 scalar would promote them)
    scale = 1.0 / math.sqrt(d_k) if scale is None else float(scale)
    with np.errstate(over="ignore", invalid="ignore"):
        scores = (q @ np.swapaxes(k, -1, -2)) * scale  # [..., T_q, T_k]
    if not np.all(np.isfinite(scores)):  # q and k are finite (checked): their products overflowed
        big = float(max(np.abs(q).max(), np.abs(k).max()))
        raise ValueError(
            f"the scores q.k^T overflow {scores.dtype} (q and k reach {big:.3g}): every input is finite but "
            "their products are not; scale q or k down"
        )
    if bias is not None:
        b = as_float("bias", bias).astype(scores.dtype, copy=False)
        try:
            scores = scores + b
        except ValueError:
            raise ValueError(
                f"bias of shape {list(b.shape)} does not broadcast to the scores' shape {list(scores.shape)}"
            ) from None
    weights = masked_softmax(scores, mask, empty_rows=empty_rows)  # [..., T_q, T_k]
    out = weights @ v  # [..., T_q, d_v]
    return out, weights


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
    s_prev = as_float("s_prev", s_prev, min_ndim=2)
    h = as_float("h", h, min_ndim=2)
    W_a = as_float("W_a", W_a, ndim=2)
    U_a = as_float("U_a", U_a, ndim=2)
    v_a = as_float("v_a", v_a, ndim=1)
    if W_a.shape[0] != s_prev.shape[-1]:
        raise ValueError(f"W_a has {W_a.shape[0]} rows but s_prev has d_s={s_prev.shape[-1]}")
    if U_a.shape[0] != h.shape[-1]:
        raise ValueError(f"U_a has {U_a.shape[0]} rows but h has d_h={h.shape[-1]}")
    if not (W_a.shape[1] == U_a.shape[1] == v_a.shape[0]):
        raise ValueError(
            f"attention widths differ: W_a {list(W_a.shape)}, U_a {list(U_a.shape)}, "
            f"v_a {list(v_a.shape)} (need a common d_a)"
        )
    _broadcast_lead("s_prev", s_prev, "h", h)
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
    s = as_float("s", s, min_ndim=2)
    h = as_float("h", h, min_ndim=2)
    _broadcast_lead("s", s, "h", h)
    d_s, d_h = s.shape[-1], h.shape[-1]
    if kind == "dot":
        if d_s != d_h:
            raise ValueError(f"dot score needs equal widths, but s has d_s={d_s} and h has d_h={d_h}")
        scores = s @ np.swapaxes(h, -1, -2)  # [..., T_tgt, T_src]
    elif kind == "general":
        if W is None:
            raise ValueError("kind='general' needs W of shape [d_s, d_h]")
        W = as_float("W", W, ndim=2)
        if W.shape != (d_s, d_h):
            raise ValueError(f"W has shape {list(W.shape)} but general needs [d_s, d_h] = [{d_s}, {d_h}]")
        scores = s @ W @ np.swapaxes(h, -1, -2)  # [..., T_tgt, T_src]
    elif kind == "concat":
        if W is None or v is None:
            raise ValueError("kind='concat' needs W [d_s + d_h, d_a] and v [d_a]")
        W = as_float("W", W, ndim=2)
        v = as_float("v", v, ndim=1)
        if W.shape[0] != d_s + d_h or W.shape[1] != v.shape[0]:
            raise ValueError(
                f"concat needs W [d_s + d_h, d_a] = [{d_s + d_h}, d_a] and v [d_a]; "
                f"got W {list(W.shape)}, v {list(v.shape)}"
            )
        # W [s; h] = s @ W[:d_s] + h @ W[d_s:]
        proj_s = (s @ W[:d_s])[..., :, None, :]  # [..., T_tgt, 1, d_a]
        proj_h = (h @ W[d_s:])[..., None, :, :]  # [..., 1, T_src, d_a]
        scores = np.tanh(proj_s + proj_h) @ v  # [..., T_tgt, T_src]
    else:
        raise ValueError(f"kind must be 'dot', 'general' or 'concat', got {kind!r}")
    weights = masked_softmax(scores, mask)  # [..., T_tgt, T_src]
    return scores, weights, weights @ h  # context [..., T_tgt, d_h]
