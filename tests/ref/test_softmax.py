"""softmax / log_softmax / online_softmax against torch, and their numerical-stability guarantees."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import ref

# Stated tolerances: max absolute difference from the independent implementation.
TOL = {np.float64: 1e-10, np.float32: 1e-5}
DTYPES = [np.float64, np.float32]


def logits(seed: int, shape: tuple[int, ...], dtype, scale: float = 3.0) -> np.ndarray:
    return (np.random.default_rng(seed).normal(size=shape) * scale).astype(dtype)


shapes = st.lists(st.integers(1, 7), min_size=1, max_size=4).map(tuple)


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shape=shapes, data=st.data())
def test_softmax_and_log_softmax_match_torch(dtype, seed, shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    x = logits(seed, shape, dtype)
    got, got_log = ref.softmax(x, axis=axis), ref.log_softmax(x, axis=axis)
    t = torch.from_numpy(x)
    assert got.dtype == dtype and got_log.dtype == dtype
    assert np.max(np.abs(got - torch.softmax(t, dim=axis).numpy())) <= TOL[dtype]
    assert np.max(np.abs(got_log - torch.log_softmax(t, dim=axis).numpy())) <= TOL[dtype]
    np.testing.assert_allclose(got.sum(axis=axis), 1.0, atol=TOL[dtype])
    assert np.all(got >= 0) and np.all(got_log <= 0)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shape=shapes, block=st.integers(1, 9))
def test_online_softmax_equals_softmax(seed, shape, block):
    x = logits(seed, shape, np.float64, scale=10.0)
    assert np.max(np.abs(ref.online_softmax(x, block=block) - ref.softmax(x))) <= 1e-12


def test_online_softmax_streams_a_growing_max():
    # the running max changes in every block: 1, then 5, then 50
    x = np.array([1.0, 0.0, 5.0, 2.0, 50.0, 49.0])
    expected = np.exp(x - 50.0) / np.exp(x - 50.0).sum()
    np.testing.assert_allclose(ref.online_softmax(x, block=2), expected, rtol=1e-14, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_does_not_overflow_at_logits_of_1e4(dtype):
    x = np.array([[1e4, 1e4 - 1.0, -1e4], [1e4, 1e4, 1e4]], dtype=dtype)
    with np.errstate(over="raise", invalid="raise"):
        w = ref.softmax(x)
        lw = ref.log_softmax(x)
        ow = ref.online_softmax(x, block=1)
    e = np.exp(-1.0)
    np.testing.assert_allclose(w[0], [1 / (1 + e), e / (1 + e), 0.0], atol=TOL[dtype])
    np.testing.assert_allclose(w[1], [1 / 3] * 3, atol=TOL[dtype])
    np.testing.assert_allclose(ow, w, atol=TOL[dtype])
    np.testing.assert_allclose(lw[0, :2], [-np.log1p(e), -1 - np.log1p(e)], atol=10 * TOL[dtype])
    assert lw[0, 2] == pytest.approx(-2e4 - np.log1p(e), rel=1e-6)
    assert np.all(np.isfinite(w)) and np.all(np.isfinite(lw))


def test_naive_softmax_would_overflow_where_ref_does_not():
    # the fact the stable form guards against: exp(1e4) is inf in float64
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.exp(np.array([1e4, 0.0])) / np.exp(np.array([1e4, 0.0])).sum()
    assert np.isnan(naive[0])
    np.testing.assert_array_equal(ref.softmax(np.array([1e4, 0.0])), [1.0, 0.0])


def test_softmax_is_shift_invariant_and_keeps_order(rng):
    x = rng.normal(size=(4, 9)) * 5
    np.testing.assert_allclose(ref.softmax(x + 123.0), ref.softmax(x), atol=1e-14)
    np.testing.assert_array_equal(
        np.argsort(ref.softmax(x), axis=-1, kind="stable"), np.argsort(x, axis=-1, kind="stable")
    )
