"""nn.linear_attention (prefix-sum parallel form and recurrent step) and nn.selective_scan (chunked
parallel scan and recurrent step) against the reference's different computations: the quadratic
textbook form of linear attention and the sequential scan. float64, <= 1e-10."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab import nn as ann
from attnlab import ref

TOL = 1e-10


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("t_q, t_k, chunk", [(37, 37, 8), (37, 50, 16), (5, 5, 64), (64, 64, 64), (9, 9, 1)])
def test_linear_attention_matches_the_quadratic_form(rng, causal, t_q, t_k, chunk):
    q, k = rng.normal(size=(2, 3, t_q, 8)), rng.normal(size=(2, 3, t_k, 8))
    v = rng.normal(size=(2, 3, t_k, 5))
    got = ann.linear_attention(_t(q), _t(k), _t(v), causal=causal, chunk=chunk).numpy()
    np.testing.assert_allclose(got, ref.linear_attention(q, k, v, causal=causal), rtol=0, atol=TOL)


def test_linear_attention_recurrent_form_equals_the_parallel_form(rng):
    q, k, v = (_t(rng.normal(size=(2, 3, 29, d))) for d in (8, 8, 6))
    parallel = ann.linear_attention(q, k, v, causal=True, chunk=8)
    state, steps = None, []
    for t in range(29):
        z, state = ann.linear_attention_step(q[..., t, :], k[..., t, :], v[..., t, :], state)
        steps.append(z)
    torch.testing.assert_close(torch.stack(steps, dim=-2), parallel, rtol=0, atol=TOL)
    assert state[0].shape == (2, 3, 8, 6) and state[1].shape == (2, 3, 8)  # O(1) in T


def test_linear_attention_gradients_flow(rng):
    q, k, v = (_t(rng.normal(size=(1, 1, 7, 3))).requires_grad_() for _ in range(3))
    assert torch.autograd.gradcheck(
        lambda a, b, c: ann.linear_attention(a, b, c, causal=True, chunk=4), (q, k, v)
    )


def _scan_inputs(rng, b=2, t=45, d=6, n=4):
    return (
        rng.normal(size=(b, t, d)),
        np.log1p(np.exp(rng.normal(size=(b, t, d)))),  # softplus: > 0
        -np.exp(rng.normal(size=(d, n))),  # A = -exp(A_log) < 0
        rng.normal(size=(b, t, n)),
        rng.normal(size=(b, t, n)),
        rng.normal(size=d),
    )


@pytest.mark.parametrize("chunk", [1, 7, 16, 128])
def test_selective_scan_matches_the_sequential_reference(rng, chunk):
    args = _scan_inputs(rng)
    got = ann.selective_scan(*(_t(a) for a in args), chunk=chunk).numpy()
    np.testing.assert_allclose(got, ref.selective_scan(*args), rtol=0, atol=TOL)
    got = ann.selective_scan(*(_t(a) for a in args[:5]), chunk=chunk).numpy()
    np.testing.assert_allclose(got, ref.selective_scan(*args[:5]), rtol=0, atol=TOL)


def test_selective_scan_prompt_then_recurrent_steps_equal_the_whole_scan(rng):
    x, delta, a, b, c, d = (_t(v) for v in _scan_inputs(rng, t=30))
    whole = ann.selective_scan(x, delta, a, b, c, d)
    y, h = ann.selective_scan(
        x[:, :19], delta[:, :19], a, b[:, :19], c[:, :19], d, chunk=8, return_state=True
    )
    ys = [y]
    for t in range(19, 30):
        y_t, h = ann.selective_scan_step(x[:, t], delta[:, t], a, b[:, t], c[:, t], d, state=h)
        ys.append(y_t[:, None])
    torch.testing.assert_close(torch.cat(ys, dim=1), whole, rtol=0, atol=TOL)


def test_selective_scan_gradients_flow(rng):
    x, delta, a, b, c, _ = (_t(v) for v in _scan_inputs(rng, b=1, t=9, d=2, n=3))
    x.requires_grad_()
    delta.requires_grad_()
    assert torch.autograd.gradcheck(lambda x_, d_: ann.selective_scan(x_, d_, a, b, c, chunk=4), (x, delta))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"delta": -1.0}, "delta must be > 0"),
        ({"A": 1.0}, "A must be <= 0"),
        ({"x": float("nan")}, "x contains NaN"),
    ],
)
def test_selective_scan_bad_input(change, message):
    args = {
        "x": torch.ones(1, 3, 2),
        "delta": torch.ones(1, 3, 2),
        "A": -torch.ones(2, 4),
        "B": torch.ones(1, 3, 4),
        "C": torch.ones(1, 3, 4),
    }
    for name, value in change.items():
        args[name] = torch.full_like(args[name], value)
    with pytest.raises(ValueError) as err:
        ann.selective_scan(**args)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_linear_attention_bad_input():
    with pytest.raises(ValueError, match="v contains NaN"):
        ann.linear_attention(torch.ones(2, 3), torch.ones(2, 3), torch.full((2, 3), float("nan")))
    with pytest.raises(ValueError, match=r"^chunk\b.*\bpositive\b.*, got 0$"):
        ann.linear_attention(torch.ones(2, 3), torch.ones(2, 3), torch.ones(2, 3), causal=True, chunk=0)


@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_at_1e30_is_the_reference(causal):
    """phi(Q) (phi(K)^T V) overflowed float32 at 1e30 (inf / inf = NaN); scaling phi(Q)'s rows,
    phi(K) and V by powers of two gives ref's float64 answer to rounding."""
    from attnlab.nn import linear_attention

    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 7, 4, generator=g).abs() * 1e30 for _ in range(3))
    got = linear_attention(q, k, v, causal=causal, chunk=3).double().numpy()
    want = ref.linear_attention(q.double().numpy(), k.double().numpy(), v.double().numpy(), causal=causal)
    assert abs(got - want).max() <= 1e-6 * abs(want).max()
    full = torch.full((1, 3, 2), 1e30)
    torch.testing.assert_close(linear_attention(full, full, full, causal=causal), full)  # the mean of V


@pytest.mark.parametrize("causal", [False, True])
def test_inputs_far_below_zero_give_the_finite_answer_not_nan(causal):
    # phi = exp(x) below 0: q, k near -400 (float64) or -100 (float32) underflowed every product to 0
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))
    qs, ks = q - 400, k - 400
    logs = qs[..., :, None, :] + ks[..., None, :, :]  # log of each product phi(q)_d phi(k)_d  [2, 5, 5, 4]
    a = np.exp(logs - logs.max()).sum(-1)  # [2, 5, 5]: phi(Q) phi(K)^T over a common constant
    if causal:
        a = a * np.tril(np.ones((5, 5)))
    want = (a @ v) / a.sum(-1, keepdims=True)
    np.testing.assert_allclose(ref.linear_attention(qs, ks, v, causal=causal), want, atol=1e-12)
    got = ann.linear_attention(torch.tensor(qs), torch.tensor(ks), torch.tensor(v), causal=causal)
    np.testing.assert_allclose(got.numpy(), want, atol=1e-12)
    q32, k32, v32 = (torch.tensor(x, dtype=torch.float32) for x in (q - 100, k - 100, v))
    got32 = ann.linear_attention(q32, k32, v32, causal=causal)
    want32 = ref.linear_attention(q32.double().numpy(), k32.double().numpy(), v, causal=causal)
    assert torch.isfinite(got32).all() and np.abs(got32.double().numpy() - want32).max() < 1e-5


def test_no_key_or_no_width_is_refused_by_both():
    for q, k in [(np.ones((3, 0)), np.ones((2, 0))), (np.ones((3, 2)), np.ones((0, 2)))]:
        v = np.ones((k.shape[0], 2))
        with pytest.raises(
            ValueError,
            match=rf"\bT_k >= 1\b.*\bq \[{q.shape[0]}, {q.shape[1]}\], k \[{k.shape[0]}, {k.shape[1]}\]$",
        ):
            ref.linear_attention(q, k, v)
        with pytest.raises(
            ValueError,
            match=rf"\bT_k >= 1\b.*\bq \[{q.shape[0]}, {q.shape[1]}\], k \[{k.shape[0]}, {k.shape[1]}\]$",
        ):
            ann.linear_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v))
