"""``audit cost --measure`` at a --seq whose [B, h, T, T] scores cannot fit is refused before
anything is built, naming the memory (and rough time) the audit's own arithmetic says it needs."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from attnlab._checks import memory_bytes
from attnlab.audit.config import Workload
from attnlab.audit.cost import audit_cost
from attnlab.audit.measure import check_measurable
from attnlab.audit.spec import from_options
from attnlab.cli import cli


def _never_built(monkeypatch):
    import attnlab.audit.build as build

    def refuse(*a, **k):
        raise AssertionError("--measure built the model before refusing it")

    monkeypatch.setattr(build, "build", refuse)


@pytest.mark.parametrize("seq", [100_000, 1_000_000])
def test_a_huge_seq_is_refused_up_front_with_its_memory(seq, monkeypatch):
    _never_built(monkeypatch)
    result = CliRunner().invoke(cli, ["audit", "cost", "--measure", "--seq", str(seq)])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    gib = float(re.search(r"about ([\d,.]+) GiB", line).group(1).replace(",", ""))
    scores_and_weights = 2 * 1 * 8 * seq * seq * 4  # B=1, h=8, float32: the two [B, h, T, T] tensors
    assert scores_and_weights / 2**30 <= gib
    report = audit_cost(from_options(None, (), max_len=seq), Workload(seq=seq), bytes_per_value=4)
    assert gib == pytest.approx(report["activations"]["per_layer_bytes"] / 2**30, abs=0.051)
    assert f"{memory_bytes() / 2**30:,.1f} GiB of memory" in line and "FLOP/s" in line


def test_check_measurable_refuses_memory_and_time_and_passes_what_fits():
    report = audit_cost(from_options(None, (), max_len=64), Workload(seq=64), bytes_per_value=4)
    need = report["activations"]["per_layer_bytes"] + report["activations"]["logits_bytes"]
    check_measurable(report, 64, memory=2 * need)  # fits in half the memory: no error
    with pytest.raises(ValueError, match=r"^measure=True at T=64\b.*\b0\.0 GiB\b"):
        check_measurable(report, 64, memory=2 * need - 2)
    slow = {**report, "executed": {**report["executed"], "total_flops": 10**15}}  # 10^4 s at 1e11/s
    with pytest.raises(ValueError, match=r"^measure=True at T=64\b.*\b1\.00e\+15 FLOPs\b.*\b2\.8 hours\b"):
        check_measurable(slow, 64, memory=2**40)


def test_audit_shapes_is_refused_before_it_builds_what_would_not_fit(monkeypatch):
    """audit shapes runs the model for real: --seq 10^6 (the [5, 8, T, T] scores) and d_model 2^20
    (4.4 * 10^12 weights) were allocation tracebacks; the weights (meta device) and the cost audit's
    activation arithmetic now refuse them first."""
    _never_built_for_real(monkeypatch)
    for args, start in [
        (["--seq", "1000000"], "Error: audit shapes at B=5, T=1,000,000 would need 298,185.4 GiB"),
        (
            ["--d-model", "1048576", "--heads", "1"],
            "Error: audit shapes of this encoder-layer: a model of 4,402,350,917,632 parameters",
        ),
    ]:
        result = CliRunner().invoke(cli, ["audit", "shapes", *args])
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert result.output.startswith(start), result.output


def _never_built_for_real(monkeypatch):
    import attnlab.audit.build as build

    real = build.build

    def meta_only(a, device=None):
        if device != "meta":
            raise AssertionError("audit shapes built the model before refusing it")
        return real(a, device)

    monkeypatch.setattr(build, "build", meta_only)
