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
    Result,
    Row,
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


def _cell(acc: float) -> dict:
    return {"accuracy": acc, "loss": round(1.0 - acc + 0.01, 4)}


def _row(name: str, positions: str, scaling: str, finetune: int, accs: list) -> Row:
    return Row(
        name, positions, scaling, finetune, {t: a and _cell(a) for t, a in zip((16, 32, 64, 128), accs)}
    )


def _quick_like() -> Result:
    """The shape of the quick preset's result: several rows at 1.0, a sinusoidal model at 0.039."""
    rows = [
        _row("NoPE", "none", "", 0, [1.0, 1.0, 1.0, 0.893]),
        _row("sinusoidal", "sinusoidal", "", 0, [0.039, 0.9, 0.9, 0.9]),
        _row("learned", "learned", "", 0, [1.0, None, None, None]),
        _row("RoPE", "rope", "", 0, [1.0, 0.5, 0.3, 0.2]),
        _row("ALiBi", "alibi", "", 0, [1.0, 1.0, 1.0, 1.0]),
        _row("RoPE + PI (at evaluation)", "rope", "PI", 0, [1.0, 0.6, 0.4, 0.3]),
        _row("RoPE + YaRN (at evaluation)", "rope", "YaRN", 0, [1.0, 1.0, 1.0, 0.9]),
        _row("RoPE + PI (fine-tuned at 32, 50 steps)", "rope", "PI", 50, [1.0, 1.0, 1.0, 1.0]),
        _row("RoPE + YaRN (fine-tuned at 32, 50 steps)", "rope", "YaRN", 50, [1.0, 0.97, 0.8, 0.7]),
    ]
    return Result(Settings(train_len=16, multiples=(1, 2, 4, 8)), rows, 1.0)


def test_a_model_that_did_not_learn_at_its_training_length_is_marked_not_ranked():
    result = _quick_like()
    assert result.did_not_learn() == ["sinusoidal"]  # 0.039 at T=16, however it scores further out
    ranking = result.ranking()
    assert "sinusoidal" not in ranking and len(ranking) == len(result.rows) - 1
    # by mean accuracy past T=16; a learned table's n/a counts as 0
    assert ranking[:2] == ["ALiBi", "RoPE + PI (fine-tuned at 32, 50 steps)"] and ranking[-1] == "learned"
    sinusoidal = next(line for line in result.table().splitlines() if line.startswith("sinusoidal"))
    assert sinusoidal.endswith("did not learn the task at its training length")
    ranks = [
        line.rsplit("  ", 1)[1] for line in result.table().splitlines()[3:] if not line.startswith("sin")
    ]
    assert sorted(int(r) for r in ranks) == list(range(1, len(ranking) + 1))
    data = result.to_json()
    assert data["did_not_learn"] == ["sinusoidal"] and data["ranking"] == ranking
    # a fine-tuned row is judged at the length it was fine-tuned at
    result.rows[-1].cells[32] = _cell(0.5)
    assert result.did_not_learn() == ["sinusoidal", "RoPE + YaRN (fine-tuned at 32, 50 steps)"]


def test_every_series_of_the_accuracy_plot_is_visible():
    import matplotlib.pyplot as plt

    from attnlab.viz.positions import accuracy_figure

    fig = accuracy_figure(_quick_like().to_json())
    try:
        fig.canvas.draw()
        ax = fig.axes[0]
        lines = [line for line in ax.get_lines() if line.get_label() and not line.get_label().startswith("_")]
        assert len(lines) == 9 and len({line.get_marker() for line in lines}) == 9
        # where two series score the same, their markers do not sit on one another
        points = [ax.transData.transform(line.get_xydata()) for line in lines]
        for a in range(len(lines)):
            for b in range(a + 1, len(lines)):
                for pa in points[a]:
                    for pb in points[b]:
                        if abs(pa[1] - pb[1]) < 0.5:
                            assert abs(pa[0] - pb[0]) >= 2.0, (lines[a].get_label(), lines[b].get_label())
        # a marker at accuracy 1.0 is drawn whole inside the axes
        top = ax.get_window_extent().y1
        assert all(p[1] + line.get_markersize() / 2 * fig.dpi / 72 <= top for line, pts in zip(lines, points)
                   for p in pts)  # fmt: skip
        # the legend sits beside the axes and hides no point; the sinusoidal entry says why it is unranked
        legend = ax.get_legend().get_window_extent()
        assert legend.x0 >= ax.get_window_extent().x1
        texts = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "sinusoidal (did not learn at its training length)" in texts
    finally:
        plt.close(fig)
