"""Numbers at the edges of float64/float32: exact answers or a clear refusal, never NaN."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab import ref
from attnlab.nn import LayerNorm, capture


@pytest.mark.parametrize("big", [1e308, 1.7e308, 1e200])
def test_layer_norm_of_huge_rows_equals_the_scaled_oracle(big):
    rng = np.random.default_rng(0)
    unit = rng.uniform(-1, 1, size=(3, 8))
    gamma, beta = rng.normal(size=8), rng.normal(size=8)
    got = ref.layer_norm(unit * big, gamma, beta)
    # layer norm is scale-invariant: LN(c x) = LN(x) up to eps / c^2, negligible at these scales
    want = torch.nn.functional.layer_norm(
        torch.tensor(unit), (8,), torch.tensor(gamma), torch.tensor(beta), eps=0.0
    )
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want.numpy(), atol=1e-12)


@pytest.mark.parametrize("dtype,big", [(np.float64, 1e200), (np.float64, 7e300), (np.float32, 3e19)])
@pytest.mark.parametrize("d", [3, 4])
def test_a_constant_row_normalises_to_beta_at_any_size(dtype, big, d):
    # x - mu = 0, and eps / s^2 underflows for a huge row: the quotient was 0/0 (NaN)
    beta = np.linspace(-1, 1, d).astype(dtype)
    got = ref.layer_norm(np.full((2, d), big, dtype=dtype), np.full(d, 3.0, dtype=dtype), beta)
    assert got.dtype == dtype and np.array_equal(got, np.stack([beta, beta]))
    ln = LayerNorm(d)
    with torch.no_grad():
        ln.bias.copy_(torch.from_numpy(beta.astype(np.float32)))
        assert torch.equal(ln(torch.full((2, d), 3e19)), torch.stack([ln.bias, ln.bias]))
        with capture(ln, ["scale"]):  # the written-out (hooked) path too
            assert torch.equal(ln(torch.full((1, d), 3e19)), ln.bias[None])


def test_rms_norm_of_huge_rows_and_small_rows():
    x = np.array([[1e200, -2e200, 3e200], [1e-300, 2e-300, -3e-300]])
    got = ref.rms_norm(x, np.ones(3), eps=1e-6)
    scaled = torch.nn.functional.rms_norm(torch.tensor([[1.0, -2, 3]], dtype=torch.float64), (3,), eps=0.0)
    np.testing.assert_allclose(got[0], scaled.numpy()[0], atol=1e-15)
    np.testing.assert_allclose(got[1], x[1] / np.sqrt(1e-6), rtol=1e-12)  # eps dominates a tiny row
    assert np.all(np.isfinite(ref.rms_norm(np.full((1, 4), 1.7e308), np.ones(4))))


def test_float32_norms_at_3e38():
    x = np.array([[3e38, -3e38, 1e38, 0.0]], dtype=np.float32)
    out = ref.layer_norm(x, np.ones(4, np.float32), np.zeros(4, np.float32))
    want = torch.nn.functional.layer_norm(torch.tensor(x / 1e38), (4,), eps=0.0).numpy()
    assert out.dtype == np.float32 and np.all(np.isfinite(out))
    np.testing.assert_allclose(out, want, atol=1e-6)


@pytest.mark.parametrize("x", [np.array([1.7e308, -1.7e308]), np.array([3e38, -3e38], dtype=np.float32)])
def test_log_softmax_whose_answer_overflows_is_refused_not_wrong(x):
    with pytest.raises(ValueError, match="cannot be represented|lie below"):
        ref.log_softmax(x)


def test_log_softmax_and_softmax_at_large_but_representable_logits():
    x = np.array([1e308, 0.0, -1e307])
    np.testing.assert_array_equal(ref.log_softmax(x), [0.0, -1e308, -1.1e308])
    np.testing.assert_array_equal(ref.softmax(np.array([1.7e308, -1.7e308])), [1.0, 0.0])


def test_masked_softmax_of_integer_scores_is_a_real_softmax():
    got = ref.masked_softmax(np.array([[1, 2, 3]]), np.array([[True, True, False]]))
    np.testing.assert_allclose(got, [[1 / (1 + np.e), np.e / (1 + np.e), 0.0]], rtol=1e-12)
    assert got.dtype == np.float64


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rope_positions_and_flash_scale_are_refused(bad):
    x = np.ones((2, 4))
    with pytest.raises(ValueError, match=r"^positions\b.*\bNaN or infinite\b"):
        ref.apply_rope(x, np.array([0.0, bad]))
    q = np.ones((3, 4))
    with pytest.raises(ValueError, match=rf"^scale\b.*\bfinite\b.*, got {bad!r}$"):
        ref.flash_attention(q, q, q, scale=bad)


def test_absurd_sizes_are_refused_with_the_memory_they_would_need():
    with pytest.raises(ValueError, match=r"^causal_mask\(1000000, 1000000\).*\b931\.3 GiB\b"):
        ref.causal_mask(10**6, 10**6)
    with pytest.raises(ValueError, match=r"sinusoidal_positions\(1000000000000, 512\) would need .* GiB"):
        ref.sinusoidal_positions(10**12, 512)
    with pytest.raises(ValueError, match="sliding_window_mask"):
        ref.sliding_window_mask(10**6, 10**6, window=4)
    assert ref.causal_mask(3, 5).shape == (3, 5)  # ordinary sizes are untouched


@pytest.mark.parametrize("dtype,big", [(np.float64, 1e200), (np.float32, 1e20)])
def test_scores_that_overflow_from_finite_inputs_are_named_so(dtype, big):
    q = np.ones((2, 3), dtype=dtype) * big
    with pytest.raises(ValueError, match=r"the scores q\.k\^T overflow .* every input is finite"):
        ref.scaled_dot_product_attention(q, q, q)
    with pytest.raises(ValueError, match=r"^q\b.*\bNaN or infinite\b.*\[2, 3\]"):
        ref.scaled_dot_product_attention(np.full((2, 3), np.inf), q, q)


def test_rope_takes_negative_positions_and_scores_depend_on_offsets_only():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    shifted = ref.apply_rope(q, [-5, -4, -3]) @ ref.apply_rope(k, [-5, -4, -3]).T  # was refused (seq_len)
    plain = ref.apply_rope(q, [0, 1, 2]) @ ref.apply_rope(k, [0, 1, 2]).T
    np.testing.assert_allclose(shifted, plain, atol=1e-12)
