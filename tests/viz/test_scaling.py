"""The beyond-quadratic cost plot: its numbers are audit_cost's executed terms, the dense ones grow
like T², the others like T, and the legend covers no point."""

from __future__ import annotations

from attnlab.audit import Workload, audit_cost
from attnlab.audit.config import ModelSpec
from attnlab.nn import BlockConfig
from attnlab.viz.scaling import mixing_cost_figure


def test_the_plot_draws_the_audits_executed_flops(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLAB_CHECK_FIGURES", "1")  # a legend over a point is an error
    lengths = (1024, 2048, 4096)
    data = mixing_cost_figure(tmp_path / "cost.png", lengths)
    assert (tmp_path / "cost.png").stat().st_size > 1000
    lin = data["linear attention"]
    assert lin[1] == 2 * lin[0] and lin[2] == 2 * lin[1]  # every term linear in T (chunks of 64)
    dense = data["SDPA causal (dense kernel)"]
    assert 3.0 < dense[2] / dense[1] < 4.0  # the T² terms take over
    assert data["SDPA + window mask W=256"] == dense  # a mask saves no executed work
    block = BlockConfig(512, 8, 2048, norm_place="pre", attention="ssm")
    report = audit_cost(ModelSpec("gpt", block, layers=1, vocab=1000), Workload(seq=2048))
    assert data["SSM (n = 16)"][1] == sum(
        t["flops"] for t in report["terms"] if t["term"] not in ("FFN", "logits")
    )
