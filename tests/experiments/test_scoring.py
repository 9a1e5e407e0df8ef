"""Additive against dot-product scoring: the three calls of each library run at equal sizes and give
attention rows that sum to one, the table has every size and library, and the additive score writes
d_a times more entries (times are reported, never bounded in a test)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.experiments.scoring import KINDS, Settings, numpy_calls, run, score_entries, torch_calls


def test_every_call_returns_weights_whose_rows_sum_to_one():
    for kind, call in numpy_calls(6, 4, np.random.default_rng(0)).items():
        weights = call()[1]
        assert weights.shape == (6, 6) and np.allclose(weights.sum(-1), 1.0, atol=1e-5), kind
    for kind, call in torch_calls(6, 4, 0).items():
        out = call()
        first = out if isinstance(out, torch.Tensor) else out[0]
        assert first.shape[-2:] == (6, 4), kind


def test_the_table_has_every_size_and_library():
    r = run(Settings(sizes=(8, 16), d=4, repeats=1), log=lambda *_: None)
    assert [(row[0], row[1]) for row in r.rows] == [
        ("numpy", "8"),
        ("numpy", "16"),
        ("torch", "8"),
        ("torch", "16"),
    ]
    for by_n in r.data["ms"].values():
        assert all(by_n[n][k] > 0 for n in by_n for k in KINDS)
    assert score_entries("additive", 8, 4) == 4 * score_entries("scaled dot", 8, 4) == 4 * 64


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ValueError, match=r"^sizes\b.*\bat least one\b"):
        Settings(sizes=())
