"""``attnlab practice list | start EXERCISE | check EXERCISE FILE``: graded practice for the week.

``attention`` (the core practice) runs the learner's NumPy functions in a separate, time- and
memory-limited process against torch SDPA and attnlab's reference and names the likely mistake;
``block`` (the warm-up and milestone) grades a drawing of the block against ``attnlab audit shapes``
of the real module. Results are recorded in the study database (``attnlab study``). Exit status: 0
when every check passes, 1 when one fails, 2 for bad input. Logic lives in :mod:`attnlab.practice`.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

import click

from attnlab._io import dumps_json
from attnlab.commands._errors import BadInput, usage_errors
from attnlab.commands._types import SuggestingGroup
from attnlab.commands.study import STUDY_NAMES
from attnlab.practice.path import EXERCISES, GRADED

DATA_DIR_HELP = "Folder of the study database (default: $ATTNLAB_DATA_DIR, else the XDG data folder)."


def _number(flag: str, value: str | None, cast, low: float, high: float):
    if value is None:
        return None
    lo, hi = (f"{int(b):,}" if b == int(b) else f"{b:g}" for b in (low, high))  # 4,294,967,295, not 4.29e+09
    said = f"{flag} must be a number from {lo} to {hi}, got {value!r}"
    try:
        x = cast(value)
    except ValueError:
        raise BadInput(said) from None
    if not low <= x <= high:
        raise BadInput(said)
    return x


@contextlib.contextmanager
def _stop_cleanly():
    """SIGTERM or SIGHUP (a supervisor, a closed terminal) end the grading as Ctrl-C would: the
    sandbox kills its worker and deletes its folder on the way out; exit status 128 + the signal.
    (SIGKILL cannot be caught: the worker then dies by its parent-death signal.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    before = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _exercise(name: str, graded_only: bool = True) -> str:
    from attnlab.practice.path import get_exercise

    return get_exercise(name, graded_only).name


def _record(data_dir: str | None, exercise: str, file: str, report) -> None:
    """Store the result; a database that cannot be used is reported (one line), the grade still stands."""
    from attnlab.practice.store import Study, StudyError

    try:
        with Study(data_dir) as study:
            study.record_practice(exercise, file, report.score, report.total, report.to_json()["checks"])
    except StudyError as exc:
        click.echo(f"warning: the result was not recorded: {exc}", err=True)


@click.group("practice", cls=SuggestingGroup)
def practice() -> None:
    """The week's practice, graded: implement attention in NumPy; draw the block from memory."""


@practice.command("list")
@click.option("--data-dir", default=None, metavar="DIR", help=DATA_DIR_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the exercises and their status as JSON.")
@usage_errors(names=lambda: STUDY_NAMES)
def list_(data_dir: str | None, as_json: bool) -> None:
    """The exercises with their status for this user."""
    from attnlab.practice.store import Study

    with Study(data_dir) as study:
        latest, passed = study.latest_practice(), study.ever_passed()
    rows = []
    for e in EXERCISES:
        last = latest.get(e.name)
        if not e.graded:
            status = "not graded"
        elif last is None:
            status = "not started"
        else:
            status = f"latest {last['score']}/{last['total']}" + (", passed" if e.name in passed else "")
        rows.append({"name": e.name, "level": e.level, "title": e.title, "task": e.task, "status": status})
    if as_json:
        click.echo(dumps_json(rows, indent=2))
        return
    from attnlab.practice.path import practice_next

    for r in rows:
        click.echo(f"{r['name']:<10} {r['level']:<8} {r['title']:<30} {r['status']}")
    for line in practice_next(latest, passed):
        click.echo(line)


@practice.command(
    "start",
    help=f"Write the starter file of EXERCISE ({' or '.join(GRADED)}); an existing file is never "
    "overwritten.",
)
@click.argument("exercise")
@click.option(
    "--dir",
    "directory",
    default=".",
    show_default=True,
    metavar="D",
    help="Folder to write the starter file into.",
)
@click.option(
    "--seed", default=None, metavar="S", help="block: seed of the sizes to draw (default: a fresh one)."
)
@usage_errors
def start(exercise: str, directory: str, seed: str | None) -> None:
    from attnlab._io import check_out_path

    exercise = _exercise(exercise)
    check_out_path(directory, "directory")  # a file, or a folder under a file: one line, not an OSError
    if exercise == "attention":
        from attnlab.practice.starter import FUNCTIONS, write_starter

        path = write_starter(directory)
        click.echo(f"wrote {path}: write {', '.join(FUNCTIONS)} in NumPy (each has its docstring),")
        click.echo(f"then run: attnlab practice check attention {path}")
        return
    from pathlib import Path

    from attnlab.practice.block import block_starter, choose_sizes

    sizes = choose_sizes(_number("--seed", seed, int, 0, 2**32 - 1))
    path = Path(directory) / "block.txt"
    if path.exists():
        raise BadInput(f"{path} already exists; it is never overwritten (pass --dir to write elsewhere)")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(block_starter(sizes), encoding="utf-8")
    click.echo(
        f"wrote {path}: draw the block for B={sizes['B']}, T={sizes['T']}, d={sizes['d']}, "
        f"h={sizes['h']}, d_ff={sizes['d_ff']}"
    )
    click.echo(f"then run: attnlab practice check block {path}")


@practice.command(
    "check",
    help=f"Grade FILE for EXERCISE ({' or '.join(GRADED)}): your NumPy file, or your block drawing "
    "('-' reads a drawing from stdin).",
)
@click.argument("exercise")
@click.argument("file")
@click.option("--json", "as_json", is_flag=True, help="Print every check's verdict as JSON.")
@click.option("--quiet", is_flag=True, help="Print only the failed checks and the score.")
@click.option(
    "--seed", default="0", show_default=True, metavar="S", help="attention: seed of the random cases."
)
@click.option(
    "--timeout",
    "timeout_s",
    default="5",
    show_default=True,
    metavar="SECONDS",
    help="attention: time limit of each check.",
)
@click.option(
    "--memory-mb",
    default="1024",
    show_default=True,
    metavar="MB",
    help="attention: address-space limit of the process running your code.",
)
@click.option("--data-dir", default=None, metavar="DIR", help=DATA_DIR_HELP)
@usage_errors(names=lambda: STUDY_NAMES)
def check(
    exercise: str,
    file: str,
    as_json: bool,
    quiet: bool,
    seed: str,
    timeout_s: str,
    memory_mb: str,
    data_dir: str | None,
) -> None:
    from attnlab.practice.feedback import Ledger

    exercise = _exercise(exercise)
    ledger = Ledger()  # each likely mistake is stated once, after the checks, with those it explains

    def show(r) -> None:
        lines = ledger.lines(r)
        if not (quiet and r.passed):
            click.echo("\n".join(lines))

    if as_json:
        show = None
    if exercise == "attention":
        from attnlab.practice.grade import grade_attention
        from attnlab.practice.starter import check_file

        seed_n = _number("--seed", seed, int, 0, 2**32 - 1)
        limit = _number("--timeout", timeout_s, float, 0.1, 600)
        memory = _number("--memory-mb", memory_mb, int, 256, 1 << 20)
        check_file(file)  # bad input exits 2 before anything is printed
        if show is not None and not quiet:
            click.echo(
                f"attnlab practice check attention {file}: each check runs your code in a separate "
                f"process ({limit:g} s, {memory} MiB at most)"
            )
        with _stop_cleanly():
            report = grade_attention(file, seed=seed_n, timeout_s=limit, memory_mb=memory, progress=show)
    else:
        from attnlab.practice.block import grade_block, read_drawing

        report = grade_block(read_drawing(file, sys.stdin), file)
        if show is not None:
            if not quiet:
                click.echo(
                    f"attnlab practice check block {file}: graded against 'attnlab audit shapes' of the "
                    "real module"
                )
            for r in report.results:
                show(r)
    _record(data_dir, exercise, file, report)
    if as_json:
        for r in report.results:
            ledger.lines(r)
        body = {"exercise": exercise, **report.to_json(), "likely_mistakes": ledger.to_json()}
        click.echo(dumps_json(body, indent=2))
    else:
        for line in ledger.summary():
            click.echo(line)
        click.echo(
            f"score: {report.score}/{report.total} checks passed"
            + ("" if report.score == report.total else "; fix the first FAIL and run it again")
        )
    if report.score != report.total:
        raise click.exceptions.Exit(1)
