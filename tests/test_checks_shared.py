"""One validation module: ``ref`` (NumPy) and ``nn`` (torch) raise the same one-line messages."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab import _checks, ref
from attnlab.nn import masks
from attnlab.ref import _checks as ref_checks


def test_ref_scalar_checks_are_the_shared_ones():
    for name in ("positive_int", "positive_float", "non_negative_float"):
        assert getattr(ref_checks, name) is getattr(_checks, name)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "4", np.float64(3.0)])
def test_same_message_in_ref_and_nn(bad):
    with pytest.raises(ValueError) as a:
        ref.causal_mask(bad)
    with pytest.raises(ValueError) as b:
        masks.causal_mask(bad)
    assert str(a.value) == str(b.value) == f"t_q must be a positive integer, got {bad!r}"


def test_numpy_integers_are_accepted_by_both():
    assert ref.causal_mask(np.int64(3)).shape == tuple(masks.causal_mask(np.int64(3)).shape) == (3, 3)
