"""nn.AdditiveAttention / nn.LuongAttention equal the NumPy reference on the same weights (float64)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import ref
from attnlab.nn.attention import AdditiveAttention, LuongAttention

TOL = 1e-10


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()


def _inputs(seed: int, B: int, T_tgt: int, T_src: int, d_s: int, d_h: int, masked: bool):
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(B, T_tgt, d_s, generator=g, dtype=torch.float64)
    h = torch.randn(B, T_src, d_h, generator=g, dtype=torch.float64)
    mask = None
    if masked:
        lengths = torch.randint(1, T_src + 1, (B,), generator=g)
        mask = (torch.arange(T_src)[None, :] < lengths[:, None])[:, None, :]  # [B, 1, T_src]
    return s, h, mask


def _randomise(module: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))


dims = st.tuples(
    st.integers(1, 3),
    st.integers(1, 5),
    st.integers(1, 6),
    st.integers(1, 6),
    st.integers(1, 6),
    st.integers(1, 5),
    st.booleans(),
    st.integers(0, 10_000),
)


@settings(max_examples=40, deadline=None)
@given(dims)
def test_additive_matches_reference(d):
    B, T_tgt, T_src, d_s, d_h, d_a, masked, seed = d
    m = AdditiveAttention(d_s, d_h, d_a).double()
    _randomise(m, seed)
    s, h, mask = _inputs(seed, B, T_tgt, T_src, d_s, d_h, masked)
    ctx, w = m(s, h, mask)
    assert ctx.shape == (B, T_tgt, d_h) and w.shape == (B, T_tgt, T_src)
    _, w_ref, ctx_ref = ref.additive_attention(
        _np(s),
        _np(h),
        _np(m.W_a.weight).T,
        _np(m.U_a.weight).T,
        _np(m.v_a.weight)[0],
        mask=None if mask is None else _np(mask),
    )
    np.testing.assert_allclose(_np(w), w_ref, rtol=0, atol=TOL)
    np.testing.assert_allclose(_np(ctx), ctx_ref, rtol=0, atol=TOL)


@settings(max_examples=60, deadline=None)
@given(dims, st.sampled_from(["dot", "general", "concat"]))
def test_luong_matches_reference(d, kind):
    B, T_tgt, T_src, d_s, d_h, d_a, masked, seed = d
    if kind == "dot":
        d_h = d_s
    m = LuongAttention(d_s, d_h, kind, d_a=d_a if kind == "concat" else None).double()
    _randomise(m, seed)
    s, h, mask = _inputs(seed, B, T_tgt, T_src, d_s, d_h, masked)
    ctx, w = m(s, h, mask)
    W = v = None
    if kind == "general":
        W = _np(m.W_a.weight)  # [d_s, d_h]
    elif kind == "concat":
        W, v = _np(m.W_a.weight).T, _np(m.v_a.weight)[0]  # [d_s + d_h, d_a], [d_a]
    _, w_ref, ctx_ref = ref.luong_attention(
        _np(s), _np(h), kind, W=W, v=v, mask=None if mask is None else _np(mask)
    )
    np.testing.assert_allclose(_np(w), w_ref, rtol=0, atol=TOL)
    np.testing.assert_allclose(_np(ctx), ctx_ref, rtol=0, atol=TOL)


@pytest.mark.parametrize(
    "module",
    [
        AdditiveAttention(4, 6, 5),
        LuongAttention(4, 6, "general"),
        LuongAttention(6, 6, "dot"),
        LuongAttention(4, 6, "concat", d_a=3),
    ],
)
def test_padding_is_ignored_and_rows_sum_to_one(module):
    torch.manual_seed(0)
    s, h = torch.randn(2, 3, module.d_s), torch.randn(2, 5, 6)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])[:, None, :]  # [2, 1, 5]
    ctx, w = module(s, h, mask)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3), rtol=0, atol=1e-6)
    assert torch.all(w[1, :, 2:] == 0)
    h2 = h.clone()
    h2[1, 2:] = 1e3  # garbage at padded positions changes nothing
    ctx2, w2 = module(s, h2, mask)
    torch.testing.assert_close(ctx2, ctx, rtol=0, atol=0)
    torch.testing.assert_close(w2, w, rtol=0, atol=0)


def test_precomputed_keys_give_the_same_result():
    torch.manual_seed(1)
    m = AdditiveAttention(3, 4, 5)
    s, h = torch.randn(2, 1, 3), torch.randn(2, 7, 4)
    ctx, w = m.attend(s, h, m.project_keys(h))
    ctx_full, w_full = m(s, h)
    assert torch.equal(ctx, ctx_full) and torch.equal(w, w_full)


def test_bad_input_names_the_argument():
    m = AdditiveAttention(3, 4, 5)
    with pytest.raises(ValueError, match=r"^h\b.*\bd_h=4\b.*\[2, 7, 5\]"):
        m(torch.randn(2, 1, 3), torch.randn(2, 7, 5))
    with pytest.raises(ValueError, match=r"^s\b.*\bbatch 3\b.*\bh\b.*\bbatch 2\b"):
        m(torch.randn(3, 1, 3), torch.randn(2, 7, 4))
    with pytest.raises(ValueError, match="no source position"):
        m(torch.randn(1, 1, 3), torch.randn(1, 2, 4), torch.zeros(1, 1, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask must be boolean"):
        m(torch.randn(1, 1, 3), torch.randn(1, 2, 4), torch.ones(1, 1, 2))
    with pytest.raises(ValueError, match=r"\bdot\b.*\bd_s=3, d_h=4$"):
        LuongAttention(3, 4, "dot")
    with pytest.raises(ValueError, match=r"^kind\b.*'dot'.*, got 'cosine'"):
        LuongAttention(3, 4, "cosine")
