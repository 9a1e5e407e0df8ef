"""``attnlab study [tick N | untick N] [--html OUT.html] [--reset] [--json]``: the week as a study path.

Progress (lessons ticked, quiz scores, practice results) lives in a small SQLite database in the
user's data folder (``--data-dir`` or ``$ATTNLAB_DATA_DIR`` moves it). ``--reset`` asks before it
deletes anything. Logic lives in :mod:`attnlab.practice` (``path``, ``store``, ``study_page``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from attnlab._io import dumps_json
from attnlab.commands._errors import usage_errors
from attnlab.commands._types import SuggestingGroup
from attnlab.practice.path import LESSONS

# the study database's errors (attnlab.practice.store.StudyError) name directory= and reset=True
STUDY_NAMES = {"directory": "--data-dir", "reset": "'attnlab study --reset'"}


def _state(study) -> dict:
    from attnlab.practice.path import progress

    return progress(study.ticked(), study.latest_practice(), study.ever_passed(), study.best_quiz())


@click.group("study", cls=SuggestingGroup, invoke_without_command=True)
@click.option(
    "--data-dir",
    default=None,
    metavar="DIR",
    help="Folder of the study database (default: $ATTNLAB_DATA_DIR, else the XDG data folder).",
)
@click.option(
    "--html", "html_out", default=None, metavar="OUT.html", help="Write the week as one self-contained page."
)
@click.option("--json", "as_json", is_flag=True, help="Print the progress as JSON.")
@click.option("--reset", is_flag=True, help="Delete the study database (asks first).")
@click.option("--yes", is_flag=True, help="With --reset: do not ask.")
@click.pass_context
@usage_errors(names=lambda: STUDY_NAMES)
def study(ctx, data_dir: str | None, html_out: str | None, as_json: bool, reset: bool, yes: bool) -> None:
    """The seven Week 19 lessons (the course page), your quiz scores, the practice and the milestone:
    progress and next. (The Week 1 code blocks are 'attnlab lesson'.)"""
    ctx.obj = {"data_dir": data_dir}
    if ctx.invoked_subcommand is not None:
        if reset or html_out or as_json:
            raise ValueError(
                f"--reset, --html and --json go without a subcommand, not with {ctx.invoked_subcommand!r}"
            )
        return
    from attnlab.practice.store import DB_NAME, Study
    from attnlab.practice.store import data_dir as folder
    from attnlab.practice.store import reset as delete

    if reset:
        path = folder(data_dir) / DB_NAME
        if not path.exists():
            click.echo(f"nothing to delete: {path} does not exist")
            return
        if not yes:
            click.echo(f"Delete {path} (every tick, quiz score and practice result)? [y/N] ", nl=False)
            answer = sys.stdin.readline().strip().lower()
            if answer not in ("y", "yes"):
                asked = "" if answer else " (no answer: to delete without a question, add --yes)"
                click.echo(f"not deleted{asked}")
                raise click.exceptions.Exit(1)
        delete(data_dir)
        click.echo(f"deleted {path}")
        return
    if html_out is not None:
        from attnlab._io import check_out_path

        check_out_path(html_out, "html_out", folder=False)  # before the database is opened
    with Study(data_dir) as s:
        state, latest, path = _state(s), s.latest_practice(), s.path
    if html_out:
        from attnlab._io import atomic_write_bytes
        from attnlab.concepts import FOLDER, write_pages
        from attnlab.practice.study_page import render_html

        folder = Path(html_out).parent / FOLDER
        write_pages(folder, back=(f"../{Path(html_out).name}", "the study page"))
        atomic_write_bytes(html_out, render_html(state, latest).encode("utf-8"))
        if not as_json:
            click.echo(f"wrote {html_out} (concept pages: {folder})")
            return
    if as_json:  # (with --html: also where the page went)
        written = {"html": str(html_out), "concept_pages": str(folder)} if html_out else {}
        click.echo(dumps_json({"database": str(path), **written, **state}, indent=2))
        return
    from attnlab.practice.study_page import render_text

    click.echo(render_text(state))


def _tick(ctx, number: str, ticked: bool) -> None:
    from attnlab.practice.path import get_lesson
    from attnlab.practice.store import Study

    lesson = get_lesson(number)
    with Study(ctx.obj["data_dir"]) as s:
        changed = s.tick(lesson.number, ticked)
    word = "ticked" if ticked else "unticked"
    click.echo(f"{lesson.name} ({lesson.title}) {word}" + ("" if changed else " already"))


@study.command("tick", help=f"Record that Week 19 lesson N (1-{len(LESSONS)}) is one you could explain.")
@click.argument("number", metavar="N")
@click.pass_context
@usage_errors(names=lambda: STUDY_NAMES)
def tick(ctx, number: str) -> None:
    _tick(ctx, number, True)


@study.command("untick", help=f"Take back the tick of Week 19 lesson N (1-{len(LESSONS)}).")
@click.argument("number", metavar="N")
@click.pass_context
@usage_errors(names=lambda: STUDY_NAMES)
def untick(ctx, number: str) -> None:
    _tick(ctx, number, False)
