"""Help that helps: every option of every command says what it does, and every choice list in the
help is a library registry (never retyped), so adding a task, model or topic updates the help."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from attnlab.cli import COMMANDS, cli, leaf_commands
from attnlab.commands._types import Choice

COMMAND_LIST = leaf_commands()


def test_every_command_is_listed():
    assert {path.split()[0] for path, _ in COMMAND_LIST} == set(COMMANDS)


@pytest.mark.parametrize("path, cmd", COMMAND_LIST, ids=[p for p, _ in COMMAND_LIST])
def test_every_option_has_help_and_no_hand_written_choices(path, cmd):
    for param in cmd.params:
        if isinstance(param, click.Option):
            assert param.help and param.help.strip(), f"attnlab {path} {param.opts[0]} has no help text"
        assert not isinstance(param.type, click.Choice), (
            f"attnlab {path} {param.name}: use commands._types.choice"
        )


def _registry(path: str, flag: str):
    """The library registry each choice must list (imported here independently of the commands)."""
    from attnlab.audit.config import MODELS
    from attnlab.audit.presets import PRESETS
    from attnlab.devices import DEVICES
    from attnlab.embed_stream import FORMATS as STREAM_FORMATS
    from attnlab.lessons.quiz import TOPICS
    from attnlab.models.precision import DTYPES
    from attnlab.models.rnn import ATTENTIONS, CELLS
    from attnlab.nn.config import ACTIVATIONS, ATTENTION_KINDS, FFNS, NORM_PLACES, NORMS
    from attnlab.tasks import TASKS
    from attnlab.tasks.base import SPLITS
    from attnlab.training.config import DECODERS, MODEL_KINDS
    from attnlab.training.schedule import SCHEDULES
    from attnlab.viz.figures import FORMATS

    audit = {"--model": MODELS, "--preset": PRESETS, "--norm": NORM_PLACES, "--norm-kind": NORMS}
    audit |= {"--ffn": FFNS, "--activation": ACTIVATIONS, "--attention": ATTENTION_KINDS}
    common = {"--task": TASKS, "NAME": TASKS, "--split": SPLITS, "--decode": DECODERS, "--topic": TOPICS}
    common |= {"--schedule": SCHEDULES, "--cell": CELLS, "--attention": ATTENTIONS, "--format": FORMATS}
    common |= {"--device": DEVICES, "--dtype": DTYPES}
    if path == "embed" and flag == "--format":
        return STREAM_FORMATS
    if path.startswith("audit"):
        return {**common, **audit}.get(flag)
    if path == "train" and flag == "--model":
        return MODEL_KINDS
    if path == "train" and flag == "--attention":  # attention-rnn's scores, then gpt's block kinds
        return tuple(ATTENTIONS) + ATTENTION_KINDS
    if path == "train" and flag in ("--preset", "--tokenizer"):  # a GPT on text
        from attnlab.tasks.text_tokenizer import TEXT_TOKENIZERS
        from attnlab.training.text_presets import TEXT_PRESETS

        return {"--preset": TEXT_PRESETS, "--tokenizer": TEXT_TOKENIZERS}[flag]
    return common.get(flag)


@pytest.mark.parametrize("path, cmd", COMMAND_LIST, ids=[p for p, _ in COMMAND_LIST])
def test_choices_are_the_registries(path, cmd):
    for param in cmd.params:
        if not isinstance(param.type, Choice):
            continue
        flag = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
        expected = _registry(path, flag)
        if flag == "--path":  # the audit's two attention paths of --measure
            expected = ("sdpa", "explicit")
        assert expected is not None, f"attnlab {path} {flag}: which registry?"
        assert param.type.choices == tuple(expected), (path, flag)
        r = CliRunner().invoke(cli, [*path.split(), "--help"])
        assert "[" + "|".join(expected) + "]" in " ".join(r.output.split()) or len("|".join(expected)) > 60


def test_task_is_marked_required():
    r = CliRunner().invoke(cli, ["train", "--help"])
    assert "Required (unless --resume" in " ".join(r.output.split())
    r = CliRunner().invoke(cli, ["train", "--steps", "5"])
    assert r.exit_code == 2 and "--task is required" in r.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["train", "--task", "reverse", "--lr", "inf"], "lr must be a finite number > 0, got inf"),
        (["train", "--task", "reverse", "--clip", "nan"], "clip must be a finite number >= 0, got nan"),
        (
            ["train", "--task", "reverse", "--weight-decay", "inf"],
            "weight_decay must be a finite number >= 0",
        ),
        (["train", "--task", "reverse", "--d-model", "²"], "--d-model must be a positive integer, got '²'"),
        (
            ["train", "--task", "reverse", "--dropout", "1.5"],
            "--dropout must be a number in [0, 1), got '1.5'",
        ),
        (["tasks", "show", "dates", "--n", "0"], "--n must be a positive integer, got 0"),
        (["quiz", "--topic", "nope"], "--topic must be one of shapes, params"),
    ],
)
def test_bad_values_exit_2_with_one_line(args, fragment):
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and fragment in lines[0]
