"""Multi-head attention against nn.MultiheadAttention (via params_from_torch) and GQA/MQA against
torch's scaled_dot_product_attention(enable_gqa=True)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnlab import ref

# Stated tolerances: max absolute difference from the independent implementation.
TOL = {np.float64: 1e-10, np.float32: 1e-5}
DTYPES = [np.float64, np.float32]
TORCH = {np.float64: torch.float64, np.float32: torch.float32}
SEEDS = st.integers(0, 2**32 - 1)


def _mha(seed, d, h, dtype, **kw):
    torch.manual_seed(seed)
    m = nn.MultiheadAttention(d, h, batch_first=True, dtype=TORCH[dtype], **kw).eval()
    with torch.no_grad():  # non-zero biases, so a bias mix-up cannot hide
        for name, p in m.named_parameters():
            if "bias" in name:
                p.normal_()
    return m


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=25, deadline=None)
@given(
    seed=SEEDS,
    b=st.integers(1, 3),
    t_q=st.integers(1, 6),
    t_k=st.integers(1, 6),
    h=st.sampled_from([1, 2, 4]),
    d_head=st.integers(1, 4),
    cross=st.booleans(),
    bias=st.booleans(),
    masked=st.booleans(),
)
def test_multi_head_attention_matches_nn_multiheadattention(
    dtype, seed, b, t_q, t_k, h, d_head, cross, bias, masked
):
    d = h * d_head
    m = _mha(seed % 1000, d, h, dtype, bias=bias)
    g = np.random.default_rng(seed)
    x_q = g.normal(size=(b, t_q, d)).astype(dtype)
    x_kv = g.normal(size=(b, t_k, d)).astype(dtype) if cross else x_q
    t_k = x_kv.shape[1]
    lengths = g.integers(1, t_k + 1, size=b) if masked else np.full(b, t_k)
    mask = ref.padding_mask(lengths, t_k)  # [b, 1, t_k]
    out, w = ref.multi_head_attention(x_q, x_kv, ref.params_from_torch(m, dtype), h, mask=mask)
    with torch.no_grad():
        t_out, t_w = m(
            *map(torch.from_numpy, (x_q, x_kv, x_kv)),
            key_padding_mask=torch.from_numpy(~mask[:, 0]),  # torch: True = ignore
            need_weights=True,
            average_attn_weights=False,
        )
    assert out.dtype == dtype and out.shape == (b, t_q, d) and w.shape == (b, h, t_q, t_k)
    assert np.max(np.abs(out - t_out.numpy())) <= TOL[dtype]
    assert np.max(np.abs(w - t_w.numpy())) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_multi_head_attention_with_kdim_vdim_and_causal_mask(dtype, rng):
    m = _mha(0, 8, 2, dtype, kdim=5, vdim=3)  # separate q/k/v projection weights
    x_q = rng.normal(size=(2, 4, 8)).astype(dtype)
    x_k, x_v = rng.normal(size=(2, 4, 5)).astype(dtype), rng.normal(size=(2, 4, 3)).astype(dtype)
    params = ref.params_from_torch(m, dtype)
    assert params["W_k"].shape == (5, 8) and params["W_v"].shape == (3, 8)
    # the reference takes one x_kv; with kdim != vdim feed keys and values through their own weights
    q = x_q @ params["W_q"] + params["b_q"]
    k = x_k @ params["W_k"] + params["b_k"]
    v = x_v @ params["W_v"] + params["b_v"]
    qh, kh, vh = (ref.split_heads(a, 2) for a in (q, k, v))  # [2, 2, 4, 4] each
    heads, _ = ref.scaled_dot_product_attention(qh, kh, vh, ref.causal_mask(4))
    out = ref.merge_heads(heads) @ params["W_o"] + params["b_o"]
    with torch.no_grad():
        t_out, _ = m(
            *map(torch.from_numpy, (x_q, x_k, x_v)),
            attn_mask=torch.from_numpy(~ref.causal_mask(4)),
            need_weights=False,
        )
    assert np.max(np.abs(out - t_out.numpy())) <= TOL[dtype]


def test_params_from_torch_reads_weights_as_d_in_by_d_out():
    m = _mha(3, 6, 2, np.float64)
    p = ref.params_from_torch(m)
    w = m.in_proj_weight.detach().numpy()
    np.testing.assert_array_equal(p["W_q"], w[:6].T)
    np.testing.assert_array_equal(p["W_v"], w[12:].T)
    np.testing.assert_array_equal(p["W_o"], m.out_proj.weight.detach().numpy().T)
    np.testing.assert_array_equal(p["b_k"], m.in_proj_bias.detach().numpy()[6:12])
    assert sorted(p) == ["W_k", "W_o", "W_q", "W_v", "b_k", "b_o", "b_q", "b_v"]


def test_params_from_torch_rejects_other_modules():
    with pytest.raises(ValueError, match="got Linear"):
        ref.params_from_torch(nn.Linear(2, 2))


def test_split_merge_heads_match_torch_reshape_and_round_trip(rng):
    x = rng.normal(size=(2, 5, 12))
    heads = ref.split_heads(x, 3)
    expected = torch.from_numpy(x).view(2, 5, 3, 4).transpose(1, 2).numpy()
    np.testing.assert_array_equal(heads, expected)
    np.testing.assert_array_equal(heads[:, 1], x[..., 4:8])  # head i owns columns i*d_k:(i+1)*d_k
    np.testing.assert_array_equal(ref.merge_heads(heads), x)


def _gqa_params(g, d, h, h_kv, d_k):
    # weights scaled by 1/sqrt(fan_in), as an initialiser does, so outputs are O(1) and the absolute
    # float32 tolerance is meaningful
    s_in, s_out = d**-0.5, (h * d_k) ** -0.5
    return {
        "W_q": s_in * g.normal(size=(d, h * d_k)),
        "W_k": s_in * g.normal(size=(d, h_kv * d_k)),
        "W_v": s_in * g.normal(size=(d, h_kv * d_k)),
        "W_o": s_out * g.normal(size=(h * d_k, d)),
        "b_q": g.normal(size=h * d_k),
        "b_k": g.normal(size=h_kv * d_k),
        "b_v": g.normal(size=h_kv * d_k),
        "b_o": g.normal(size=d),
    }


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=25, deadline=None)
@given(
    seed=SEEDS,
    b=st.integers(1, 2),
    t=st.integers(1, 6),
    hk=st.sampled_from([(4, 4), (4, 2), (4, 1), (6, 3), (6, 2), (2, 1)]),
    d_k=st.integers(1, 4),
    causal=st.booleans(),
)
def test_gqa_and_mqa_match_torch_enable_gqa(dtype, seed, b, t, hk, d_k, causal):
    h, h_kv = hk
    g = np.random.default_rng(seed)
    d = 5
    params = {k: v.astype(dtype) for k, v in _gqa_params(g, d, h, h_kv, d_k).items()}
    x = g.normal(size=(b, t, d)).astype(dtype)
    mask = ref.causal_mask(t) if causal else None
    out, w = ref.multi_head_attention(x, None, params, h, num_kv_heads=h_kv, mask=mask)
    P = {k: torch.from_numpy(v) for k, v in params.items()}
    tx = torch.from_numpy(x)
    q = (tx @ P["W_q"] + P["b_q"]).view(b, t, h, d_k).transpose(1, 2)
    k = (tx @ P["W_k"] + P["b_k"]).view(b, t, h_kv, d_k).transpose(1, 2)
    v = (tx @ P["W_v"] + P["b_v"]).view(b, t, h_kv, d_k).transpose(1, 2)
    z = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    t_out = z.transpose(1, 2).reshape(b, t, h * d_k) @ P["W_o"] + P["b_o"]
    assert w.shape == (b, h, t, t) and out.dtype == dtype
    assert np.max(np.abs(out - t_out.numpy())) <= TOL[dtype]


def test_gqa_kv_head_j_serves_consecutive_query_heads(rng):
    # h=4, h_kv=2: query heads 0,1 share kv head 0; heads 2,3 share kv head 1. Give query heads 0 and 1
    # (and 2 and 3) identical projections: then their weights must be identical.
    d, d_k = 4, 2
    W_q_pair = rng.normal(size=(d, d_k))
    W_q_pair2 = rng.normal(size=(d, d_k))
    params = {
        "W_q": np.concatenate([W_q_pair, W_q_pair, W_q_pair2, W_q_pair2], 1),
        "W_k": rng.normal(size=(d, 2 * d_k)),
        "W_v": rng.normal(size=(d, 2 * d_k)),
        "W_o": rng.normal(size=(4 * d_k, d)),
    }
    x = rng.normal(size=(1, 5, d))
    _, w = ref.multi_head_attention(x, x, params, 4, num_kv_heads=2)
    np.testing.assert_array_equal(w[0, 0], w[0, 1])
    np.testing.assert_array_equal(w[0, 2], w[0, 3])
    assert np.max(np.abs(w[0, 0] - w[0, 2])) > 1e-3


def test_four_dim_mask_is_per_head(rng):
    params = {"W_q": np.eye(4), "W_k": np.eye(4), "W_v": np.eye(4), "W_o": np.eye(4)}
    x = rng.normal(size=(1, 3, 4))
    mask = np.ones((1, 2, 3, 3), dtype=bool)
    mask[0, 1] = ref.causal_mask(3)  # only head 1 is causal
    _, w = ref.multi_head_attention(x, x, params, 2, mask=mask)
    assert np.all(w[0, 1][~ref.causal_mask(3)] == 0)
    assert np.all(w[0, 0] > 0)
