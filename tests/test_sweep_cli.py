"""A sweep of every CLI command's options with careless and hostile values.

Each option of each command gets values a careless or hostile user types (negative, zero, NaN,
inf, 1e400, 10^40, a Unicode digit, empty, text that is not UTF-8, a word): the command must exit 0
or exit 2 with ONE ``Error: ...`` line, never a traceback, and never hang (a 60 s alarm per call).
A value that is not a finite number (NaN, inf, 1e400) is never accepted by a numeric option: only
the options of :data:`TEXT_OPTIONS`, which take names or text, may exit 0 with one.
"""

from __future__ import annotations

import contextlib
import io
import signal
import sys

import click
import pytest

from attnlab.cli import leaf_commands, main

HOSTILE = ["-1", "0", "nan", "inf", "-inf", "1e400", "10" + "0" * 40, "\u00b2", "", "\udcff", "abc"]
# a cheap, valid invocation of each command, so that an accepted hostile value still finishes fast
CLAIMS = ("paths", "residuals", "gqa", "icl", "relations", "scoring")  # the notes' claims, measured
BASE = {
    "audit cost": [],
    "audit params": [],
    "audit shapes": ["--seq", "4", "--batch", "1", "--d-model", "16", "--heads", "2", "--d-ff", "32"],
    "embed": ["a cat"],
    "evaluate": ["{run}", "--n", "4"],
    "explore": ["a cat", "--out", "{tmp}/e.html"],
    "figures": ["--out", "{tmp}/figs"],
    "quiz": ["--count", "1"],
    "tasks show": ["reverse", "--n", "2"],
    "train": [
        "--task",
        "reverse",
        "--steps",
        "1",
        "--d-model",
        "8",
        "--heads",
        "2",
        "--d-ff",
        "16",
        "--layers",
        "1",
        "--eval-size",
        "2",
        "--train-size",
        "64",
        "--batch",
        "8",
        "--out",
        "{tmp}/r",
    ],
    "translate": ["{run}", "abc"],
    "audit peak": ["--seconds", "0.05"],
    "demo": ["--quick", "--out", "{file}"],  # --out a file: an accepted value ends at the output check
    "experiment bottleneck": ["--quick", "--steps", "1", "--out", "{file}"],  # (not minutes of training)
    "experiment extrapolation": ["--quick", "--steps", "1", "--out", "{file}"],
    "experiment induction": ["--quick", "--steps", "1", "--out", "{file}"],
    "experiment recall": ["--quick", "--steps", "1", "--out", "{file}"],
    "experiment beam": ["--quick", "--out", "{file}"],  # an --out that is a file: refused before training
    "experiment facts": ["--quick", "--out", "{file}"],
    **{f"experiment {name}": ["--quick", "--out", "{file}"] for name in CLAIMS},  # ends at --out
    "heads": ["minilm", "--tokens", "repeat", "--length", "4", "--batch", "1"],
    "practice check": ["attention", "{file}"],  # "x": Python without the function; every check fails fast
    "practice start": ["attention", "--dir", "{tmp}/p"],
    "prune": ["{file}"],  # a model that is not there: an accepted --seed ends at loading it
    "serve": ["{file}"],  # likewise: an accepted --port/--host/--queue ends at loading it, never serves
    "patch": ["{file}", "--clean", "a", "--corrupt", "b", "--target", "c"],  # likewise: ends at loading
    "attribute": ["{file}", "a", "--target", "c"],
    "compose": ["{file}"],
}
# commands whose options this sweep does not reach, and why (checked: every other command is in BASE)
ELSEWHERE = {
    "generate": "needs a Hugging Face checkpoint folder (tests/models/hf/test_commands.py tests its options)",
    "experiment decoding": "needs a text run (tests/experiments/test_beam_blandness.py tests its options)",
    "experiment faithfulness": "needs a trained text run (tests/experiments/test_faithfulness.py)",
    "export": "needs a trained text run (tests/training/test_export.py tests its flags)",
}
# positional arguments, swept the same way: the command with "{value}" where the argument goes
ARGUMENTS = {
    "lesson": ["{value}"],
    "myths": ["{value}"],
    "study tick": ["{value}"],
    "study untick": ["{value}"],
    "tasks show": ["{value}", "--n", "2"],
    "practice start": ["{value}", "--dir", "{tmp}/p"],
    "quiz": ["--count", "1", "--topic", "{value}"],
}
# streamed on purpose (bounded memory, tested in tests/tasks): 10^40 examples print until stopped
STREAMED = {("tasks show", "--n")}
SKIP_OPTIONS = {"--out", "--model", "--task", "--data-dir", "--dir"}  # paths and names: swept elsewhere
NON_FINITE = {"nan", "inf", "-inf", "1e400"}  # `heads --threshold nan` was accepted (exit 0)
# options that take "nan" as text: embed --field (a JSON field name), audit peak --config (a path,
# read only with --mfu)
TEXT_OPTIONS = {("embed", "--field"), ("audit peak", "--config")}


CASES = [
    (path, p.opts[0])
    for path, cmd in leaf_commands()
    if path in BASE
    for p in cmd.params
    if isinstance(p, click.Option) and not p.is_flag and p.opts[0] not in SKIP_OPTIONS
]


def _leaf_commands() -> list[str]:
    return [path for path, _ in leaf_commands()]


def test_every_command_is_swept():
    """A new command (or one that grew options) joins the sweep: it is in BASE (its options), in
    ARGUMENTS (no options, only arguments) or, with the reason, in ELSEWHERE."""
    nothing_to_sweep = {"tasks list", "practice list"}  # no option, or only --data-dir (a path)
    unswept = {c for c in _leaf_commands() if not any(cmd == c for cmd, _ in CASES)}
    assert unswept - set(ARGUMENTS) - set(ELSEWHERE) == nothing_to_sweep
    assert set(BASE) | set(ARGUMENTS) | set(ELSEWHERE) | nothing_to_sweep == set(_leaf_commands())


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def _invoke(args: list[str]):
    """Run the console entry point (``attnlab.cli.main``, which turns click's usage errors into one
    line) in this process: ``(exit status, stdout + stderr, unexpected exception or None)``."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            sys.stdin = io.StringIO("")  # a prompt (quiz) reads end of input
            main(args)
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        return code, out.getvalue(), None
    except Hang:
        raise
    except BaseException as exc:  # a traceback for the user: what this sweep exists to find
        return 1, out.getvalue(), exc
    finally:
        sys.stdin = sys.__stdin__
    return 0, out.getvalue(), None


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from attnlab.training import TrainConfig, train

    out = tmp_path_factory.mktemp("sweep") / "run"
    cfg = TrainConfig(
        task="reverse",
        model="transformer",
        steps=2,
        batch_size=8,
        train_size=64,
        eval_size=2,
        model_params={"d_model": 8, "heads": 2, "d_ff": 16, "layers": 1},
    )
    train(cfg, out, progress=False)
    return out


def _sweep(args_for, numeric: bool = False) -> list[str]:
    """Run the command ``args_for(value)`` for every hostile value (``None``: skip the value); each
    must exit 0, or 2 with one ``Error:`` line, within 60 s (and, when ``numeric``, a value in
    :data:`NON_FINITE` must exit 2). Returns the failures, one line each."""
    failures = []
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for value in HOSTILE:
            args = args_for(value)
            if args is None:
                continue
            signal.alarm(60)
            try:
                code, output, error = _invoke(args)
            except Hang:
                failures.append(f"{value!r}: hung for 60 s")
                continue
            finally:
                signal.alarm(0)
            if error is not None or code not in (0, 2):
                failures.append(f"{value!r}: exit {code}, {type(error).__name__}: {str(error)[:120]}")
            elif code == 2 and (not output.startswith("Error: ") or output.count("\n") != 1):
                failures.append(f"{value!r}: exit 2 but not one Error line: {output[:200]!r}")
            elif numeric and value in NON_FINITE and code != 2:
                failures.append(f"{value!r}: accepted (exit {code}); a numeric option must refuse it")
    finally:
        signal.signal(signal.SIGALRM, previous)
    return failures


@pytest.mark.slow
@pytest.mark.parametrize("command,option", CASES, ids=[f"{c}:{o}" for c, o in CASES])
def test_hostile_option_values_exit_cleanly(command, option, run_dir, tmp_path):
    def args_for(value):
        if (command, option) in STREAMED and len(value) > 20:
            return None
        (tmp_path / "a-file").write_text("x")
        base = [a.format(tmp=tmp_path, run=run_dir, file=tmp_path / "a-file") for a in BASE[command]]
        return command.split() + base + [option, value]

    failures = _sweep(args_for, numeric=(command, option) not in TEXT_OPTIONS)
    assert not failures, f"{command} {option}:\n" + "\n".join(failures)


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(ARGUMENTS))
def test_hostile_argument_values_exit_cleanly(command, tmp_path):
    failures = _sweep(
        lambda value: command.split() + [a.format(tmp=tmp_path, value=value) for a in ARGUMENTS[command]]
    )
    assert not failures, f"{command} arguments:\n" + "\n".join(failures)


# a folder option given a file, or a folder under a file (`practice start --dir FILE` was a
# FileExistsError traceback): the one line each must print, "{file}" standing for the file
FOLDER_OPTIONS = {
    "practice start attention --dir {file}": "Error: --dir {file} exists and is not a folder",
    "practice start block --dir {file}": "Error: --dir {file} exists and is not a folder",
    "practice start attention --dir {file}/sub": (
        "Error: --dir {file}/sub: {file} is a file, so nothing can be written under it"
    ),
}


@pytest.mark.parametrize("args", sorted(FOLDER_OPTIONS))
def test_a_file_where_a_folder_is_wanted_is_one_line(args, tmp_path):
    file = tmp_path / "a-file"
    file.write_text("x")
    code, output, error = _invoke(args.format(file=file).split())
    assert (code, error) == (2, None)
    assert output == FOLDER_OPTIONS[args].format(file=file) + "\n"
