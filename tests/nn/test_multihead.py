"""MultiHeadAttention: parity with the NumPy reference (float64, <= 1e-10), fast == explicit path,
GQA against SDPA's own enable_gqa, the lower-right causal cache, the trace hook, bad input."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import ref
from attnlab.nn import BlockConfig, KVCache, MultiHeadAttention, causal_mask

TOL64 = 1e-10


def _mha(seed: int, d: int, h: int, kv_dim: int | None = None, **kw) -> MultiHeadAttention:
    """Self-attention of ``BlockConfig(d, h, **kw)``; cross-attention from width ``kv_dim`` if given."""
    torch.manual_seed(seed)
    cross = kv_dim is not None
    m = MultiHeadAttention(BlockConfig(d, h, **kw), cross_attention=cross, kv_dim=kv_dim).double().eval()
    with torch.no_grad():  # non-zero biases so that they are tested too
        for p in m.parameters():
            if p.ndim == 1:
                p.normal_(0, 0.5)
    return m


def _x(seed: int, *shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


CASES = [
    dict(h=4),
    dict(h=4, num_kv_heads=2),
    dict(h=4, num_kv_heads=1),
    dict(h=2, positions="rope"),
    dict(h=4, num_kv_heads=2, positions="rope"),
    dict(h=3, positions="alibi"),
    dict(h=4, qkv_bias=False, out_bias=False),
    dict(h=4, qkv_bias=True, out_bias=False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("masking", ["none", "padding", "causal", "padding+causal"])
def test_self_attention_matches_reference(ref_mha_params, case, masking):
    case = dict(case)
    h = case.pop("h")
    m = _mha(0, 24, h, **case)
    x = _x(1, 2, 5, 24)
    pad = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])[:, None, :]  # [B, 1, T]
    mask = pad if "padding" in masking else None
    is_causal = "causal" in masking
    ref_mask = None
    if mask is not None:
        ref_mask = mask.numpy()
    if is_causal:
        c = ref.causal_mask(5)
        ref_mask = c if ref_mask is None else ref_mask & c
    want_out, want_w = ref.multi_head_attention(
        x.numpy(),
        None,
        ref_mha_params(m),
        h,
        num_kv_heads=case.get("num_kv_heads"),
        mask=ref_mask,
        positions=case.get("positions"),
    )
    fast, none_w = m(x, mask=mask, is_causal=is_causal)
    slow, w = m(x, mask=mask, is_causal=is_causal, need_weights=True)
    assert none_w is None
    assert w.shape == (2, h, 5, 5)
    np.testing.assert_allclose(fast.detach().numpy(), want_out, rtol=0, atol=TOL64)
    np.testing.assert_allclose(slow.detach().numpy(), want_out, rtol=0, atol=TOL64)
    np.testing.assert_allclose(w.detach().numpy(), want_w, rtol=0, atol=TOL64)


def test_cross_attention_with_other_width_matches_reference(ref_mha_params):
    m = _mha(2, 16, 4, kv_dim=10, num_kv_heads=2)
    x_q, x_kv = _x(3, 3, 4, 16), _x(4, 3, 7, 10)
    mask = torch.rand(3, 4, 7, generator=torch.Generator().manual_seed(5)) > 0.3
    mask[..., 0] = True  # every query keeps a key
    want_out, want_w = ref.multi_head_attention(
        x_q.numpy(), x_kv.numpy(), ref_mha_params(m), 4, num_kv_heads=2, mask=mask.numpy()
    )
    out, w = m(x_q, x_kv, mask=mask, need_weights=True)
    fast, _ = m(x_q, x_kv, mask=mask)
    np.testing.assert_allclose(out.detach().numpy(), want_out, rtol=0, atol=TOL64)
    np.testing.assert_allclose(fast.detach().numpy(), want_out, rtol=0, atol=TOL64)
    np.testing.assert_allclose(w.detach().numpy(), want_w, rtol=0, atol=TOL64)


@settings(max_examples=25, deadline=None)
@given(
    h_kv=st.sampled_from([1, 2, 4]),
    d_k=st.sampled_from([2, 4, 6]),
    t=st.integers(1, 6),
    b=st.integers(1, 3),
    positions=st.sampled_from(["none", "rope", "alibi"]),
    seed=st.integers(0, 10_000),
)
def test_fast_path_equals_explicit_path_float32(h_kv, d_k, t, b, positions, seed):
    torch.manual_seed(seed)
    m = MultiHeadAttention(BlockConfig(4 * d_k, 4, num_kv_heads=h_kv, positions=positions)).eval()
    x = torch.randn(b, t, 4 * d_k)
    for is_causal in (False, True):
        fast, _ = m(x, is_causal=is_causal)
        slow, w = m(x, is_causal=is_causal, need_weights=True)
        torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(w.sum(-1), torch.ones(b, 4, t), rtol=1e-5, atol=1e-5)


def test_gqa_equals_sdpa_enable_gqa():
    """Our explicit GQA (each kv head repeated for its group of query heads) against PyTorch's own."""
    m = _mha(6, 32, 8, num_kv_heads=2)
    x = _x(7, 2, 6, 32)
    heads = {}
    m.trace = lambda name, t: heads.__setitem__(name, t)
    m(x, is_causal=True)
    q, k, v = heads["q_heads"], heads["k_heads"], heads["v_heads"]
    assert q.shape == (2, 8, 6, 4) and k.shape == (2, 2, 6, 4) and v.shape == (2, 2, 6, 4)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(heads["z"], want.transpose(1, 2), rtol=0, atol=1e-12)  # z: [B, T, h, d_k]


@pytest.mark.parametrize("case", [dict(), dict(num_kv_heads=1, positions="rope"), dict(positions="alibi")])
def test_cache_decoding_is_aligned_to_the_lower_right(case):
    """Feeding positions one (then two) at a time through a KVCache gives the rows of full attention."""
    m = _mha(8, 16, 4, **case)
    x = _x(9, 2, 6, 16)
    full, _ = m(x, is_causal=True)
    cache = KVCache()
    rows = [m(x[:, :3], is_causal=True, cache=cache)[0]]  # a 3-position prompt
    for t in range(3, 6):
        out, w = m(x[:, t : t + 1], is_causal=True, cache=cache, need_weights=t == 4)
        rows.append(out)
        if w is not None:
            assert w.shape == (2, 4, 1, 5) and bool((w > 0).all())  # the new query sees every cached key
    assert cache.length == 6
    torch.testing.assert_close(torch.cat(rows, dim=1), full, rtol=0, atol=1e-12)
    cache2 = KVCache()
    m(x[:, :4], is_causal=True, cache=cache2)
    two, _ = m(x[:, 4:6], is_causal=True, cache=cache2)  # T_q=2 over T_k=6: query 0 must not see key 5
    torch.testing.assert_close(two, full[:, 4:6], rtol=0, atol=1e-12)


def test_the_upper_left_trap():
    """PyTorch's is_causal=True with T_q=1 over 5 keys lets the query see key 0 only: not decoding."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, n, 4, generator=g, dtype=torch.float64) for n in (1, 5, 5))
    upper_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(upper_left, v[:, :, :1])  # only key 0
    lower_right = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(1, 5))
    torch.testing.assert_close(lower_right, F.scaled_dot_product_attention(q, k, v))  # every key
    assert not torch.allclose(upper_left, lower_right)


def test_trace_reports_every_step_in_order():
    m = _mha(10, 12, 3)
    x = _x(11, 2, 4, 12)
    seen = []
    m.trace = lambda name, t: seen.append((name, tuple(t.shape), t))
    out, w = m(x, is_causal=True)
    names = [s[0] for s in seen]
    assert names == [
        "x_q",
        "q",
        "k",
        "v",
        "q_heads",
        "k_heads",
        "v_heads",
        "scores",
        "weights",
        "z",
        "concat",
        "out",
    ]
    shapes = dict((s[0], s[1]) for s in seen)
    assert shapes["q_heads"] == (2, 3, 4, 4) and shapes["scores"] == (2, 3, 4, 4)
    assert shapes["concat"] == (2, 4, 12)
    t = {s[0]: s[2] for s in seen}
    torch.testing.assert_close(t["out"], out)
    torch.testing.assert_close(
        t["weights"], torch.softmax(t["scores"].masked_fill(~causal_mask(4), -torch.inf), -1)
    )
    assert w is None  # the trace does not change what forward returns


def test_empty_query_rows_are_errors_like_ref_unless_zero_is_asked_for(ref_mha_params):
    """One policy in ref and nn: a query row with no key is a ValueError naming the row (the same
    message), or, with empty_rows="zero", PyTorch's convention: weights and output 0, never NaN."""
    m = _mha(12, 8, 2)
    x = _x(13, 1, 3, 8)
    mask = torch.tensor([[True, True, False], [False, False, False], [True, False, False]])
    with pytest.raises(ValueError) as ref_error:
        ref.multi_head_attention(x.numpy(), None, ref_mha_params(m), 2, mask=mask.numpy())
    for kw in (dict(), dict(need_weights=True), dict(is_causal=True)):
        with pytest.raises(ValueError, match=r"\bquery row \(.*1,\).*\bempty_rows='zero'") as ours:
            m(x, mask=mask, **kw)
        assert str(ours.value).split(" (index")[1] == str(ref_error.value).split(" (index")[1]
    flash = MultiHeadAttention(BlockConfig(8, 2, attention="flash"))
    with pytest.raises(ValueError, match=r"query row \(0,\)"):  # causal & mask: query 0 keeps no key
        flash(x.float(), mask=torch.tensor([[False, True, True]]), is_causal=True)
    with pytest.raises(ValueError, match=r"^empty_rows\b.*\['error', 'zero'\], got 'nan'"):
        m(x, empty_rows="nan")
    fast, _ = m(x, mask=mask, empty_rows="zero")
    slow, w = m(x, mask=mask, need_weights=True, empty_rows="zero")
    want, want_w = ref.multi_head_attention(
        x.numpy(), None, ref_mha_params(m), 2, mask=mask.numpy(), empty_rows="zero"
    )
    np.testing.assert_allclose(slow.detach().numpy(), want, rtol=0, atol=TOL64)
    np.testing.assert_allclose(w.detach().numpy(), want_w, rtol=0, atol=TOL64)
    assert not torch.isnan(fast).any() and not torch.isnan(slow).any()
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-12)
    assert bool((w[:, :, 1] == 0).all())
    torch.testing.assert_close(slow[0, 1], m.out_proj.bias)  # no values: only the output bias


def test_static_cache_reuses_memory_projection():
    m = _mha(14, 8, 2, kv_dim=6)
    y, mem = _x(15, 2, 3, 8), _x(16, 2, 5, 6)
    want, _ = m(y, mem)
    cache = KVCache(static=True)
    first, _ = m(y[:, :1], mem, cache=cache)
    rest, _ = m(y[:, 1:], None, cache=cache)
    torch.testing.assert_close(torch.cat([first, rest], 1), want, rtol=0, atol=1e-12)
    assert cache.length == 5


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: BlockConfig(10, 3), "d_model=10 is not divisible by num_heads=3"),
        (lambda: BlockConfig(8, 4, num_kv_heads=3), "num_heads=4 is not divisible by num_kv_heads=3"),
        (lambda: BlockConfig(8, 2, positions="sinus"), "positions must be"),
        (lambda: BlockConfig(6, 2, positions="rope"), "even head width"),
        (lambda: BlockConfig(8, 2, positions="alibi", attention="flash"), "additive bias"),
        (lambda: MultiHeadAttention(dict(d_model=8, num_heads=2)), "needs a BlockConfig, got dict"),
    ],
)
def test_bad_construction(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_bad_forward_inputs_name_the_shapes():
    m = MultiHeadAttention(BlockConfig(8, 2))
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match=r"^x_q\b.*\bd_model=8\b.*\[2, 3, 7\]"):
        m(torch.randn(2, 3, 7))
    with pytest.raises(ValueError, match=r"^mask\b.*\[2, 3, 4\].*\[2, 2, 3, 3\]"):
        m(x, mask=torch.ones(2, 3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask must be boolean"):
        m(x, mask=torch.ones(3, 3))
    with pytest.raises(ValueError, match=r"^x_kv\b.*\bbatch 1\b.*\bx_q\b.*\bbatch 2\b"):
        m(x, torch.randn(1, 3, 8))


def test_inputs_of_another_type_or_dtype_are_named_with_the_dtype_expected():
    """A NumPy array, a float64/float16 or integer tensor against float32 weights, and a NumPy mask:
    one ValueError each naming the argument and what it must be (no linear()/matmul traceback)."""
    m = MultiHeadAttention(BlockConfig(8, 2))
    x = torch.randn(2, 3, 8)
    for bad, message in [
        (x.numpy(), "x_q must be a torch tensor (torch.float32, the weights' dtype), got ndarray"),
        (x.double(), "x_q has dtype torch.float64 but the weights are torch.float32"),
        (x.half(), "x_q has dtype torch.float16 but the weights are torch.float32"),
        (x.long(), "x_q has dtype torch.int64 but the weights are torch.float32"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            m(bad)
    with pytest.raises(
        ValueError, match=re.escape("x_kv has dtype torch.float64 but the weights are torch.float32")
    ):
        m(x, x.double())
    with pytest.raises(
        ValueError, match=re.escape("mask must be a torch bool tensor (True = may attend), got ndarray")
    ):
        m(x, mask=np.ones((2, 3, 3), dtype=bool))
    assert m.double()(x.double())[0].dtype == torch.float64  # the module's own dtype is the one expected


@pytest.mark.parametrize("case", [dict(), dict(num_kv_heads=2, positions="rope")])
def test_flash_option_equals_sdpa_path_with_and_without_cache(case):
    torch.manual_seed(20)
    sdpa = MultiHeadAttention(BlockConfig(16, 4, **case)).eval()
    flash = MultiHeadAttention(BlockConfig(16, 4, attention="flash", **case)).eval()
    flash.load_state_dict(sdpa.state_dict())
    x = torch.randn(2, 7, 16)
    pad = torch.tensor([[True] * 7, [True] * 5 + [False] * 2])[:, None, :]
    for kw in (dict(), dict(is_causal=True), dict(mask=pad), dict(mask=pad, is_causal=True)):
        torch.testing.assert_close(flash(x, **kw)[0], sdpa(x, **kw)[0], rtol=1e-5, atol=1e-5)
    c1, c2 = KVCache(), KVCache()
    flash(x[:, :4], is_causal=True, cache=c1)
    sdpa(x[:, :4], is_causal=True, cache=c2)
    torch.testing.assert_close(
        flash(x[:, 4:6], is_causal=True, cache=c1)[0],
        sdpa(x[:, 4:6], is_causal=True, cache=c2)[0],
        rtol=1e-5,
        atol=1e-5,
    )


def test_fused_and_separate_projections_agree():
    """Long inputs take the fused QKV matmul, short ones the three separate projections."""
    from attnlab.nn.multihead import FUSE_MIN_TOKENS

    m = _mha(21, 16, 4, num_kv_heads=2)
    x = _x(22, 1, FUSE_MIN_TOKENS + 1, 16)
    long_out, _ = m(x, is_causal=True)
    short_rows = [m(x[:, : t + 1], is_causal=True)[0][:, -1] for t in (0, 5, 9)]  # fewer tokens: separate
    for t, row in zip((0, 5, 9), short_rows):
        torch.testing.assert_close(row, long_out[:, t], rtol=0, atol=1e-12)


def test_no_key_is_an_error_unless_empty_rows_zero():
    mha = MultiHeadAttention(BlockConfig(8, 2, 16), cross_attention=True)
    x, memory = torch.randn(1, 3, 8), torch.randn(1, 0, 8)
    with pytest.raises(ValueError, match=r"^x_kv\b.*\bT_k=0\b"):
        mha(x, memory)
    out, _ = mha(x, memory, empty_rows="zero")
    assert out.shape == (1, 3, 8) and torch.equal(out, mha.out_proj.bias.expand(1, 3, 8))


def test_expand_kv_repeats_each_kv_head_for_its_query_group():
    """The one GQA expansion: kv head j serves query heads j*g .. (j+1)*g - 1, as ref's np.repeat."""
    from attnlab.nn.multihead import expand_kv

    k = _x(11, 2, 3, 5, 4)  # [B, h_kv=3, T, d]
    full = expand_kv(k, 6)  # [B, 6, T, d]
    assert full.shape == (2, 6, 5, 4)
    for head in range(6):
        assert torch.equal(full[:, head], k[:, head // 2])
    assert expand_kv(k, 3) is k  # no copy without GQA
    np.testing.assert_array_equal(full.numpy(), np.repeat(k.numpy(), 2, axis=1))


@pytest.mark.parametrize(
    "kind,window,wanted,mask,t_q,want",
    [
        ("sdpa", None, False, None, 4, "sdpa"),
        ("sdpa", None, True, None, 4, "explicit"),
        ("explicit", None, False, None, 4, "explicit"),
        ("flash", None, False, None, 4, "flash"),
        ("flash", None, True, None, 4, "explicit"),
        ("linear", None, True, None, 4, "linear"),
        ("block_sparse", 2, False, None, 4, "block_sparse"),
        ("block_sparse", 2, False, torch.ones(4, 4, dtype=torch.bool), 4, "sdpa"),  # a padding mask
        ("block_sparse", 2, False, None, 1, "sdpa"),  # one decoding query: nothing to skip
    ],
)
def test_the_kernel_is_chosen_in_one_place(kind, window, wanted, mask, t_q, want):
    m = _mha(0, 16, 4, attention=kind, window=window)
    assert m._kernel(mask, t_q, wanted) == want


@pytest.mark.parametrize("kind", ["sdpa", "flash", "block_sparse", "linear"])
def test_every_kernel_with_gqa_agrees_with_the_explicit_path(kind):
    """GQA through each kernel (the fused one shares K/V heads itself, the others expand them
    with expand_kv) gives the explicit path's output."""
    m = _mha(3, 32, 8, num_kv_heads=2, attention=kind, window=3 if kind == "block_sparse" else None)
    x = _x(4, 2, 9, 32)
    with torch.no_grad():
        fast, _ = m(x, is_causal=True)
        slow, w = m(x, is_causal=True, need_weights=True)
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-10)
    assert w.shape == (2, 8, 9, 9)
