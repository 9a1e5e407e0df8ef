"""Every ``--json`` prints JSON that a strict parser accepts (RFC 8259 has no NaN or Infinity):
each command that has the flag is run once, cheaply, and its standard output parsed with
``parse_constant`` refusing ``NaN``/``Infinity``. Where a command can meet a non-finite number (a
diverged loss, an experiment's results file) the case feeds it one and checks it prints ``null``."""

from __future__ import annotations

import json
import math

import click
import pytest
from click.testing import CliRunner

from attnlab._io import dumps_json, finite_or_none
from attnlab.cli import cli, leaf_commands
from attnlab.commands.experiment_claims import CLAIMS

NAN = float("nan")


def _refuse(constant: str):
    raise ValueError(f"not JSON: {constant}")


def strict(text: str):
    return json.loads(text, parse_constant=_refuse)


def _json_commands() -> list[str]:
    return [
        path
        for path, cmd in leaf_commands()
        if any(isinstance(p, click.Option) and "--json" in p.opts for p in cmd.params)
    ]


TINY_TRAIN = ["--task", "reverse", "--steps", "2", "--d-model", "8", "--heads", "2", "--d-ff", "16"]
TINY_TRAIN += ["--layers", "1", "--eval-size", "2", "--train-size", "16", "--batch", "8", "--quiet"]

# a cheap invocation of each command with --json ({tmp}: a fresh folder, {run}: a trained run)
CASES = {
    "audit cost": ["--seq", "64"],
    "audit params": ["--preset", "gpt2"],
    "audit peak": [],
    "audit shapes": ["--seq", "4", "--batch", "1", "--d-model", "16", "--heads", "2", "--d-ff", "32"],
    "embed": ["a cat", "a dog"],
    "evaluate": ["{run}", "--n", "4"],
    "explore": ["a cat sat", "--out", "{tmp}/x.html"],
    "experiment bottleneck": ["--out", "{tmp}/b"],  # run replaced: a results file holding NaN
    "experiment extrapolation": ["--quick", "--steps", "1", "--finetune-steps", "1", "--models", "none"],
    "experiment induction": ["--out", "{tmp}/i"],  # run replaced: a results file holding NaN
    "experiment recall": ["--quick", "--steps", "1", "--quiet"],
    **{f"experiment {name}": ["--quick"] for name in CLAIMS},  # run replaced: a result holding NaN
    "figures": ["--out", "{tmp}/figs"],
    "heads": ["minilm", "--tokens", "repeat"],
    "lesson": ["1"],
    "myths": ["9"],
    "practice check": ["attention", "{tmp}/starter.py"],  # the starter file, unfilled: every check fails
    "practice list": [],
    "prune": ["minilm"],
    "quiz": ["--count", "1", "--answers"],
    "tasks list": [],
    "tasks show": ["reverse", "--n", "2"],
    "train": TINY_TRAIN,  # trainer replaced: a diverged run whose loss is NaN
    "translate": ["{run}", "abc"],
}
ELSEWHERE = {
    "generate": "tests/models/hf/test_commands.py (needs the Hugging Face checkpoints built there)",
    "patch": "tests/models/hf/test_interp_families.py (every decoder family's folder)",
    "attribute": "tests/models/hf/test_interp_families.py (every decoder family's folder)",
    "compose": "tests/models/hf/test_interp_families.py and tests/interp/test_composition.py",
    "experiment decoding": "tests/experiments/test_beam_blandness.py (needs its trained text run)",
    "experiment faithfulness": "tests/experiments/test_faithfulness.py (likewise)",
    "export": "tests/training/test_export.py (needs a trained text run)",
}


def test_every_command_with_json_has_a_case():
    assert sorted(_json_commands()) == sorted([*CASES, *ELSEWHERE])


def test_dumps_json_writes_null_for_non_finite_numbers():
    import numpy as np

    value = {"a": [1.0, NAN, (float("inf"), -float("inf"))], "b": np.float64("nan"), "c": "NaN", "d": 2}
    assert strict(dumps_json(value)) == {"a": [1.0, None, [None, None]], "b": None, "c": "NaN", "d": 2}
    assert finite_or_none(3.5) == 3.5 and finite_or_none(True) is True
    assert json.dumps(value["a"]) == "[1.0, NaN, [Infinity, -Infinity]]"  # what json.dumps would print


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("json") / "run"
    result = CliRunner().invoke(cli, ["train", *TINY_TRAIN, "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


def _fake_experiments(monkeypatch, tmp_path):
    """bottleneck and induction print the results.json their run wrote: one with a NaN in it."""
    import attnlab.experiments.bottleneck as bottleneck
    import attnlab.experiments.induction as induction

    results = tmp_path / "results-with-nan.json"
    results.write_text(json.dumps({"models": [{"loss": NAN, "exact": 0.5}]}))  # as json.dump writes it

    class Result:
        files = {"json": str(results)}

    monkeypatch.setattr(bottleneck, "run", lambda *a, **k: Result())
    monkeypatch.setattr(induction, "run", lambda *a, **k: Result())


def _fake_claim(monkeypatch, name: str):
    """A claim experiment's run replaced by one that returns a result holding a NaN."""
    import importlib

    from attnlab.experiments.claim_result import ClaimResult

    module = importlib.import_module(f"attnlab.experiments.{CLAIMS[name][0]}")
    result = ClaimResult(name, "a claim", "a source", ["x"], [["1"]], "v", {"loss": NAN}, {}, 0.0)
    monkeypatch.setattr(module, "run", lambda *a, **k: result)


def _diverged_trainer(monkeypatch):
    import attnlab.training.trainer as trainer

    def diverged(config, out, **kw):
        record = {"step": 2, "loss": NAN, "val_token_acc": 0.0, "val_exact": 0.0}
        return trainer.TrainResult(None, [record], 2, None, 0)

    monkeypatch.setattr(trainer, "train", diverged)


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(CASES))
def test_json_output_is_strict_json(command, run_dir, tmp_path, monkeypatch):
    if command == "practice check":
        assert (
            CliRunner()
            .invoke(cli, ["practice", "start", "attention", "--dir", str(tmp_path / "s")])
            .exit_code
            == 0
        )
        (starter,) = (tmp_path / "s").iterdir()
        starter.rename(tmp_path / "starter.py")
    if command.startswith("experiment ") and command.split()[1] in ("bottleneck", "induction"):
        _fake_experiments(monkeypatch, tmp_path)
    if command == "train":
        _diverged_trainer(monkeypatch)
    claim = command.split()[1] if command.startswith("experiment ") else None
    if claim in CLAIMS:
        _fake_claim(monkeypatch, claim)
    args = [a.format(tmp=tmp_path, run=run_dir) for a in CASES[command]]
    if command == "train":
        args += ["--out", str(tmp_path / "r")]
    result = CliRunner().invoke(cli, [*command.split(), *args, "--json"], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output  # practice check exits 1: its checks failed
    data = strict(result.stdout)
    assert data not in (None, [], {})
    if command == "train":
        assert data["loss"] is None  # NaN printed as null, never as a bare NaN
    if command.startswith("experiment ") and command.split()[1] in ("bottleneck", "induction"):
        assert data == {"models": [{"loss": None, "exact": 0.5}]}
    if claim in CLAIMS:
        assert data["data"] == {"loss": None}
    assert not any(isinstance(v, float) and not math.isfinite(v) for v in _leaves(data))


def _leaves(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _leaves(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _leaves(v)
    else:
        yield obj
