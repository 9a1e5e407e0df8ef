"""``attnlab prune minilm``'s verdict: the importance order against several random orders, judged
by the shared rule (made-up curves, hand-computed intervals)."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.experiments.pruning import compare_orders, summary


def _curve(values: list[float]) -> list[dict]:
    return [{"removed": 7 * i, "share": 7 * i / 72, "mean_cosine": v} for i, v in enumerate(values)]


def test_each_count_is_judged_over_the_random_orders():
    result = {
        "importance_order": _curve([1.0, 0.95, 0.70]),
        "random_orders": [_curve([1.0, 0.90, 0.71]), _curve([1.0, 0.92, 0.69]), _curve([1.0, 0.88, 0.72])],
    }
    rows = compare_orders(result)
    assert [r["removed"] for r in rows] == [7, 14]  # the unpruned row is not judged
    first, second = rows
    assert (first["random_mean"], first["random_min"], first["random_max"]) == (0.9, 0.88, 0.92)
    # differences 0.05, 0.03, 0.07: mean 0.05, sd 0.02, half-width t(2 df) * 0.02 / sqrt(3)
    half = 4.303 * 0.02 / math.sqrt(3)
    assert first["difference"] == 0.05
    assert first["interval"] == [pytest.approx(0.05 - half, abs=1e-4), pytest.approx(0.05 + half, abs=1e-4)]
    assert first["verdict"] == "agrees"
    assert second["difference"] == pytest.approx(-0.0067, abs=1e-4) and second["verdict"] == "inconclusive"
    line = summary(rows, 3)
    assert line.startswith("Importance order: closer than 3 random orders") and "up to 7 heads" in line


def test_one_random_order_proves_nothing():
    result = {"importance_order": _curve([1.0, 0.95]), "random_orders": [_curve([1.0, 0.5])]}
    (row,) = compare_orders(result)
    assert row["interval"] == [-math.inf, math.inf] and row["verdict"] == "inconclusive"
    assert "not closer than 1 random orders" in summary([row], 1)


def test_orders_must_be_positive():
    from attnlab.interp.minilm_pruning import minilm_pruning

    with pytest.raises(ValueError, match="random_orders"):
        minilm_pruning(None, None, random_orders=0)
    done = CliRunner().invoke(cli, ["prune", "minilm", "--orders", "0"])
    assert done.exit_code == 2 and "--orders" in done.output and "Traceback" not in done.output
