"""The RNN-against-Transformer experiment: through a GRU the gradient of y_T with respect to x_1
vanishes exponentially in T, through one attention layer it falls only as 1/T (the path is one
step); the timing table is complete (times are never bounded in a test)."""

from __future__ import annotations

import pytest
import torch

from attnlab.experiments.paths import Settings, _attention, _gru, jacobian_norm, run, step_flops

SMALL = Settings(lengths=(8, 32, 64), d=16, seeds=3, repeats=1, batch=2)


@pytest.fixture(scope="module")
def result():
    return run(SMALL, log=lambda *_: None)


def test_the_gru_gradient_vanishes_and_attention_keeps_a_one_step_path(result):
    g = result.data["gradient_norm"]
    gru, attn = g["gru"], g["attention"]
    assert gru["64"] < 1e-6 * attn["64"]  # measured 1.2e-14 against 2.6e-02
    assert result.data["gru_factor_per_step"] < 0.9  # exponential decay per recurrent step (measured 0.6)
    assert gru["8"] > gru["32"] > gru["64"]
    scaled = [int(t) * v for t, v in attn.items()]  # attention: about 1/T (the weight spread over T keys)
    assert max(scaled) < 2 * min(scaled)


def test_the_table_has_every_length_and_positive_times(result):
    assert [row[0] for row in result.rows] == ["8", "32", "64"]
    assert [row[1] for row in result.rows] == ["7 steps", "31 steps", "63 steps"]
    for kind in ("gru", "attention"):
        assert all(t > 0 for t in result.data["step_seconds"][kind].values())
    assert "Measured:" in result.text() and result.claim in result.text()


def test_jacobian_norm_equals_autograd_jacobian():
    torch.manual_seed(0)
    model = _attention(8, 2).double()
    x = torch.randn(1, 5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    full = torch.autograd.functional.jacobian(lambda t: model(t)[0, -1], x)  # [d, 1, T, d]
    expected = float(full[:, 0, 0].norm())
    assert abs(jacobian_norm(model, 5, 8, torch.Generator().manual_seed(3)) - expected) < 1e-12
    gru = _gru(8).double()
    assert jacobian_norm(gru, 5, 8, torch.Generator().manual_seed(3)) > 0


def test_flop_counts_follow_the_formulas():
    assert step_flops("gru", 4, 10, 2) == 3 * 12 * 16 * 10 * 2
    assert step_flops("attention", 4, 10, 2) == 3 * (8 * 16 + 4 * 10 * 4) * 10 * 2


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ValueError, match=r"^lengths\b.*>= 2\b.*\[1, 8\]$"):
        Settings(lengths=(1, 8))
    with pytest.raises(ValueError, match=r"\bd=10\b.*\bheads=4\b"):
        Settings(d=10)
