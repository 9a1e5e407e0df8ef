"""nn.block_sparse_attention: forward and backward against F.scaled_dot_product_attention with the
reference's boolean mask (float32, <= 1e-5) at a length that is no multiple of the block size, for
windows of 1, odd and >= T, Longformer and strided patterns; the tile plan against the dense mask;
the tiled fallback; bad input. Every compiled call shares one compiled kernel (compiled once per
process: tens of seconds cold, seconds from Inductor's cache)."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import ref
from attnlab.nn import block_sparse_attention, sparse
from attnlab.nn.sparse import BLOCK_SIZE, block_plan, make_pattern

T = 300  # not a multiple of BLOCK_SIZE = 128
PATTERNS = [
    {"causal": True, "window": 1},
    {"causal": True, "window": 17},
    {"causal": True, "window": 1000},  # >= T
    {"causal": True},
    {},
    {"window": 9},  # non-causal local
    {"window": 9, "global_tokens": [0, 5, 299]},  # Longformer
    {"causal": True, "window": 9, "global_tokens": [0, 130]},
    {"causal": True, "stride": 256},  # Child et al., stride a multiple of the block
    {"causal": True, "stride": 16},  # stride dividing the block
    {"stride": 128},
]


def _qkv(t_q=T, t_k=T, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 3, t_q, 16, generator=g)
    k, v = torch.randn(2, 3, t_k, 16, generator=g), torch.randn(2, 3, t_k, 16, generator=g)
    return [x.requires_grad_() for x in (q, k, v)]


def _forward_backward(fn, q, k, v):
    out = fn(q, k, v)
    d_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(7))
    grads = torch.autograd.grad(out, (q, k, v), d_out)
    return (out.detach(), *grads)


def _sdpa_with_ref_mask(t_q, t_k, kwargs):
    mask = torch.from_numpy(ref.sparse_pattern_mask(t_q, t_k, **kwargs))  # [T_q, T_k]
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _assert_parity(got, want, tol=1e-5):
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
        err = (a - b).abs().max().item()
        assert err <= tol, f"{name}: max error {err:.2e}"


@pytest.mark.slow
@pytest.mark.parametrize("kwargs", PATTERNS, ids=str)
def test_compiled_parity_with_sdpa_under_the_boolean_mask(kwargs):
    q, k, v = _qkv()
    got = _forward_backward(lambda *a: block_sparse_attention(*a, **kwargs), q, k, v)
    _assert_parity(got, _forward_backward(_sdpa_with_ref_mask(T, T, kwargs), q, k, v))
    if shutil.which("c++") or shutil.which("g++"):
        assert sparse.compile_fallback_reason() is None  # the compiled path ran


@pytest.mark.slow
def test_compiled_parity_when_queries_are_the_last_keys_and_lengths_change():
    # 200 queries over 433 keys (lower-right aligned), then another length: same kernel, no crash
    for t_q, t_k in ((200, 433), (T + 257, T + 257)):
        kwargs = {"causal": True, "window": 30, "global_tokens": [3]}
        q, k, v = _qkv(t_q, t_k, seed=1)
        got = _forward_backward(lambda *a, kw=kwargs: block_sparse_attention(*a, **kw), q, k, v)
        _assert_parity(got, _forward_backward(_sdpa_with_ref_mask(t_q, t_k, kwargs), q, k, v))


@pytest.mark.parametrize("kwargs", PATTERNS[:3] + PATTERNS[6:9], ids=str)
def test_tiled_kernel_parity(kwargs):
    q, k, v = _qkv()
    got = _forward_backward(lambda *a: block_sparse_attention(*a, **kwargs, kernel="tiled"), q, k, v)
    _assert_parity(got, _forward_backward(_sdpa_with_ref_mask(T, T, kwargs), q, k, v))


def test_float64_takes_the_tiled_kernel_exactly():
    q, k, v = (x.detach().double() for x in _qkv())
    got = block_sparse_attention(q, k, v, causal=True, window=17)
    want = F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.from_numpy(ref.sliding_window_mask(T, window=17))
    )
    assert (got - want).abs().max().item() <= 1e-10


def test_a_failed_compile_falls_back_and_says_why_once(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("no C++ compiler found\nsecond line")

    monkeypatch.setitem(sparse._state, "kernel", broken)
    monkeypatch.setitem(sparse._state, "fallback", None)
    q, k, v = (x.detach() for x in _qkv())
    want = F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.from_numpy(ref.sliding_window_mask(T, window=5))
    )
    with caplog.at_level(logging.WARNING, logger="attnlab.nn.sparse"):
        for _ in range(3):
            got = block_sparse_attention(q, k, v, causal=True, window=5)
            assert (got - want).abs().max().item() <= 1e-5
    assert sparse.compile_fallback_reason() == "RuntimeError: no C++ compiler found"
    assert len(caplog.records) == 1 and "no C++ compiler found" in caplog.records[0].getMessage()


@settings(max_examples=80, deadline=None)
@given(
    t_q=st.integers(1, 400),
    extra=st.integers(0, 300),
    causal=st.booleans(),
    window=st.none() | st.integers(1, 400),
    stride=st.none() | st.sampled_from([8, 64, 128, 256, 384]),
    n_global=st.none() | st.integers(0, 3),
)
def test_tile_plan_keeps_every_allowed_tile_and_marks_full_ones_exactly(
    t_q, extra, causal, window, stride, n_global
):
    t_k = t_q + extra
    glob = None if n_global is None else sorted({(97 * g + 13) % t_k for g in range(n_global)})
    kw = {"causal": causal, "window": window, "global_tokens": glob, "stride": stride}
    partial, full = block_plan(make_pattern(t_q, t_k, **kw))
    dense = ref.sparse_pattern_mask(t_q, t_k, **kw)
    n_q, n_k = partial.shape
    pad = np.zeros((n_q * BLOCK_SIZE, n_k * BLOCK_SIZE), dtype=bool)
    pad[:t_q, :t_k] = dense
    tiles = pad.reshape(n_q, BLOCK_SIZE, n_k, BLOCK_SIZE).swapaxes(1, 2)  # [n_q, n_k, bs, bs]
    valid = np.zeros_like(pad)
    valid[:t_q, :t_k] = True
    valid = valid.reshape(n_q, BLOCK_SIZE, n_k, BLOCK_SIZE).swapaxes(1, 2)
    any_allowed = tiles.any(axis=(2, 3))
    all_allowed = (tiles | ~valid).all(axis=(2, 3))
    assert not (full.numpy() & partial.numpy()).any()
    assert ((partial | full).numpy() >= any_allowed).all()  # nothing allowed is skipped
    # full tiles are exactly the entirely allowed ones, except those filled only by strided keys at
    # the band's edge, which are (correctly) treated as partial; without a stride it is exact
    assert not (full.numpy() & ~(all_allowed & any_allowed)).any()
    if stride is None:
        np.testing.assert_array_equal(full.numpy(), all_allowed & any_allowed)


def test_a_window_keeps_a_number_of_tiles_linear_in_t():
    # causal window 256 at T = 16384: each row of query tiles keeps at most 4 of the 128 key tiles
    partial, full = block_plan(make_pattern(16384, 16384, causal=True, window=256))
    kept = (partial | full).sum(-1)
    assert kept.max() <= 4 and (partial | full).sum() <= 4 * 128


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"window": 0}, "window must be a positive integer, got 0"),
        ({"global_tokens": [0, T]}, f"global_tokens must lie in 0..{T - 1}"),
        ({"stride": 100}, "stride must divide the block size 128 or be a multiple of it"),
        ({"kernel": "fast"}, "kernel must be one of"),
    ],
)
def test_bad_input_is_a_one_line_error(kwargs, message):
    q, k, v = (x.detach() for x in _qkv())
    with pytest.raises(ValueError) as err:
        block_sparse_attention(q, k, v, **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_nan_and_shape_errors():
    q, k, v = (x.detach() for x in _qkv())
    with pytest.raises(ValueError, match=r"^k\b.*\bNaN or infinite\b.*\[2, 3, 300, 16\]"):
        block_sparse_attention(q, torch.full_like(k, float("nan")), v)
    with pytest.raises(ValueError, match="needs T_k >= T_q"):
        block_sparse_attention(q, k[..., :10, :], v[..., :10, :])
    with pytest.raises(ValueError, match=r"^q\b.*\[B, h, T, d\].*\[3, 300, 16\]$"):
        block_sparse_attention(q[0], k, v)


_CAPPED_THEN_NOT = """
import sys, torch, torch.nn.functional as F
from attnlab import nn
from attnlab.nn.masks import sparse_pattern_mask
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, 2, 300, 16, generator=g) for _ in range(3))  # [B, h, T, d]
z = nn.block_sparse_attention(q, k, v, window=9, global_tokens=[0, 150])
mask = sparse_pattern_mask(300, 300, window=9, global_tokens=[0, 150])  # [T, T]
want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
print((z - want).abs().max().item())
"""


@pytest.mark.slow  # (not rerun under the caps: it sets ATEN_CPU_CAPABILITY itself)
def test_a_kernel_compiled_under_a_cap_is_never_reused_without_it(tmp_path):
    """Inductor's cache does not key on the CPU capability: a kernel compiled under
    ATEN_CPU_CAPABILITY=avx2 and reused by an AVX-512 process gave errors of 2.4. attnlab keeps one
    cache folder per capability (attnlab._compile), so both processes agree with SDPA."""
    import os
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    base["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path)
    for extra in ({"ATEN_CPU_CAPABILITY": "avx2"}, {}):
        done = subprocess.run(
            [sys.executable, "-c", _CAPPED_THEN_NOT],
            env=base | extra,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert float(done.stdout.split()[-1]) <= 1e-5, (extra, done.stdout)
    assert any(p.name == "attnlab-isa-avx2" for p in tmp_path.iterdir())


def test_the_inductor_cache_is_named_for_the_capability_and_never_nested(monkeypatch, tmp_path):
    from attnlab._compile import PREFIX, isolate_inductor_cache

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    first = isolate_inductor_cache()
    assert first == str(tmp_path / (PREFIX + torch.backends.cpu.get_cpu_capability().lower()))
    assert isolate_inductor_cache() == first  # called again: the same folder, not one inside it
