"""The length-extrapolation experiment on a reduced size: the task's answers, the table's shape
(learned positions "not applicable" past their table), a seeded rerun giving the same numbers, the
scaled rows using the same weights, the files, the CLI and its bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.experiments.extrapolation import (
    QUICK,
    LatestPasskey,
    Settings,
    build,
    evaluate,
    rescaled,
    run,
)

TINY = Settings(
    train_len=8,
    d_model=16,
    num_heads=2,
    num_layers=1,
    steps=12,
    finetune_steps=3,
    batch_size=8,
    warmup=3,
    eval_sequences=6,
    models=("learned", "rope", "alibi"),
)


def test_task_answer_is_the_latest_needle():
    task = LatestPasskey(num_values=5, num_filler=7, needles=3)
    ids, targets = task.batch(np.random.default_rng(0), 20, 30)  # [B, T] each
    assert ids.shape == targets.shape == (20, 30) and (ids[:, 0] == task.bos).all()
    for row, want in zip(ids.tolist(), targets.tolist()):
        latest = None
        for t, token in enumerate(row):
            is_needle = task.needle0 <= token < task.filler0
            expected = -100 if latest is None or is_needle or t == 0 else task.value0 + latest
            assert want[t] == expected
            if is_needle:
                latest = token - task.needle0
        assert sum(task.needle0 <= token < task.filler0 for token in row) == 3


@pytest.mark.slow
def test_reduced_run_table_json_and_rerun(tmp_path):
    first = run(TINY, tmp_path, progress=False, log=lambda *_: None)
    names = [r.name for r in first.rows]
    assert names[:3] == ["learned", "RoPE", "ALiBi"]
    assert names[3:6] == [f"RoPE + {s} (at evaluation)" for s in ("PI", "NTK-dynamic", "YaRN")]
    assert names[6:] == [f"RoPE + {s} (fine-tuned at 16, 3 steps)" for s in ("PI", "YaRN")]
    learned = first.rows[0]
    assert learned.at(8) is not None and all(learned.at(t) is None for t in (16, 32, 64))
    assert "n/a" in first.table().splitlines()[3]
    for row in first.rows[1:]:
        for t in TINY.lengths:
            cell = row.at(t)
            assert 0 <= cell["accuracy"] <= 1 and cell["loss"] > 0
    # evaluation-only scalings at the training length are plain RoPE: the same numbers
    assert first.rows[3].at(8) == first.rows[4].at(8) == first.rows[5].at(8) == first.rows[1].at(8)
    data = json.loads((tmp_path / "results.json").read_text())
    assert data == json.loads(json.dumps(first.to_json()))
    assert (tmp_path / "accuracy_vs_length.png").stat().st_size > 1000
    second = run(TINY, None, progress=False, log=lambda *_: None)
    assert second.table() == first.table() and not second.files


def test_rescaled_keeps_weights_and_changes_only_rope():
    task = LatestPasskey(4, 4, 2)
    torch.manual_seed(0)
    model = build(TINY, task, "rope").eval()
    pi = rescaled(model, {"rope_type": "linear", "factor": 2.0})
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), pi.state_dict().values()))
    one = rescaled(model, {"rope_type": "linear", "factor": 1.0})
    ids, _ = task.batch(np.random.default_rng(0), 2, 16)  # [2, 16]
    with torch.no_grad():
        assert torch.equal(one(ids), model(ids))
        assert not torch.equal(pi(ids), model(ids))
    assert evaluate(one, task, TINY, 16) == evaluate(model, task, TINY, 16)


@pytest.mark.parametrize(
    "changes,message",
    [
        (dict(multiples=(2, 4)), "start with 1"),
        (dict(multiples=(1, 4, 2)), "increasing"),
        (dict(models=("rope", "relative")), "Settings.models"),
        (dict(steps=0), "Settings.steps must be a positive integer"),
        (dict(train_len=3), "no room"),
        (dict(d_model=12, num_heads=4), "even width"),
        (dict(finetune_steps=-1), "finetune_steps"),
    ],
)
def test_bad_settings(changes, message):
    with pytest.raises(ValueError, match=message):
        Settings(**changes)


def test_cli_json_and_bad_input(tmp_path):
    runner = CliRunner()
    args = [
        "experiment",
        "extrapolation",
        "--quick",
        "--steps",
        "3",
        "--finetune-steps",
        "0",
        "--models",
        "none",
    ]
    r = runner.invoke(cli, [*args, "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["lengths"] == QUICK.lengths and [row["name"] for row in data["rows"]] == ["NoPE"]
    assert data["undertrained"] == ["NoPE"]  # 3 steps: the check flags it
    r = runner.invoke(cli, [*args, "--quiet"])
    assert r.exit_code == 0 and "no --out" in r.output and "Below 95%" in r.output
    (tmp_path / "file").write_text("x")
    for bad in (["--models", "rope,relative"], ["--steps", "0"], ["--out", str(tmp_path / "file")]):
        r = runner.invoke(cli, ["experiment", "extrapolation", "--quick", *bad])
        assert r.exit_code == 2 and r.output.count("\n") == 1 and r.output.startswith("Error: ")
