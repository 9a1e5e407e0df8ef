"""``attnlab train --model gpt --attention KIND``: the block kinds of attnlab.nn.config.ATTENTION_KINDS
reach the saved model's config (and generate with their recurrent state); bad combinations are one
``Error:`` line with exit status 2."""

import json

import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.models import load_model

TINY = ["train", "--task", "reverse", "--model", "gpt", "--steps", "3", "--batch", "8", "--train-size", "50"]
TINY += ["--eval-size", "4", "--d-model", "16", "--heads", "2", "--max-len", "5", "--quiet"]


@pytest.mark.parametrize("kind, window", [("linear", None), ("ssm", None), ("block_sparse", 3), ("sdpa", 2)])
def test_train_saves_the_kind(kind, window, tmp_path):
    out = tmp_path / "run"
    extra = [] if window is None else ["--window", str(window)]
    args = [*TINY, "--attention", kind, *extra, "--out", str(out)]
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    saved = json.loads((out / "config.json").read_text())["config"]["block"]  # GPTConfig holds its block
    assert (saved["attention"], saved["window"]) == (kind, window)
    model = load_model(out).eval()
    assert (model.config.attention, model.config.window) == (kind, window)
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        state = model.start(ids[:, :2])
        _, state = model.step(ids[:, 2], state)
        want = model(ids[:, :3])[:, -1]
    assert (state.last_logits - want).abs().max().item() <= 1e-5


def test_window_is_a_gpt_option_only(tmp_path):
    args = [*TINY, "--window", "3", "--out", str(tmp_path / "r")]
    args[args.index("gpt")] = "transformer"
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2
    assert "window" in res.output and len(res.output.strip().splitlines()) == 1


def test_block_sparse_without_a_window_is_one_error_line(tmp_path):
    res = CliRunner().invoke(cli, [*TINY, "--attention", "block_sparse", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        "Error: GPTConfig: --attention 'block_sparse' needs --window W (it skips the tiles a sliding window "
        "leaves empty); for full attention use 'sdpa'"
    ]
