"""Masks: exact patterns, lower-right causal alignment (and how torch's is_causal differs), padding,
sliding windows, and the empty-row rule."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import ref


def test_causal_mask_square_is_the_lower_triangle():
    np.testing.assert_array_equal(ref.causal_mask(4), np.tril(np.ones((4, 4), dtype=bool)))


def test_causal_mask_is_aligned_to_the_lower_right():
    # 2 queries that are the last 2 of 4 positions: query 0 is position 2, query 1 is position 3
    np.testing.assert_array_equal(ref.causal_mask(2, 4), [[1, 1, 1, 0], [1, 1, 1, 1]])
    # one decoding step over a KV cache sees every cached key
    np.testing.assert_array_equal(ref.causal_mask(1, 5), np.ones((1, 5), dtype=bool))


@settings(max_examples=30, deadline=None)
@given(t_q=st.integers(1, 8), extra=st.integers(0, 8))
def test_causal_mask_matches_torch_tril_with_offset(t_q, extra):
    t_k = t_q + extra
    expected = torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q).numpy()
    np.testing.assert_array_equal(ref.causal_mask(t_q, t_k), expected)


def _qkv(seed, t_q, t_k, d=4):
    g = np.random.default_rng(seed)
    return g.normal(size=(1, t_q, d)), g.normal(size=(1, t_k, d)), g.normal(size=(1, t_k, 3))


def _torch_causal(q, k, v):
    return F.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), is_causal=True).numpy()


@pytest.mark.parametrize("t", [1, 3, 6])
def test_torch_is_causal_equals_ours_when_t_q_equals_t_k(t):
    q, k, v = _qkv(t, t, t)
    out, _ = ref.scaled_dot_product_attention(q, k, v, ref.causal_mask(t))
    assert np.max(np.abs(out - _torch_causal(q, k, v))) <= 1e-12


def test_torch_is_causal_is_upper_left_aligned_so_differs_when_t_q_lt_t_k():
    q, k, v = _qkv(0, 2, 5)
    ours, _ = ref.scaled_dot_product_attention(q, k, v, ref.causal_mask(2, 5))
    upper_left = np.tril(np.ones((2, 5), dtype=bool))  # query i sees keys 0..i
    theirs, _ = ref.scaled_dot_product_attention(q, k, v, upper_left)
    assert np.max(np.abs(theirs - _torch_causal(q, k, v))) <= 1e-12  # torch = upper-left
    assert np.max(np.abs(ours - _torch_causal(q, k, v))) > 1e-2  # ... which is not ours
    # ours equals torch's explicit lower-right mask
    lower_right = torch.ones(2, 5, dtype=torch.bool).tril(diagonal=3)
    t_out = F.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), attn_mask=lower_right)
    assert np.max(np.abs(ours - t_out.numpy())) <= 1e-12


def test_padding_mask_exact_values_and_shape():
    m = ref.padding_mask(np.array([3, 1, 4]), 4)
    assert m.shape == (3, 1, 4) and m.dtype == bool
    np.testing.assert_array_equal(m[:, 0], [[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])


def test_padded_keys_get_zero_weight_and_do_not_change_the_output(rng):
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 2))
    lengths = np.array([2, 5])
    out, w = ref.scaled_dot_product_attention(q, k, v, ref.padding_mask(lengths, 5))
    assert np.all(w[0, :, 2:] == 0)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-12)
    # the same as attending over the unpadded prefix only
    short, _ = ref.scaled_dot_product_attention(q[:1], k[:1, :2], v[:1, :2])
    np.testing.assert_allclose(out[:1], short, atol=1e-12)
    # changing the padded keys/values changes nothing
    k2, v2 = k.copy(), v.copy()
    k2[0, 2:], v2[0, 2:] = 100.0, -100.0
    out2, _ = ref.scaled_dot_product_attention(q, k2, v2, ref.padding_mask(lengths, 5))
    np.testing.assert_array_equal(out2, out)


def test_sliding_window_mask_exact_values():
    np.testing.assert_array_equal(
        ref.sliding_window_mask(5, 5, window=2).astype(int),
        [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]],
    )
    # lower-right aligned like causal_mask: the last 2 of 6 positions, window 3
    np.testing.assert_array_equal(
        ref.sliding_window_mask(2, 6, window=3).astype(int), [[0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1]]
    )


@settings(max_examples=30, deadline=None)
@given(t_q=st.integers(1, 8), extra=st.integers(0, 6), window=st.integers(1, 10))
def test_sliding_window_is_causal_band_and_large_window_is_causal(t_q, extra, window):
    t_k = t_q + extra
    m = ref.sliding_window_mask(t_q, t_k, window)
    band = (torch.ones(t_q, t_k).tril(t_k - t_q) - torch.ones(t_q, t_k).tril(t_k - t_q - window)).bool()
    np.testing.assert_array_equal(m, band.numpy())
    assert np.all(m.sum(-1) == np.minimum(window, np.arange(t_q) + t_k - t_q + 1))
    if window >= t_k:
        np.testing.assert_array_equal(m, ref.causal_mask(t_q, t_k))


def test_empty_row_error_names_the_row():
    q, k, v = np.ones((1, 3, 2)), np.ones((1, 4, 2)), np.ones((1, 4, 2))
    mask = np.ones((1, 3, 4), dtype=bool)
    mask[0, 2] = False
    with pytest.raises(ValueError, match=r"query row \(0, 2\)"):
        ref.scaled_dot_product_attention(q, k, v, mask)


def test_empty_row_zero_gives_torch_convention_never_nan(rng):
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))
    mask = rng.random((2, 3, 5)) < 0.6
    mask[0, 1] = False
    mask[1, 0] = False
    out, w = ref.scaled_dot_product_attention(q, k, v, mask, empty_rows="zero")
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(w))
    np.testing.assert_array_equal(out[0, 1], 0.0)
    np.testing.assert_array_equal(w[1, 0], 0.0)
    t_out = F.scaled_dot_product_attention(
        *map(torch.from_numpy, (q, k, v)), attn_mask=torch.from_numpy(mask)
    )
    assert np.max(np.abs(out - t_out.numpy())) <= 1e-10
    rows = w.sum(-1)
    np.testing.assert_allclose(rows[mask.any(-1)], 1.0, atol=1e-12)
