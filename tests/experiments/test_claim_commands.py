"""The claim experiments' commands: one per registered claim, each with --quick, --out, --seed,
--quiet and --json; a run prints the quoted sentence, the table and the verdict, --out writes the
JSON, the table and the plot, and bad input is one line with exit status 2."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.commands.experiment_claims import CLAIMS
from attnlab.experiments import scoring

TINY = scoring.Settings(sizes=(8,), d=4, repeats=1)


@pytest.fixture
def tiny_scoring(monkeypatch):
    monkeypatch.setattr(scoring, "QUICK", TINY)


def test_every_claim_is_a_command_with_the_common_options():
    for name in CLAIMS:
        result = CliRunner().invoke(cli, ["experiment", name, "--help"])
        assert result.exit_code == 0, result.output
        for flag in ("--quick", "--out", "--seed", "--quiet", "--json"):
            assert flag in result.output, (name, flag)


def test_a_run_prints_the_sentence_table_and_verdict_and_writes_files(tiny_scoring, tmp_path):
    result = CliRunner().invoke(
        cli, ["experiment", "scoring", "--quick", "--quiet", "--out", str(tmp_path / "s")]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith('"' + scoring.CLAIM + '"')
    assert "additive / Luong dot" in result.stdout and "Measured: " in result.stdout
    data = json.loads((tmp_path / "s" / "results.json").read_text())
    assert data["name"] == "scoring" and data["settings"]["sizes"] == [8]
    assert (tmp_path / "s" / "scoring.png").stat().st_size > 1000
    assert (tmp_path / "s" / "table.txt").read_text().startswith('"' + scoring.CLAIM)


def test_json_prints_the_results(tiny_scoring):
    result = CliRunner().invoke(cli, ["experiment", "scoring", "--quick", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["claim"] == scoring.CLAIM and set(data["data"]["ms"]) == {"numpy", "torch"}


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    for args in (["--seed", "-1"], ["--out", str(a_file / "x")]):
        result = CliRunner().invoke(cli, ["experiment", "gqa", "--quick", *args])
        assert result.exit_code == 2, result.output
        assert result.output.startswith("Error: ") and result.output.count("\n") == 1, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_the_study_path_and_the_demo_point_to_registered_claims():
    from attnlab.practice.path import LESSONS
    from attnlab.report.tour import NEXT_STEPS

    named = {
        c.split()[2] for lesson in LESSONS for c in lesson.commands if c.startswith("attnlab experiment ")
    }
    assert set(CLAIMS) <= named  # every claim has a place in the study path
    assert named <= set(CLAIMS) | {"bottleneck"}
    assert any(where == "attnlab experiment --help" for _, where, _ in NEXT_STEPS)


def test_every_claim_module_quotes_its_sentence_and_has_both_presets():
    import dataclasses
    import importlib

    for name, (module, _) in CLAIMS.items():
        m = importlib.import_module(f"attnlab.experiments.{module}")
        assert isinstance(m.QUICK, m.Settings) and (m.QUICK != m.Settings() or name == "relations"), name
        assert dataclasses.replace(m.Settings(), seed=3).seed == 3
        assert len(m.CLAIM) > 40 and "Week" in m.SOURCE, name
