"""ref.sparse_pattern_mask (sliding window, Longformer, Child et al. strided) against the patterns'
definitions written entry by entry."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import ref


def _by_definition(t_q, t_k, causal, window, global_tokens, stride):
    m = np.zeros((t_q, t_k), dtype=bool)
    for i in range(t_q):
        p = t_k - t_q + i
        for j in range(t_k):
            if causal and j > p:
                continue
            local = window if window is not None else stride
            near = local is None or abs(p - j) <= local - 1
            strided = stride is not None and (p - j) % stride == 0
            glob = global_tokens is not None and (p in global_tokens or j in global_tokens)
            m[i, j] = near or strided or glob
    return m


@settings(max_examples=60, deadline=None)
@given(
    t_q=st.integers(1, 12),
    extra=st.integers(0, 5),
    causal=st.booleans(),
    window=st.none() | st.integers(1, 20),
    stride=st.none() | st.integers(1, 6),
    n_global=st.none() | st.integers(0, 3),
)
def test_sparse_pattern_mask_matches_the_definition(t_q, extra, causal, window, stride, n_global):
    t_k = t_q + extra
    glob = None if n_global is None else sorted({(7 * g + 3) % t_k for g in range(n_global)})
    got = ref.sparse_pattern_mask(t_q, t_k, causal=causal, window=window, global_tokens=glob, stride=stride)
    np.testing.assert_array_equal(got, _by_definition(t_q, t_k, causal, window, glob, stride))
    assert got.any(axis=-1).all()  # every query keeps its own position


def test_causal_window_is_the_sliding_window_mask():
    for w in (1, 3, 10):
        np.testing.assert_array_equal(
            ref.sparse_pattern_mask(7, causal=True, window=w), ref.sliding_window_mask(7, window=w)
        )


def test_longformer_row_counts():
    # window 3 non-causal: 5 keys in the middle, global token 0 sees all 10 and is seen by all
    m = ref.longformer_mask(10, 3, [0])
    assert m[0].sum() == 10 and m[:, 0].all()
    assert m[5].sum() == 5 + 1  # keys 3..7 and the global key 0


def test_strided_pattern_of_child_et_al():
    # stride 3, causal: position 7 sees 5, 6, 7 (local) and 4, 1 (every 3rd)
    m = ref.strided_mask(8, 3)
    assert np.flatnonzero(m[7]).tolist() == [1, 4, 5, 6, 7]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"window": 0}, "window must be a positive integer"),
        ({"stride": -2}, "stride must be a positive integer"),
        ({"global_tokens": [0, 9]}, "global_tokens must lie in 0..4"),
        ({"global_tokens": [[1]]}, "global_tokens must be a 1-D list"),
    ],
)
def test_bad_patterns_are_one_line_errors(kwargs, message):
    with pytest.raises(ValueError) as err:
        ref.sparse_pattern_mask(5, **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)
