"""A text run from Python: ``text_config`` builds the same config as ``attnlab train --text --preset``,
and ``train_text`` trains it (what the language-model experiments and the demo call)."""

import json

import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.training import TrainConfig
from attnlab.training.checkpoint import load_trained
from attnlab.training.text_presets import TEXT_PRESETS, text_config, train_text

SMALL = {"steps": 3, "d_model": 16, "layers": 1, "heads": 2, "context": 16, "batch": 4, "eval_size": 2}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, play):
    path = tmp_path_factory.mktemp("presets") / "play.txt"
    path.write_text(play(60), encoding="utf-8")
    return path


def test_a_preset_fills_what_is_not_given(corpus):
    config = text_config("quick", str(corpus), steps=7)
    quick = TEXT_PRESETS["quick"]
    assert config.task == "text" and config.model == "gpt"
    assert config.steps == 7 and config.batch_size == quick["batch"] and config.lr == quick["lr"]
    assert (
        config.model_params["d_model"] == quick["d_model"]
        and config.model_params["layers"] == quick["layers"]
    )
    assert config.task_params["context"] == config.model_params["max_len"] == quick["context"]  # positions
    assert config.task_params["source"] == str(corpus.resolve())
    assert text_config("nanogpt").task_params["source"] == "shakespeare"  # read only when trained


def test_the_command_line_builds_the_same_config(corpus, tmp_path):
    flags = [f"--{k.replace('_', '-')}" for k in SMALL]
    args = [a for k, flag in zip(SMALL, flags) for a in (flag, str(SMALL[k]))]
    out = tmp_path / "cli"
    done = CliRunner().invoke(
        cli,
        ["train", "--text", str(corpus), "--preset", "quick", *args, "--out", str(out), "--json", "--quiet"],
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["step"] == 3
    saved = TrainConfig.from_dict(load_trained(out)[1]["config"])
    assert saved == text_config("quick", str(corpus), **SMALL)
    result = train_text("quick", tmp_path / "lib", source=str(corpus), **SMALL)
    assert result.step == 3 and result.extra["text"]["vocab_size"] == json.loads(done.stdout)["vocab_size"]
    assert TrainConfig.from_dict(load_trained(tmp_path / "lib")[1]["config"]) == saved


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"preset": "huge"}, "preset must be one of"),
        ({"depth": 3}, r"unknown text-run option\(s\) \['depth'\]"),
        ({"steps": 0}, "steps must be a positive integer"),
    ],
)
def test_bad_options_are_named(kwargs, message):
    preset = kwargs.pop("preset", "quick")
    with pytest.raises(ValueError, match=message):
        text_config(preset, **kwargs)
