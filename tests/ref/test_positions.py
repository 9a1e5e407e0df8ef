"""Sinusoidal encodings, RoPE and ALiBi: exact values, an independent complex-number RoPE, and the
relative-position property."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import ref

TOL = {np.float64: 1e-10, np.float32: 1e-5}
DTYPES = [np.float64, np.float32]
SEEDS = st.integers(0, 2**32 - 1)


def test_sinusoidal_exact_values():
    pe = ref.sinusoidal_positions(3, 4)
    # PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...); d=4: frequencies 1 and 1/100
    expected = [
        [0, 1, 0, 1],
        [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)],
        [math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)],
    ]
    np.testing.assert_allclose(pe, expected, atol=1e-15)
    odd = ref.sinusoidal_positions(5, 7)  # odd width: the last pair keeps its sine, drops its cosine
    assert odd.shape == (5, 7)
    np.testing.assert_allclose(odd[:, 6], np.sin(np.arange(5) / 10000.0 ** (6 / 7)), atol=1e-15)


@settings(max_examples=25, deadline=None)
@given(t=st.integers(1, 40), half=st.integers(1, 16))
def test_sinusoidal_matches_torch_recomputation(t, half):
    d = 2 * half
    pos = torch.arange(t, dtype=torch.float64)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float64) / d)
    expected = torch.stack([torch.sin(pos * freq), torch.cos(pos * freq)], -1).reshape(t, d)  # interleave
    assert np.max(np.abs(ref.sinusoidal_positions(t, d) - expected.numpy())) <= 1e-10


def _rope_complex(x: np.ndarray, positions: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """Independent RoPE: treat (x_{2i}, x_{2i+1}) as the complex number x_{2i} + i x_{2i+1}, multiply by
    e^{i p theta_i} with theta_i = base^(-2i/d)."""
    d = x.shape[-1]
    tx = torch.from_numpy(x.astype(np.float64))
    z = torch.view_as_complex(tx.reshape(*x.shape[:-1], d // 2, 2).contiguous())
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    rot = torch.polar(
        torch.ones(len(positions), d // 2, dtype=torch.float64),
        torch.from_numpy(positions.astype(np.float64))[:, None] * theta,
    )
    return torch.view_as_real(z * rot).reshape(x.shape).numpy()


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=25, deadline=None)
@given(seed=SEEDS, t=st.integers(1, 8), half=st.integers(1, 8), base=st.sampled_from([10000.0, 500.0]))
def test_rope_matches_complex_rotation(dtype, seed, t, half, base):
    g = np.random.default_rng(seed)
    x = g.normal(size=(2, t, 2 * half)).astype(dtype)
    positions = g.integers(0, 1000, size=t)
    got = ref.apply_rope(x, positions, base)
    assert got.dtype == dtype
    assert np.max(np.abs(got - _rope_complex(x, positions, base))) <= TOL[dtype]
    # a rotation keeps every pair's length
    np.testing.assert_allclose(np.linalg.norm(got, axis=-1), np.linalg.norm(x, axis=-1), rtol=10 * TOL[dtype])


@settings(max_examples=30, deadline=None)
@given(
    seed=SEEDS,
    half=st.integers(1, 16),
    m=st.integers(0, 500),
    n=st.integers(0, 500),
    shift=st.integers(-200, 2000),
)
def test_rope_dot_product_depends_only_on_distance(seed, half, m, n, shift):
    g = np.random.default_rng(seed)
    q, k = g.normal(size=(1, 2 * half)), g.normal(size=(1, 2 * half))
    if min(m, n) + shift < 0:
        shift = -min(m, n)

    def score(pq, pk):
        return float(ref.apply_rope(q, np.array([pq]))[0] @ ref.apply_rope(k, np.array([pk]))[0])

    assert abs(score(m, n) - score(m + shift, n + shift)) <= 1e-10
    assert abs(score(0, 0) - float(q[0] @ k[0])) <= 1e-12  # position 0 is the identity


def test_alibi_slopes_for_eight_heads_are_halves():
    np.testing.assert_array_equal(
        ref.alibi_slopes(8), [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]
    )
    np.testing.assert_array_equal(ref.alibi_slopes(4), [1 / 4, 1 / 16, 1 / 64, 1 / 256])


def test_alibi_slopes_for_non_power_of_two_interleave_the_next_power():
    # 12 heads: the 8 slopes of 8 heads, then every other slope of 16 heads (2^-0.5, 2^-1.5, ...)
    expected = [2.0**-k for k in range(1, 9)] + [2.0 ** -(k + 0.5) for k in range(0, 4)]
    np.testing.assert_allclose(ref.alibi_slopes(12), expected, rtol=1e-15)


def test_alibi_bias_exact_values_lower_right():
    b = ref.alibi_bias(2, 2, 4)  # 2 heads: slopes 2^-4 and 2^-8
    np.testing.assert_allclose(ref.alibi_slopes(2), [2.0**-4, 2.0**-8])
    # queries are positions 2 and 3 of 4
    np.testing.assert_allclose(b[0], -(2.0**-4) * np.array([[2, 1, 0, 1], [3, 2, 1, 0]]), atol=0)
    np.testing.assert_allclose(b[1], -(2.0**-8) * np.array([[2, 1, 0, 1], [3, 2, 1, 0]]), atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_multi_head_attention_with_alibi_matches_torch_float_mask(dtype, rng):
    h, d, t = 4, 8, 5
    params = {k: rng.normal(size=(d, d)).astype(dtype) for k in ("W_q", "W_k", "W_v", "W_o")}
    x = rng.normal(size=(2, t, d)).astype(dtype)
    out, _ = ref.multi_head_attention(x, x, params, h, mask=ref.causal_mask(t), positions="alibi")
    P = {k: torch.from_numpy(v) for k, v in params.items()}
    tx = torch.from_numpy(x)
    q, k, v = ((tx @ P[w]).view(2, t, h, 2).transpose(1, 2) for w in ("W_q", "W_k", "W_v"))
    slopes = torch.tensor([2.0 ** (-8 * (i + 1) / h) for i in range(h)], dtype=tx.dtype)
    dist = (torch.arange(t)[:, None] - torch.arange(t)[None, :]).to(tx.dtype)  # i - j
    bias = -slopes[:, None, None] * dist
    bias = bias.masked_fill(dist < 0, float("-inf"))  # causal
    z = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    expected = (z.transpose(1, 2).reshape(2, t, d) @ P["W_o"]).numpy()
    assert out.dtype == dtype
    assert np.max(np.abs(out - expected)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_multi_head_attention_with_rope_matches_rotated_recomputation(dtype, rng):
    h, d, t = 2, 8, 4
    params = {k: rng.normal(size=(d, d)).astype(dtype) for k in ("W_q", "W_k", "W_v", "W_o")}
    x = rng.normal(size=(1, t, d)).astype(dtype)
    out, w = ref.multi_head_attention(x, x, params, h, positions="rope", mask=ref.causal_mask(t))
    split = lambda a: a.reshape(1, t, h, d // h).transpose(0, 2, 1, 3)  # [1, h, t, d_k]
    q = _rope_complex(split(x @ params["W_q"]), np.arange(t))
    k = _rope_complex(split(x @ params["W_k"]), np.arange(t))
    v = torch.from_numpy(split(x @ params["W_v"]).astype(np.float64))
    z = F.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k), v, is_causal=True)
    expected = z.numpy().transpose(0, 2, 1, 3).reshape(1, t, d) @ params["W_o"].astype(np.float64)
    assert np.max(np.abs(out - expected)) <= TOL[dtype]
