"""Tiled attention (online softmax, block skipping) against the naive reference and independent NumPy."""

from __future__ import annotations

import numpy as np
import pytest
import threadpoolctl
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import ref
from attnlab.ref import flash
from attnlab.ref.flash import key_block_range

SEEDS = st.integers(0, 2**32 - 1)


def _naive_mask(t_q, t_k, causal, window, extra):
    """The mask the naive path needs, built from ref's own mask functions (not from flash code)."""
    m = np.ones((t_q, t_k), dtype=bool)
    if window is not None:
        m = ref.sliding_window_mask(t_q, t_k, window)
    elif causal:
        m = ref.causal_mask(t_q, t_k)
    return m if extra is None else m & extra


@settings(max_examples=60, deadline=None)
@given(
    seed=SEEDS,
    lead=st.sampled_from([(), (2,), (2, 3)]),
    t_q=st.integers(1, 40),
    t_k=st.integers(1, 40),
    d_k=st.integers(1, 8),
    d_v=st.integers(1, 8),
    block_q=st.integers(1, 50),
    block_k=st.integers(1, 50),
    kind=st.sampled_from(["none", "causal", "window"]),
    window=st.integers(1, 12),
    masked=st.booleans(),
    scaled=st.booleans(),
)
def test_equals_naive_attention_for_any_blocks(
    seed, lead, t_q, t_k, d_k, d_v, block_q, block_k, kind, window, masked, scaled
):
    g = np.random.default_rng(seed)
    q = g.normal(size=lead + (t_q, d_k))
    k = g.normal(size=lead + (t_k, d_k))
    v = g.normal(size=lead + (t_k, d_v))
    extra = (g.random(lead + (t_q, t_k)) < 0.7) if masked else None
    causal, win = kind == "causal", (window if kind == "window" else None)
    scale = float(g.uniform(0.2, 3.0)) if scaled else None
    want, _ = ref.scaled_dot_product_attention(
        q, k, v, _naive_mask(t_q, t_k, causal, win, extra), scale=scale, empty_rows="zero"
    )
    got, lse = ref.flash_attention(
        q,
        k,
        v,
        mask=extra,
        causal=causal,
        window=win,
        block_q=block_q,
        block_k=block_k,
        scale=scale,
        return_lse=True,
        empty_rows="zero",
    )
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
    # L = log sum_j exp(s_j) over the allowed keys, computed here directly
    s = (q @ np.swapaxes(k, -1, -2)) * (1 / np.sqrt(d_k) if scale is None else scale)
    allowed = np.broadcast_to(_naive_mask(t_q, t_k, causal, win, extra), s.shape)
    with np.errstate(divide="ignore"):
        want_lse = np.log(np.where(allowed, np.exp(s), 0.0).sum(-1))
    np.testing.assert_allclose(lse, want_lse, rtol=0, atol=1e-10)


def test_large_logits_stay_finite_and_exact():
    g = np.random.default_rng(0)
    q, k, v = g.normal(size=(3, 70, 4)) * 40, g.normal(size=(3, 90, 4)) * 40, g.normal(size=(3, 90, 5))
    want, _ = ref.scaled_dot_product_attention(q, k, v)
    got = ref.flash_attention(q, k, v, block_q=16, block_k=13)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)


def test_float32_stays_float32_and_close():
    g = np.random.default_rng(1)
    q, k, v = (g.normal(size=(2, 4, 65, 16)).astype(np.float32) for _ in range(3))
    got = ref.flash_attention(q, k, v, causal=True, block_q=32, block_k=24)
    want, _ = ref.scaled_dot_product_attention(
        q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), ref.causal_mask(65)
    )
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


def test_mask_leading_dims_broadcast_with_heads():
    g = np.random.default_rng(2)
    q, k, v = g.normal(size=(3, 10, 4)), g.normal(size=(3, 12, 4)), g.normal(size=(3, 12, 4))  # [h, T, d]
    pad = ref.padding_mask(np.array([12, 5]), 12)[:, None]  # [B=2, 1, 1, 12]
    got = ref.flash_attention(q, k, v, mask=pad, block_q=4, block_k=5)
    want, _ = ref.scaled_dot_product_attention(np.broadcast_to(q, (2, 3, 10, 4)), k, v, pad)
    assert got.shape == (2, 3, 10, 4)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    ("q_lo", "q_hi", "t_k", "offset", "causal", "window", "expected"),
    [
        (0, 128, 512, 0, True, None, (0, 128)),  # first query block: only the diagonal key block
        (384, 512, 512, 0, True, None, (0, 512)),  # last query block: all keys
        (0, 4, 10, 6, True, None, (0, 10)),  # lower-right: 4 queries are positions 6..9
        (0, 2, 10, -3, True, None, (0, 0)),  # T_q > T_k: queries at positions -3, -2 see nothing
        (256, 384, 512, 0, True, 64, (193, 384)),  # window 64: first query (256) sees keys 193..256
        (0, 128, 512, 0, False, None, (0, 512)),
    ],
)
def test_key_block_range_skips_blocks(q_lo, q_hi, t_k, offset, causal, window, expected):
    assert key_block_range(q_lo, q_hi, t_k, offset, causal, window) == expected


def test_causal_never_reads_keys_above_the_diagonal():
    """Keys and values after the last query's position cannot change the output (blocks skipped)."""
    g = np.random.default_rng(3)
    q, k, v = g.normal(size=(2, 64, 8)), g.normal(size=(2, 64, 8)), g.normal(size=(2, 64, 8))
    out = ref.flash_attention(q[:, :32], k, v, causal=True, block_q=16, block_k=16)  # T_q=32, T_k=64
    out_prefix = ref.flash_attention(q[:, :32], k[:, :64], v[:, :64], causal=True, block_q=16, block_k=16)
    np.testing.assert_array_equal(out, out_prefix)
    # lower-right alignment: the 32 queries are positions 32..63, so query 0 sees keys 0..32
    want, _ = ref.scaled_dot_product_attention(q[:, :1], k[:, :33], v[:, :33])
    np.testing.assert_allclose(out[:, :1], want, rtol=0, atol=1e-12)


def test_empty_row_is_an_error_unless_zero_requested():
    g = np.random.default_rng(4)
    q, k, v = g.normal(size=(5, 4)), g.normal(size=(3, 4)), g.normal(size=(3, 2))
    with pytest.raises(ValueError, match=r"query row \(0,\)"):
        ref.flash_attention(q, k, v, causal=True)  # T_q=5 > T_k=3: rows 0, 1 see no key
    with pytest.raises(ValueError, match=r"query row \(3,\)"):  # row index counted across blocks
        ref.flash_attention(q, k, v, mask=np.array([True, True, True, False, True])[:, None], block_q=2)
    out, lse = ref.flash_attention(q, k, v, causal=True, return_lse=True, empty_rows="zero")
    np.testing.assert_array_equal(out[:2], 0.0)
    assert np.all(np.isneginf(lse[:2])) and np.all(np.isfinite(lse[2:]))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(k=np.zeros((3, 5))), "k has d_k=5 but q has d_k=4"),
        (dict(v=np.zeros((2, 4))), "v has T_k=2 but k has T_k=3"),
        (dict(mask=np.ones((2, 3))), "mask must be boolean"),
        (dict(mask=np.ones((4, 3), dtype=bool)), r"mask of shape \[4, 3\] does not broadcast"),
        (dict(block_q=0), "block_q must be a positive integer"),
        (dict(workers=0), "workers must be a positive integer"),
        (dict(window=-1), "window must be a positive integer"),
        (dict(q=np.full((2, 4), np.nan)), "q contains NaN"),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    args = dict(q=np.zeros((2, 4)), k=np.zeros((3, 4)), v=np.zeros((3, 4)))
    args.update(kwargs)
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    with pytest.raises(ValueError, match=match):
        ref.flash_attention(q, k, v, **args)


def test_leading_dims_that_do_not_broadcast():
    with pytest.raises(ValueError, match=r"\bleading\b.*\bq \[2, 3, 4\].*\bk \[3, 3, 4\]"):
        ref.flash_attention(np.zeros((2, 3, 4)), np.zeros((3, 3, 4)), np.zeros((3, 3, 4)))


@pytest.mark.parametrize("kind", [dict(), dict(causal=True), dict(window=5)])
def test_any_number_of_workers_gives_the_same_bits(kind):
    """Query blocks are independent: 1, 2 or 7 threads compute each block identically."""
    g = np.random.default_rng(5)
    q, k, v = (g.normal(size=(2, 3, 45, 8)) for _ in range(3))
    one = ref.flash_attention(q, k, v, block_q=8, block_k=8, workers=1, return_lse=True, **kind)
    for workers in (2, 7):
        many = ref.flash_attention(q, k, v, block_q=8, block_k=8, workers=workers, return_lse=True, **kind)
        np.testing.assert_array_equal(many[0], one[0])
        np.testing.assert_array_equal(many[1], one[1])


def test_blas_threads_are_restored_after_the_call_and_after_an_error():
    before = [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]
    assert before, "NumPy's BLAS is visible to threadpoolctl"
    g = np.random.default_rng(6)
    q, k, v = g.normal(size=(40, 4)), g.normal(size=(30, 4)), g.normal(size=(30, 4))
    ref.flash_attention(q, k, v, block_q=8, block_k=8)
    with pytest.raises(ValueError, match="query row"):
        ref.flash_attention(q, k, v, causal=True, block_q=8)  # T_q > T_k: the first rows see no key
    after = [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]
    assert after == before


def test_the_tiles_run_on_one_blas_thread(monkeypatch):
    """Inside the tile loop every BLAS library is limited to one thread (attnlab._blas says why)."""
    seen = []
    run = flash._Tiles.run

    def spy(self, *args):
        seen.append(
            {lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"}
        )
        return run(self, *args)

    monkeypatch.setattr(flash._Tiles, "run", spy)
    g = np.random.default_rng(7)
    ref.flash_attention(*(g.normal(size=(20, 4)) for _ in range(3)), block_q=8)
    assert seen == [{1}] * 3
