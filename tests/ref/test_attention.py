"""Scaled dot-product, additive (Bahdanau) and Luong attention against independent torch code."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import ref

# Stated tolerances: max absolute difference from the independent implementation.
TOL = {np.float64: 1e-10, np.float32: 1e-5}
DTYPES = [np.float64, np.float32]
SEEDS = st.integers(0, 2**32 - 1)


def _t(*arrays):
    return [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=30, deadline=None)
@given(
    seed=SEEDS,
    b=st.integers(1, 3),
    h=st.integers(1, 3),
    t_q=st.integers(1, 6),
    t_k=st.integers(1, 6),
    d_k=st.integers(1, 9),
    d_v=st.integers(1, 9),
    masked=st.booleans(),
    scaled=st.booleans(),
)
def test_sdpa_matches_torch(dtype, seed, b, h, t_q, t_k, d_k, d_v, masked, scaled):
    g = np.random.default_rng(seed)
    q = g.normal(size=(b, h, t_q, d_k)).astype(dtype)
    k = g.normal(size=(b, h, t_k, d_k)).astype(dtype)
    v = g.normal(size=(b, h, t_k, d_v)).astype(dtype)
    mask = None
    if masked:  # a random mask shared over heads, every row keeps at least one key
        mask = g.random((b, 1, t_q, t_k)) < 0.5
        mask[..., g.integers(t_k)] = True
    scale = float(g.uniform(0.1, 2.0)) if scaled else None
    out, w = ref.scaled_dot_product_attention(q, k, v, mask, scale=scale)
    assert out.shape == (b, h, t_q, d_v) and w.shape == (b, h, t_q, t_k)
    assert out.dtype == dtype and w.dtype == dtype
    tq, tk, tv = _t(q, k, v)
    t_mask = None if mask is None else torch.from_numpy(mask)
    t_out = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=t_mask, scale=scale)
    assert np.max(np.abs(out - t_out.numpy())) <= TOL[dtype]
    # the weights, recomputed with torch's softmax over additive -inf masking
    logits = tq @ tk.transpose(-1, -2) * (scale if scale is not None else 1 / math.sqrt(d_k))
    if mask is not None:
        logits = logits.masked_fill(~torch.from_numpy(mask), float("-inf"))
    assert np.max(np.abs(w - torch.softmax(logits, dim=-1).numpy())) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_broadcasts_leading_dims_like_torch(dtype, rng):
    q = rng.normal(size=(2, 3, 4, 5)).astype(dtype)
    k = rng.normal(size=(1, 3, 6, 5)).astype(dtype)  # shared over the batch
    v = rng.normal(size=(6, 2)).astype(dtype)  # shared over batch and heads
    out, _ = ref.scaled_dot_product_attention(q, k, v, ref.causal_mask(4, 6))
    t_out = F.scaled_dot_product_attention(*_t(q, k, v), attn_mask=torch.from_numpy(ref.causal_mask(4, 6)))
    assert out.shape == (2, 3, 4, 2)
    assert np.max(np.abs(out - t_out.numpy())) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_additive_bias_matches_torch_float_mask(dtype, rng):
    q, k, v = (rng.normal(size=(2, 4, 3)).astype(dtype) for _ in range(3))
    bias = rng.normal(size=(4, 4)).astype(dtype)
    out, _ = ref.scaled_dot_product_attention(q, k, v, bias=bias)
    t_out = F.scaled_dot_product_attention(*_t(q, k, v), attn_mask=torch.from_numpy(bias))
    assert out.dtype == dtype
    assert np.max(np.abs(out - t_out.numpy())) <= TOL[dtype]


# --- additive (Bahdanau) and Luong: a plain torch re-computation of the notes' formulas -----------------


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=25, deadline=None)
@given(
    seed=SEEDS,
    b=st.integers(1, 3),
    t_tgt=st.integers(1, 5),
    t_src=st.integers(1, 6),
    d_s=st.integers(1, 6),
    d_h=st.integers(1, 6),
    d_a=st.integers(1, 6),
    masked=st.booleans(),
)
def test_additive_attention_matches_torch_recomputation(dtype, seed, b, t_tgt, t_src, d_s, d_h, d_a, masked):
    g = np.random.default_rng(seed)
    s_prev, h = g.normal(size=(b, t_tgt, d_s)).astype(dtype), g.normal(size=(b, t_src, d_h)).astype(dtype)
    W_a, U_a = g.normal(size=(d_s, d_a)).astype(dtype), g.normal(size=(d_h, d_a)).astype(dtype)
    v_a = g.normal(size=d_a).astype(dtype)
    mask = ref.padding_mask(g.integers(1, t_src + 1, size=b), t_src) if masked else None
    scores, w, ctx = ref.additive_attention(s_prev, h, W_a, U_a, v_a, mask)
    ts, th, tW, tU, tv = _t(s_prev, h, W_a, U_a, v_a)
    # e_ti = v_a^T tanh(W_a s_{t-1} + U_a h_i), one (t, i) pair at a time
    e = torch.stack(
        [
            torch.stack([torch.tanh(ts[:, t] @ tW + th[:, i] @ tU) @ tv for i in range(t_src)], -1)
            for t in range(t_tgt)
        ],
        1,
    )  # [b, t_tgt, t_src]
    if mask is not None:
        e_masked = e.masked_fill(~torch.from_numpy(mask), float("-inf"))
    else:
        e_masked = e
    alpha = torch.softmax(e_masked, dim=-1)
    assert np.max(np.abs(scores - e.numpy())) <= TOL[dtype]
    assert np.max(np.abs(w - alpha.numpy())) <= TOL[dtype]
    assert np.max(np.abs(ctx - torch.einsum("bts,bsd->btd", alpha, th).numpy())) <= TOL[dtype]
    assert ctx.shape == (b, t_tgt, d_h) and w.shape == (b, t_tgt, t_src)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["dot", "general", "concat"])
@settings(max_examples=25, deadline=None)
@given(
    seed=SEEDS,
    b=st.integers(1, 3),
    t_tgt=st.integers(1, 5),
    t_src=st.integers(1, 6),
    d_h=st.integers(1, 6),
    d_a=st.integers(1, 6),
)
def test_luong_attention_matches_torch_recomputation(dtype, kind, seed, b, t_tgt, t_src, d_h, d_a):
    g = np.random.default_rng(seed)
    d_s = d_h if kind == "dot" else d_h + 1
    s, h = g.normal(size=(b, t_tgt, d_s)).astype(dtype), g.normal(size=(b, t_src, d_h)).astype(dtype)
    W = v = None
    ts, th = _t(s, h)
    if kind == "dot":  # score = s_t^T h_i
        e = ts @ th.transpose(1, 2)
    elif kind == "general":  # score = s_t^T W_a h_i
        W = g.normal(size=(d_s, d_h)).astype(dtype)
        e = torch.einsum("btd,de,bse->bts", ts, torch.from_numpy(W), th)
    else:  # score = v_a^T tanh(W_a [s_t; h_i])
        W, v = g.normal(size=(d_s + d_h, d_a)).astype(dtype), g.normal(size=d_a).astype(dtype)
        pairs = torch.cat(
            [ts[:, :, None].expand(-1, -1, t_src, -1), th[:, None].expand(-1, t_tgt, -1, -1)], -1
        )  # [b, t_tgt, t_src, d_s + d_h]
        e = torch.tanh(pairs @ torch.from_numpy(W)) @ torch.from_numpy(v)
    scores, w, ctx = ref.luong_attention(s, h, kind, W=W, v=v)
    alpha = torch.softmax(e, dim=-1)
    assert scores.dtype == dtype
    assert np.max(np.abs(scores - e.numpy())) <= TOL[dtype]
    assert np.max(np.abs(w - alpha.numpy())) <= TOL[dtype]
    assert np.max(np.abs(ctx - (alpha @ th).numpy())) <= TOL[dtype]


def test_luong_masked_source_positions_get_zero_weight(rng):
    s, h = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4))
    mask = ref.padding_mask(np.array([2, 5]), 5)
    _, w, ctx = ref.luong_attention(s, h, "dot", mask=mask)
    assert np.all(w[0, :, 2:] == 0)
    _, w_short, ctx_short = ref.luong_attention(s[:1], h[:1, :2], "dot")
    np.testing.assert_allclose(ctx[:1], ctx_short, atol=1e-12)
