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


@pytest.mark.parametrize("kind", ["linear", "ssm"])
def test_train_saves_the_kind(kind, tmp_path):
    out = tmp_path / "run"
    res = CliRunner().invoke(cli, [*TINY, "--attention", kind, "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert json.loads((out / "config.json").read_text())["config"]["attention"] == kind
    model = load_model(out).eval()
    assert model.config.attention == kind
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        state = model.start(ids[:, :2])
        _, state = model.step(ids[:, 2], state)
        want = model(ids[:, :3])[:, -1]
    assert (state.last_logits - want).abs().max().item() <= 1e-5


def test_block_sparse_without_a_window_is_one_error_line(tmp_path):
    res = CliRunner().invoke(cli, [*TINY, "--attention", "block_sparse", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        "Error: GPTConfig: attention='block_sparse' needs window=W (it skips the tiles a sliding window "
        "leaves empty); for full attention use 'sdpa'"
    ]
