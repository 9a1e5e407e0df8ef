"""The recall experiment: MQAR batches are what the Zoology paper describes (checked against the
pairs they were built from), a reduced run writes its table, JSON and plot, seeds fix the numbers,
and bad settings are one-line errors."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.experiments.recall import KINDS, Settings, mqar_batch, run, train_one


def test_mqar_batch_asks_for_the_value_that_followed_each_key():
    s = Settings(pairs=(4,), num_keys=8, num_values=5)
    ids, targets, distance = mqar_batch(6, 4, s, torch.Generator().manual_seed(0))
    assert ids.shape == targets.shape == (6, 12)
    for row, tgt, dist in zip(ids.tolist(), targets.tolist(), distance.tolist()):
        pairs = dict(zip(row[0:8:2], row[1:8:2]))
        assert len(pairs) == 4 and all(k < 8 <= v < 13 for k, v in pairs.items())  # distinct keys
        assert sorted(row[8:]) == sorted(pairs)  # every key asked once
        for j, key in enumerate(row[8:]):
            assert tgt[8 + j] == pairs[key]
            assert dist[j] == 8 + j - row[0:8:2].index(key) * 2
        assert all(t == -100 for t in tgt[:8])


@pytest.mark.slow
def test_a_reduced_run_writes_table_json_plot_and_is_seeded(tmp_path):
    s = Settings(pairs=(2,), widths=(8,), steps=2, batch_size=8, eval_size=16)
    first = run(s, tmp_path / "a", log=lambda *_: None)
    assert {(c.kind, c.pairs, c.width) for c in first.cells} == {(k, 2, 8) for k in KINDS}
    again = train_one("ssm", 2, 8, s)  # the same seeds give the same model and the same numbers
    assert [(c.accuracy, c.final_loss) for c in first.cells if c.kind == "ssm"] == [
        (again.accuracy, again.final_loss)
    ]
    data = json.loads((tmp_path / "a" / "results.json").read_text())
    assert len(data["cells"]) == 4 and data["settings"]["steps"] == 2
    assert (tmp_path / "a" / "accuracy_vs_width.png").stat().st_size > 1000
    assert first.table().splitlines()[0].split() == ["kind", "pairs", "d=8"]
    assert all(0 <= c.within_window <= 1 for c in first.cells)


def test_cli_bad_settings_are_one_line_errors():
    res = CliRunner().invoke(cli, ["experiment", "recall", "--steps", "0"])
    assert res.exit_code == 2 and res.output.strip().splitlines() == [
        "Error: steps must be a positive integer, got 0"
    ]


def test_settings_refuse_more_pairs_than_keys():
    with pytest.raises(ValueError, match=r"^pairs=40\b.*\bnum_keys=\d+$"):
        Settings(pairs=(40,))
