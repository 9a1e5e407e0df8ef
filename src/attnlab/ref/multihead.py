"""Multi-head attention: MultiHead(X) = Concat(H_1, ..., H_h) W^O, H_i = Attention(X W_i^Q, X W_i^K, X W_i^V).

Parameters are one dict of full-width matrices, applied on the right of row vectors:
``W_q [d_model, h*d_k]``, ``W_k [d_kv, h_kv*d_k]``, ``W_v [d_kv, h_kv*d_v]``, ``W_o [h*d_v, d_model]``
and optional biases ``b_q, b_k, b_v, b_o``. Head ``i`` owns columns ``i*d_k:(i+1)*d_k``.
With ``num_kv_heads < num_heads`` (GQA; 1 = MQA) each key/value head is shared by
``num_heads / num_kv_heads`` consecutive query heads.
"""

from __future__ import annotations

import numpy as np

from attnlab.ref._checks import as_float, check_multi_head, positive_int
from attnlab.ref.attention import scaled_dot_product_attention
from attnlab.ref.positions import alibi_bias, apply_rope


def split_heads(x, num_heads: int) -> np.ndarray:
    """Split the projected features into heads: Q = [Q_1 | ... | Q_h], head ``i`` owning columns
    ``i*d_h .. (i+1)*d_h - 1``.

    Args:
        x: ``[..., T, h*d_h]`` (e.g. ``X W^Q``). num_heads: h; must divide the width.
    Returns:
        ``[..., h, T, d_h]``.
    """
    x = as_float("x", x, min_ndim=2)
    num_heads = positive_int("num_heads", num_heads)
    *lead, t, width = x.shape
    if width % num_heads:
        raise ValueError(f"width {width} of x {list(x.shape)} is not divisible by num_heads={num_heads}")
    x = x.reshape(*lead, t, num_heads, width // num_heads)  # [..., T, h, d_h]
    return np.swapaxes(x, -2, -3)  # [..., h, T, d_h]


def merge_heads(x) -> np.ndarray:
    """Concat(H_1, ..., H_h): put the heads side by side again (the inverse of :func:`split_heads`).

    Args:
        x: head outputs ``[..., h, T, d_h]``.
    Returns:
        ``[..., T, h*d_h]``, ready for ``@ W^O``.
    """
    x = as_float("x", x, min_ndim=3)
    *lead, h, t, d_h = x.shape
    return np.swapaxes(x, -2, -3).reshape(*lead, t, h * d_h)  # [..., T, h*d_h]


def _linear(x: np.ndarray, params: dict, w: str, b: str) -> np.ndarray:
    y = x @ params[w]
    return y + params[b] if params.get(b) is not None else y


def multi_head_attention(
    x_q,
    x_kv,
    params: dict,
    num_heads: int,
    *,
    num_kv_heads: int | None = None,
    mask=None,
    positions: str | None = None,
    rope_base: float = 10000.0,
    rope_layout: str = "interleaved",
    rope_scaling: dict | None = None,
    empty_rows: str = "error",
):
    """MultiHead(X_q, X_kv) = Concat(H_1, ..., H_h) W^O with H_i = softmax(Q_i K_i^T / sqrt(d_k) + M) V_i.

    Args:
        x_q: ``[B, T_q, d_model]``; x_kv: ``[B, T_k, d_kv]`` (``None`` or ``x_q`` for self-attention).
        params: see the module docstring.
        num_heads: h. num_kv_heads: h_kv (default h); must divide h.
        mask: bool broadcastable to ``[B, T_q, T_k]`` (shared by every head; a 3-D mask gets a head
            axis inserted) or 4-D ``[B, h, T_q, T_k]``. True = may attend.
        positions: None, ``"rope"`` (rotate queries at positions ``T_k-T_q .. T_k-1`` and keys at
            ``0 .. T_k-1``; ``rope_base``, ``rope_layout`` and ``rope_scaling`` as :func:`apply_rope`'s
            ``base``, ``layout`` and ``scaling``, dynamic NTK scaling for ``T_k``) or ``"alibi"``
            (add :func:`alibi_bias`).
    Returns:
        ``(out, weights)``: ``out [B, T_q, d_model]``, ``weights [B, h, T_q, T_k]``.
    """
    x_q, x_kv, params, num_kv_heads, mask = check_multi_head(
        x_q, x_kv, params, num_heads, num_kv_heads, positions, mask
    )
    t_q, t_k = x_q.shape[1], x_kv.shape[1]

    q = split_heads(_linear(x_q, params, "W_q", "b_q"), num_heads)  # [B, h, T_q, d_k]
    k = split_heads(_linear(x_kv, params, "W_k", "b_k"), num_kv_heads)  # [B, h_kv, T_k, d_k]
    v = split_heads(_linear(x_kv, params, "W_v", "b_v"), num_kv_heads)  # [B, h_kv, T_k, d_v]
    group = num_heads // num_kv_heads
    k = np.repeat(k, group, axis=1)  # [B, h, T_k, d_k]: kv head j serves query heads j*group..
    v = np.repeat(v, group, axis=1)  # [B, h, T_k, d_v]

    bias = None
    if positions == "rope":
        q = apply_rope(q, np.arange(t_k - t_q, t_k), rope_base, rope_layout, scaling=rope_scaling)
        k = apply_rope(k, np.arange(t_k), rope_base, rope_layout, scaling=rope_scaling)
    elif positions == "alibi":
        bias = alibi_bias(num_heads, t_q, t_k)[None]  # [1, h, T_q, T_k]

    heads, weights = scaled_dot_product_attention(q, k, v, mask, bias=bias, empty_rows=empty_rows)
    concat = merge_heads(heads)  # [B, T_q, h*d_v]
    return _linear(concat, params, "W_o", "b_o"), weights  # [B, T_q, d_model], [B, h, T_q, T_k]
