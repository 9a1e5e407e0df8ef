"""Fixtures of the model tests: the int8 quality bounds, which depend on the CPU's vector units."""

from __future__ import annotations

import pytest

from attnlab.models import int8


@pytest.fixture
def int8_cosine_bounds() -> tuple[float, float]:
    """(min, mean) cosine of int8 MiniLM embeddings to float32, by the input width this CPU allows.

    With 8-bit inputs (u8 x s8 summed in int32: VNNI or AMX-INT8) 0.97 / 0.98. With 7-bit inputs
    (AVX2 without VNNI sums pairs in saturating int16, so inputs keep 7 bits) the input's rounding step
    doubles, so each layer's rounding error at most doubles, and 1 - cosine, which grows with the
    square of a small relative error, at most quadruples: 1 - 4 x 0.03 = 0.88 and 1 - 4 x 0.02 = 0.92.
    """
    return (0.97, 0.98) if int8.full_range() else (0.88, 0.92)
