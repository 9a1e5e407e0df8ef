"""nn.flash_attention: forward against F.scaled_dot_product_attention, gradients against autograd
through naive attention, gradcheck, and the tile-recomputing backward's edge cases."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.nn.flash import flash_attention

TOL = {torch.float64: 1e-10, torch.float32: 1e-5}


def _positional_mask(t_q, t_k, causal, window):
    """Lower-right causal / sliding-window mask [t_q, t_k], built independently of the code under test."""
    p = torch.arange(t_q)[:, None] + (t_k - t_q)
    j = torch.arange(t_k)[None, :]
    m = torch.ones(t_q, t_k, dtype=torch.bool)
    if causal or window is not None:
        m &= j <= p
    if window is not None:
        m &= j > p - window
    return m


def _naive(q, k, v, mask, scale):
    """softmax(Q K^T * scale + M) V with plain autograd ops; empty rows give 0."""
    s = (q @ k.transpose(-1, -2)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    w = torch.softmax(s, dim=-1)
    return torch.nan_to_num(w, nan=0.0) @ v


def _grads(fn, inputs, d_out_seed):
    out = fn(*inputs)
    g = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(d_out_seed))
    return out, torch.autograd.grad(out, inputs, g)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    t_q=st.integers(1, 33),
    t_k=st.integers(1, 33),
    d_k=st.integers(1, 8),
    d_v=st.integers(1, 8),
    block_q=st.integers(1, 40),
    block_k=st.integers(1, 40),
    kind=st.sampled_from(["none", "causal", "window", "mask"]),
    window=st.integers(1, 9),
)
def test_forward_and_gradients_match_naive(dtype, seed, t_q, t_k, d_k, d_v, block_q, block_k, kind, window):
    g = torch.Generator().manual_seed(seed)
    q, k = (
        torch.randn(2, 3, t_q, d_k, generator=g, dtype=dtype),
        torch.randn(2, 3, t_k, d_k, generator=g, dtype=dtype),
    )
    v = torch.randn(2, 3, t_k, d_v, generator=g, dtype=dtype)
    for t in (q, k, v):
        t.requires_grad_(True)
    causal, win = kind == "causal", (window if kind == "window" else None)
    mask = _positional_mask(t_q, t_k, causal, win)
    extra = None
    if kind == "mask":
        extra = torch.rand(2, 1, t_q, t_k, generator=g) < 0.6  # shared over heads
        mask = extra
    scale = 1 / math.sqrt(d_k)
    got, got_g = _grads(
        lambda q, k, v: flash_attention(
            q, k, v, mask=extra, causal=causal, window=win, block_q=block_q, block_k=block_k
        ),
        (q, k, v),
        seed,
    )
    want, want_g = _grads(lambda q, k, v: _naive(q, k, v, mask, scale), (q, k, v), seed)
    tol = TOL[dtype]
    torch.testing.assert_close(got, want, rtol=0, atol=tol)
    for a, b in zip(got_g, want_g):
        torch.testing.assert_close(a, b, rtol=0, atol=tol)
    if bool(mask.any(-1).all()):  # no empty rows: PyTorch's own fused attention agrees too
        ref_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        torch.testing.assert_close(got, ref_out, rtol=0, atol=tol)


def test_gradcheck_small_case_with_mask_and_window():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 7, 3, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, 9, 3, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 2, 9, 4, generator=g, dtype=torch.float64, requires_grad=True)
    mask = torch.rand(1, 1, 7, 9, generator=g) < 0.8
    assert torch.autograd.gradcheck(
        lambda q, k, v: flash_attention(q, k, v, mask=mask, window=6, block_q=3, block_k=4, scale=0.7),
        (q, k, v),
    )


def test_broadcast_kv_heads_get_summed_gradients():
    """K, V shared by all heads ([B, 1, T, d], as in multi-query attention)."""
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 20, 8, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 1, 20, 8, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 1, 20, 8, generator=g, dtype=torch.float64, requires_grad=True)
    got, got_g = _grads(
        lambda q, k, v: flash_attention(q, k, v, causal=True, block_q=8, block_k=8), (q, k, v), 5
    )
    want, want_g = _grads(
        lambda q, k, v: _naive(q, k, v, _positional_mask(20, 20, True, None), 1 / math.sqrt(8)), (q, k, v), 5
    )
    assert got_g[1].shape == (2, 1, 20, 8)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-10)
    for a, b in zip(got_g, want_g):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_causal_is_lower_right_unlike_is_causal():
    """One decoding step (T_q = 1) over 10 cached keys sees all of them."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (
        torch.randn(1, 2, 1, 4, generator=g),
        torch.randn(1, 2, 10, 4, generator=g),
        torch.randn(1, 2, 10, 4, generator=g),
    )
    got = flash_attention(q, k, v, causal=True)
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=1e-5)
    upper_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # PyTorch: sees key 0 only
    torch.testing.assert_close(upper_left, v[:, :, :1], rtol=0, atol=1e-6)
    assert (got - upper_left).abs().max() > 0.1


def test_empty_rows_give_zero_output_and_zero_gradient():
    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 1, 6, 4, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 1, 4, 4, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 1, 4, 4, generator=g, dtype=torch.float64, requires_grad=True)
    out = flash_attention(q, k, v, causal=True, block_q=4, block_k=3)  # queries 0, 1 are positions -2, -1
    out.sum().backward()
    assert torch.all(out[..., :2, :] == 0) and torch.all(torch.isfinite(out))
    assert torch.all(q.grad[..., :2, :] == 0) and torch.all(torch.isfinite(k.grad))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(k=torch.zeros(1, 3, 5)), "k has d_k=5 but q has d_k=4"),
        (dict(v=torch.zeros(1, 2, 4)), "v has T_k=2 but k has T_k=3"),
        (dict(mask=torch.ones(2, 3)), "mask must be boolean"),
        (dict(mask=torch.ones(4, 3, dtype=torch.bool)), r"mask of shape \[4, 3\] does not broadcast"),
        (dict(k=torch.zeros(3, 3, 4), v=torch.zeros(3, 3, 4)), "leading .* do not broadcast"),
        (dict(block_k=0), "block_k must be a positive integer"),
        (dict(window=0), "window must be a positive integer"),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    args = dict(q=torch.zeros(2, 2, 4), k=torch.zeros(1, 3, 4), v=torch.zeros(1, 3, 4))
    args.update(kwargs)
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    with pytest.raises(ValueError, match=match):
        flash_attention(q, k, v, **args)


def test_public_name_is_attnlab_nn_flash_attention():
    """Issue 7 names the API ``attnlab.nn.flash_attention`` (as ``attnlab.ref.flash_attention``)."""
    import attnlab.nn

    assert attnlab.nn.flash_attention is flash_attention and "flash_attention" in attnlab.nn.__all__
