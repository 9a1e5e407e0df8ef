"""ref.linear_attention and ref.selective_scan against independent computations: softmax-free
attention written per query with Python sums, and the scan's closed form for constant step sizes."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab import ref


def _phi(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def test_linear_attention_matches_per_query_weighted_average(rng):
    # Z_i = sum_j w_ij v_j / sum_j w_ij with w_ij = phi(q_i).phi(k_j) over the keys query i sees
    t_q, t_k, d = 4, 7, 3
    q, k, v = rng.normal(size=(t_q, d)), rng.normal(size=(t_k, d)), rng.normal(size=(t_k, 2))
    for causal in (False, True):
        z = ref.linear_attention(q, k, v, causal=causal)
        for i in range(t_q):
            seen = range(t_k - t_q + i + 1) if causal else range(t_k)
            w = np.array([_phi(q[i]) @ _phi(k[j]) for j in seen])
            np.testing.assert_allclose(z[i], w @ v[list(seen)] / w.sum(), rtol=0, atol=1e-12)


def test_elu_feature_map_is_elu_plus_one_and_positive():
    x = np.array([-30.0, -1.0, 0.0, 0.5, 3.0])
    np.testing.assert_allclose(ref.elu_feature_map(x), [np.exp(-30.0), np.exp(-1.0), 1.0, 1.5, 4.0])
    assert (ref.elu_feature_map(x) > 0).all()


def test_selective_scan_with_constant_step_is_an_exponential_filter(rng):
    # delta, A, B, C constant in time: y_t = sum_{s<=t} sum_n C_n exp((t-s) delta A_cn) delta B_n x_s
    b, t, d, n = 2, 9, 3, 4
    x = rng.normal(size=(b, t, d))
    dt = 0.3
    a = -rng.uniform(0.1, 2.0, size=(d, n))
    bb, cc = rng.normal(size=n), rng.normal(size=n)
    y = ref.selective_scan(
        x, np.full((b, t, d), dt), a, np.broadcast_to(bb, (b, t, n)), np.broadcast_to(cc, (b, t, n))
    )
    expected = np.zeros((b, t, d))
    for ti in range(t):
        for s in range(ti + 1):
            decay = np.exp((ti - s) * dt * a)  # [d, n]
            expected[:, ti] += (decay * (dt * bb * cc)).sum(axis=-1) * x[:, s]
    np.testing.assert_allclose(y, expected, rtol=0, atol=1e-12)


def test_selective_scan_skip_connection_adds_d_x(rng):
    b, t, d, n = 1, 5, 2, 3
    args = (rng.normal(size=(b, t, d)), rng.uniform(0.1, 1, size=(b, t, d)), -rng.uniform(size=(d, n)))
    bc = (rng.normal(size=(b, t, n)), rng.normal(size=(b, t, n)))
    dd = rng.normal(size=d)
    np.testing.assert_allclose(
        ref.selective_scan(*args, *bc, dd), ref.selective_scan(*args, *bc) + dd * args[0], atol=1e-14
    )


@pytest.mark.parametrize(
    "change, message",
    [
        ({"delta": np.zeros((1, 3, 2))}, "delta must be > 0"),
        ({"A": np.ones((2, 4))}, "A must be <= 0"),
        ({"A": -np.ones((3, 4))}, "A must be [d, n] with d=2"),
        ({"B": np.ones((1, 3, 5))}, "B must be [B, T, n] = [1, 3, 4]"),
        ({"x": np.full((1, 3, 2), np.nan)}, "x contains NaN"),
        ({"D": np.ones(3)}, "D must be [d] = [2]"),
    ],
)
def test_selective_scan_bad_input_is_one_line(change, message):
    args = {
        "x": np.ones((1, 3, 2)),
        "delta": np.ones((1, 3, 2)),
        "A": -np.ones((2, 4)),
        "B": np.ones((1, 3, 4)),
        "C": np.ones((1, 3, 4)),
        "D": None,
    }
    args.update(change)
    with pytest.raises(ValueError, match=None) as err:
        ref.selective_scan(**args)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_linear_attention_bad_input():
    with pytest.raises(ValueError, match=r"^k\b.*\bd=3\b.*\bq\b.*\bd=2\b"):
        ref.linear_attention(np.ones((2, 2)), np.ones((2, 3)), np.ones((2, 1)))
    with pytest.raises(ValueError, match="q contains NaN"):
        ref.linear_attention(np.full((2, 2), np.nan), np.ones((2, 2)), np.ones((2, 1)))
    with pytest.raises(ValueError, match="needs T_k >= T_q"):
        ref.linear_attention(np.ones((3, 2)), np.ones((2, 2)), np.ones((2, 1)), causal=True)
