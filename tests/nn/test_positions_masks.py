"""Positions and masks of the engine against the reference's (exact or float64 rounding)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import nn as ann
from attnlab import ref
from attnlab.nn import (
    LearnedPositions,
    SinusoidalPositions,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    causal_mask,
    padding_mask,
    padding_mask_from_ids,
    rope_cos_sin,
    sliding_window_mask,
)


def test_sinusoidal_matches_reference_and_adds():
    pe = SinusoidalPositions(50, 7)
    np.testing.assert_allclose(pe.pe.numpy(), ref.sinusoidal_positions(50, 7), rtol=0, atol=1e-7)
    x = torch.zeros(2, 4, 7)
    torch.testing.assert_close(pe(x, offset=3)[1], pe.pe[3:7])
    np.testing.assert_allclose(
        pe(x.double(), offset=3)[1].numpy(), ref.sinusoidal_positions(7, 7)[3:], rtol=0, atol=0
    )
    assert "pe" not in pe.state_dict()  # a function of (max_len, d): never saved


def test_positions_past_max_len_raise():
    for module in (SinusoidalPositions(8, 4), LearnedPositions(8, 4)):
        with pytest.raises(ValueError, match="exceed max_len=8"):
            module(torch.zeros(1, 6, 4), offset=3)


def test_positions_of_the_wrong_width_and_bad_slopes_raise_value_errors():
    for module in (SinusoidalPositions(8, 4), LearnedPositions(8, 4)):  # were torch RuntimeErrors
        with pytest.raises(ValueError, match=rf"^{type(module).__name__}: x\b.*\bd=4\b.*\[1, 3, 5\]"):
            module(torch.zeros(1, 3, 5))
    for bad in (0, -2):  # was math.log2's 'math domain error'
        with pytest.raises(ValueError, match=rf"^num_heads\b.*\bpositive\b.*, got {bad}$"):
            alibi_slopes(bad)


@settings(max_examples=20, deadline=None)
@given(t=st.integers(1, 9), half=st.integers(1, 5), start=st.integers(0, 50))
def test_rope_matches_reference(t, half, start):
    d = 2 * half
    x = torch.randn(2, 3, t, d, dtype=torch.float64)
    pos = torch.arange(start, start + t)
    cos, sin = rope_cos_sin(pos, d, dtype=torch.float64)
    want = ref.apply_rope(x.numpy(), pos.numpy())
    np.testing.assert_allclose(apply_rope(x, cos, sin).numpy(), want, rtol=0, atol=1e-12)


def test_rope_dot_product_depends_only_on_distance():
    q, k = torch.randn(1, 8, dtype=torch.float64), torch.randn(1, 8, dtype=torch.float64)

    def score(m, n):
        cq, sq = rope_cos_sin(torch.tensor([m]), 8, dtype=torch.float64)
        ck, sk = rope_cos_sin(torch.tensor([n]), 8, dtype=torch.float64)
        return float(apply_rope(q, cq, sq) @ apply_rope(k, ck, sk).T)

    assert score(7, 3) == pytest.approx(score(104, 100), abs=1e-12)
    assert score(7, 3) != pytest.approx(score(7, 4), abs=1e-6)


@pytest.mark.parametrize("h", [1, 3, 4, 6, 8, 12])
def test_alibi_matches_reference(h):
    np.testing.assert_allclose(alibi_slopes(h).numpy(), ref.alibi_slopes(h), rtol=0, atol=0)
    np.testing.assert_allclose(
        alibi_bias(h, 3, 7, dtype=torch.float64).numpy(), ref.alibi_bias(h, 3, 7), rtol=0, atol=0
    )
    assert alibi_slopes(8)[0].item() == 0.5  # 2^(-8/8)


@settings(max_examples=30, deadline=None)
@given(t_q=st.integers(1, 8), extra=st.integers(-5, 5), window=st.integers(1, 6))
def test_masks_match_reference(t_q, extra, window):
    """Equal to ``ref``'s masks, T_q > T_k included (its first T_q - T_k rows empty in both)."""
    t_k = max(1, t_q + extra)
    assert np.array_equal(causal_mask(t_q, t_k).numpy(), ref.causal_mask(t_q, t_k))
    assert np.array_equal(
        sliding_window_mask(t_q, t_k, window).numpy(), ref.sliding_window_mask(t_q, t_k, window)
    )


def test_padding_masks():
    lengths = torch.tensor([3, 1, 4])
    assert np.array_equal(padding_mask(lengths, 4).numpy(), ref.padding_mask(lengths.numpy(), 4))
    ids = torch.tensor([[5, 6, 0], [7, 0, 0]])
    assert padding_mask_from_ids(ids).tolist() == [[[True, True, False]], [[True, False, False]]]
    with pytest.raises(ValueError, match=r"^lengths\b.*\b1\.\.4\b.*\[0, 2\]$"):
        padding_mask(torch.tensor([0, 2]), 4)


@pytest.mark.parametrize(
    "build,message",
    [
        (lambda: ann.LearnedPositions(0, 8), "LearnedPositions.max_len must be a positive integer, got 0"),
        (lambda: ann.LearnedPositions(8, -1), "LearnedPositions.d must be a positive integer, got -1"),
        (
            lambda: ann.SinusoidalPositions(2.5, 8),
            "SinusoidalPositions.max_len must be a positive integer, got 2.5",
        ),
        (lambda: ann.alibi_bias(4, -1), "t_q must be an integer >= 0, got -1"),
    ],
)
def test_position_tables_refuse_bad_sizes(build, message):
    with pytest.raises(ValueError) as exc:
        build()
    assert str(exc.value) == message


@pytest.mark.parametrize(
    "build,what,gib",
    [
        (lambda: ann.SinusoidalPositions(10**12, 8), "sinusoidal_positions(1000000000000, 8)", "178,813.9"),
        (lambda: ann.LearnedPositions(10**12, 8), "LearnedPositions(1000000000000, 8)", "59,604.6"),
        (lambda: ann.alibi_bias(8, 10**6), "alibi_bias(8, 1000000, 1000000)", "208,616.3"),
    ],
)
def test_position_tables_are_sized_before_allocating(build, what, gib):
    """SinusoidalPositions(10^12, 8) tried to allocate 8 TB; on the meta device (counting) it builds."""
    with pytest.raises(ValueError) as exc:
        build()
    assert str(exc.value).startswith(f"{what} would need {gib} GiB; this machine has ")
    with torch.device("meta"):
        assert ann.SinusoidalPositions(10**9, 8).pe.shape == (10**9, 8)


def test_more_queries_than_keys_leave_the_first_rows_empty_in_both():
    assert causal_mask(5, 3).int().tolist() == [[0, 0, 0], [0, 0, 0], [1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert np.array_equal(causal_mask(3, 2).numpy(), ref.causal_mask(3, 2))
