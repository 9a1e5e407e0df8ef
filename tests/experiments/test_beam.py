"""``attnlab experiment beam``: beam against greedy on tasks with a right answer, judged by the shared
rule (made-up scores), and an end-to-end run whose models are trained once and reused."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.experiments.beam import Settings, _sentence, judge


def _scores(greedy: list[float], beam: list[float]) -> dict:
    return {"greedy": {"exact": greedy}, "beam 4": {"exact": beam}}


def test_beam_minus_greedy_is_judged_over_the_examples():
    better = judge(_scores([0.0] * 50 + [1.0] * 50, [1.0] * 80 + [0.0] * 20), competent=True)["beam 4"]
    assert better["difference"] == 0.3 and better["interval"][0] > 0.1 and better["answer"] == "agrees"
    worse = judge(_scores([1.0] * 100, [1.0] * 70 + [0.0] * 30), competent=True)["beam 4"]
    assert worse["difference"] == -0.3 and worse["answer"] == "disagrees"
    same = judge(_scores([1.0] * 100, [1.0] * 100), competent=True)["beam 4"]  # always right: no room
    assert same["interval"] == [0.0, 0.0] and same["answer"] == "inconclusive"
    one = judge(_scores([0.0] * 99 + [1.0], [1.0] + [0.0] * 98 + [1.0]), competent=True)["beam 4"]
    assert one["difference"] == 0.01 and one["answer"] == "inconclusive"  # one example is not evidence
    weak = judge(_scores([0.0] * 50 + [1.0] * 50, [1.0] * 100), competent=False)["beam 4"]
    assert weak["answer"] == "model too weak"


def test_the_sentence_says_too_weak_below_the_gate():
    d = {"competent": False, "greedy_token_accuracy": 0.18}
    assert _sentence("reverse", d).startswith("reverse: model too weak (greedy token accuracy 0.18 < 0.5)")


def test_settings_refuse_mismatched_steps():
    with pytest.raises(ValueError, match=r"^steps\b.*\b1 entries\b.*\btasks\b.*\b2$"):
        Settings(steps=(10,))
    with pytest.raises(ValueError, match=r"^lr\b.*\b3 entries\b.*\btasks\b.*\b2$"):
        Settings(lr=(1e-3, 1e-3, 1e-3))


def test_a_run_from_the_command_line_trains_once_and_reuses(tmp_path, monkeypatch):
    import attnlab.experiments.beam as beam

    monkeypatch.setattr(beam, "QUICK", Settings(steps=(5, 5), examples=6, beams=(2,)))
    args = ["experiment", "beam", "--quick", "--out", str(tmp_path), "--json"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    data = json.loads(first.stdout)
    assert set(data["data"]) == {"reverse", "dates"} and data["claim"].startswith("Beam search keeps")
    for task in ("reverse", "dates"):
        assert (tmp_path / "models" / task / "latest.json").is_file()
        assert set(data["data"][task]["exact"]) == {"greedy", "beam 2"}
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0 and json.loads(again.stdout)["data"] == data["data"]  # the same models
    assert (tmp_path / "beam.png").read_bytes()[:4] == b"\x89PNG"
    # a folder holding models of other settings is refused, not silently reused
    monkeypatch.setattr(beam, "QUICK", Settings(steps=(6, 5), examples=6, beams=(2,)))
    other = CliRunner().invoke(cli, args)
    assert other.exit_code == 2 and re.search(r"^Error: .*\bother settings\b", other.output), other.output
    assert str(tmp_path / "models" / "reverse") in other.output and "Traceback" not in other.output
