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
    from attnlab.embedding.stream import FORMATS as STREAM_FORMATS
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
    if path == "generate" and flag == "--dtype":  # the decode engine's number formats
        from attnlab.decoding.text import DTYPES as GENERATE_DTYPES

        return GENERATE_DTYPES
    if path.startswith("audit"):
        return {**common, **audit}.get(flag)
    if path == "train" and flag == "--model":
        return MODEL_KINDS
    if path == "train" and flag == "--attention":  # attention-rnn's scores, then gpt's block kinds
        return tuple(ATTENTIONS) + ATTENTION_KINDS
    if (path, flag) in (("heads", "--convention"), ("patch", "--point")):  # the analyses' own
        from attnlab.interp.detectors import CONVENTIONS
        from attnlab.interp.patching import POINTS

        return {"--convention": CONVENTIONS, "--point": POINTS}[flag]
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
        assert "[" + "|".join(expected) + "]" in " ".join(r.output.split()), (path, flag, r.output)


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
            "--weight-decay must be a finite number >= 0",
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


@pytest.mark.parametrize(
    "args, line",
    [
        (["embedd"], "Error: No such command 'embedd'; did you mean 'embed'? (try 'attnlab --help')"),
        (
            ["audit", "parms"],
            "Error: No such command 'parms'; did you mean 'params'? (try 'attnlab audit --help')",
        ),
        (
            ["study", "tik", "3"],
            "Error: No such command 'tik'; did you mean 'tick'? (try 'attnlab study --help')",
        ),
        (["xyzzy"], "Error: No such command 'xyzzy' (try 'attnlab --help')"),  # nothing close: no guess
        (["quiz", "--topic", "Softmx"], "got 'Softmx'; did you mean 'softmax'?"),
        (["practice", "start", "attentoin"], "choose one of block, attention; did you mean 'attention'?"),
    ],
)
def test_a_mistyped_name_gets_the_closest_one(args, line, capsys):
    """One ``Error:`` line, exit 2, naming the closest command or choice (difflib)."""
    from attnlab.cli import main

    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and err[0].startswith("Error:")
    assert err[0] == line if line.startswith("Error:") else err[0].endswith(line), err[0]


def test_mistyped_preset_suggests_the_preset():
    r = CliRunner().invoke(cli, ["audit", "cost", "--preset", "gtp2"])
    assert r.exit_code == 2 and r.output.strip().endswith("got 'gtp2'; did you mean 'gpt2'?")
    assert len(r.output.strip().splitlines()) == 1


def _groups(group: click.Group, path: tuple[str, ...] = ()):
    ctx = click.Context(group)
    yield " ".join(path) or "attnlab", group
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            yield from _groups(cmd, (*path, name))


def test_every_group_and_choice_suggests():
    """Every group of the command tree is a SuggestingGroup, and every choice option answers a
    near miss (its first choice with one letter more) with that choice."""
    from attnlab.commands._types import SuggestingGroup

    assert all(isinstance(g, SuggestingGroup) for _, g in _groups(cli)), [
        p for p, g in _groups(cli) if not isinstance(g, SuggestingGroup)
    ]
    checked = 0
    for path, cmd in COMMAND_LIST:
        for param in cmd.params:
            if isinstance(param.type, Choice):
                first = param.type.choices[0]
                with pytest.raises(click.ClickException) as exc:
                    param.type.convert(first + "x", param, None)
                assert exc.value.format_message().endswith(f"; did you mean {first!r}?"), (path, first)
                checked += 1
    assert checked >= 30


@pytest.mark.parametrize("path, cmd", COMMAND_LIST, ids=[p for p, _ in COMMAND_LIST])
def test_every_command_says_what_it_does(path, cmd):
    assert cmd.help and len(cmd.help.split()) >= 4, f"attnlab {path} has no help text"
    r = CliRunner().invoke(cli, [*path.split(), "--help"])
    assert r.exit_code == 0 and " ".join(cmd.help.split()[:6]) in " ".join(r.output.split())


def test_the_command_list_has_a_summary_for_every_command():
    r = CliRunner().invoke(cli, ["--help"])
    listed = r.output.split("Commands:")[1].splitlines()
    names = [line.split()[0] for line in listed if line.startswith("  ") and not line.startswith("   ")]
    assert sorted(names) == sorted(COMMANDS)
    bare = [line.split()[0] for line in listed if line.startswith("  ") and len(line.split()) == 1]
    assert not bare, f"commands listed without a summary: {bare}"


def test_the_command_list_is_read_from_the_source_as_click_has_it():
    """``attnlab --help`` lists each command from its module's source (cli.summary, no import):
    the same help, short help and hidden flag as the imported click command."""
    from attnlab.cli import summary

    ctx = click.Context(cli)
    for name in COMMANDS:
        cmd, read = cli.get_command(ctx, name), summary(name)
        assert (read.help, read.short_help, read.hidden) == (cmd.help, cmd.short_help, cmd.hidden), name


# What a command's --help may not import: the engine and the plotting, paid only by running the command.
HEAVY = ("torch", "matplotlib", "transformers")

# the start of a fresh process's script: help_of(*path) renders `attnlab PATH --help`; heavy() lists
# the HEAVY packages imported so far
_HELP = f"""
import contextlib, io, json, sys
from attnlab.cli import main

def help_of(*path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*path, "--help"])
    return out.getvalue()

def heavy():
    return sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))
"""


def _fresh(code: str) -> dict:
    """Run ``_HELP + code`` in a fresh interpreter (nothing imported yet); it prints one JSON object."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _HELP + code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_command_list_imports_no_command():
    """``attnlab --help`` lists every command without importing one (nor torch)."""
    found = _fresh("""
text = help_of()
loaded = sorted(m for m in sys.modules if m.startswith("attnlab.commands."))
print(json.dumps({"listed": "Commands:" in text, "loaded": loaded, "heavy": heavy()}))
""")
    assert found["listed"] and found["heavy"] == []
    assert set(found["loaded"]) <= {"attnlab.commands._types", "attnlab.commands._errors"}, found["loaded"]


def test_no_help_imports_torch():
    """Every group's and every command's ``--help``, rendered one after another in a fresh process,
    leaves torch, matplotlib and transformers unimported (each command imports its library when run)."""
    found = _fresh("""
from attnlab.cli import leaf_commands
paths = [p.split() for p, _ in leaf_commands()]
groups = sorted({tuple(p[:i]) for p in paths for i in range(1, len(p))})
shown, first = [], None  # first: the help after which a heavy package was found imported
for p in [*map(list, groups), *paths]:
    shown.append(help_of(*p).startswith("Usage:"))
    first = first or (heavy() and " ".join(p))
print(json.dumps({"groups": len(groups), "shown": shown, "heavy": heavy(), "first": first}))
""")
    assert found["groups"] >= 4 and len(found["shown"]) == len(COMMAND_LIST) + found["groups"]
    assert all(found["shown"]) and found["heavy"] == [], found
