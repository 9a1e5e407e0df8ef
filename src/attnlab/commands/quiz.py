"""``attnlab quiz [--topic T] [--seed S] [--count N] [--answers]``: check yourself with worked answers.

Interactive: each question waits for an answer, says right or wrong and shows the worked solution.
``q`` (or ``quit``), end of input and Ctrl-C stop the quiz and print the score so far. An answer that
is not a number is explained and the question asked again.
"""

from __future__ import annotations

import secrets
import sys

import click

from attnlab._io import dumps_json
from attnlab.commands._errors import usage_errors
from attnlab.commands._types import choice
from attnlab.commands.study import STUDY_NAMES


def _int_option(name: str, value: str | None, minimum: int) -> int | None:
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if n < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {n}")
    return n


def _show_solution(q) -> None:
    tol = q.tolerance()
    click.echo(f"  Answer: {q.format_answer()}" + (f" (answers {tol.split(':')[0]} count)" if tol else ""))
    for i, step in enumerate(q.steps, 1):
        click.echo(f"    {i}. {step}")


def _score(right: int, asked: int, total: int, topic: str | None = None, seed: int | None = None) -> None:
    from attnlab.practice.path import quiz_score  # the form `attnlab study` shows it in

    click.echo(f"Score: {quiz_score(right, asked, total)}")
    if asked:  # recorded for `attnlab study`; an unusable database is a warning, never a lost quiz
        from attnlab.practice.store import Study, StudyError

        try:
            with Study() as study:
                study.record_quiz(topic, seed, right, asked, total)
        except StudyError as exc:
            click.echo(f"warning: the score was not recorded: {exc}", err=True)


@click.command("quiz")
@click.option(
    "--topic",
    "topic",
    default=None,
    type=choice("attnlab.lessons.quiz:TOPICS"),
    help="Ask about one topic only (default: all, mixed).",
)
@click.option(
    "--seed", "seed", default=None, metavar="S", help="Random seed (default: a fresh one, printed)."
)
@click.option("--count", "count", default="5", metavar="N", show_default=True, help="Number of questions.")
@click.option("--answers", is_flag=True, help="Print the questions with their worked answers and exit.")
@click.option(
    "--json", "as_json", is_flag=True, help="With --answers: the questions, answers and steps as JSON."
)
@usage_errors(names=lambda: {**STUDY_NAMES, "directory": "$ATTNLAB_DATA_DIR"})
def quiz(topic: str | None, seed: str | None, count: str, answers: bool, as_json: bool) -> None:
    """Questions in the style of the notes' worked checks, with random numbers and worked solutions;
    --topic concepts asks the course documents' own conceptual questions (multiple choice)."""
    from attnlab.lessons.quiz import TOPICS, iter_quiz

    if topic is not None and topic not in TOPICS:
        raise ValueError(f"unknown topic {topic!r}: choose one of {', '.join(TOPICS)}")
    n = _int_option("--count", count, 1)
    if n > 200:
        raise ValueError(f"--count must be at most 200, got {n}")
    s = _int_option("--seed", seed, 0)
    if s is None:
        s = secrets.randbelow(10**6)
    questions = iter_quiz(topic, seed=s, count=n)
    if as_json:
        if not answers:
            raise ValueError("--json prints the answers: use it with --answers")
        click.echo(_questions_json(questions, s, topic))
        return
    click.echo(
        f"attnlab quiz: {n} question{'s' if n > 1 else ''}, "
        f"topic {topic or 'all'}, seed {s} (--seed {s} repeats them)"
    )

    if answers:
        for i, q in enumerate(questions, 1):
            click.echo(f"\nQ{i} [{q.topic}] {q.text}")
            _show_solution(q)
        return

    click.echo("Answer with a number (1,152 or 1.152e3), a list like [0.5, 1] or a choice's letter; q quits.")
    right, asked = _ask(questions, n)
    _score(right, asked, n, topic, s)


def _questions_json(questions, seed: int, topic: str | None) -> str:
    """``--answers --json``: every question with its answer, worked steps and data."""
    return dumps_json(
        {
            "seed": seed,
            "topic": topic,
            "questions": [
                {
                    "topic": q.topic,
                    "variant": q.variant,
                    "question": q.text,
                    "answer": list(q.answer) if q.is_vector else q.answer,
                    "answer_text": q.format_answer(),
                    "rel_tol": q.rel_tol,
                    "steps": q.steps,
                    "data": q.data,
                    **({"choices": list(q.choices)} if q.choices else {}),
                }
                for q in questions
            ],
        },
        indent=2,
    )


def _ask(questions, n: int) -> tuple[int, int]:
    """Ask each question on stdin, grade it and show the worked solution; stops at the end of input,
    on q/quit/exit or Ctrl-C. Returns ``(right, asked)``."""
    from attnlab.lessons.quiz import grade

    right = asked = 0
    try:
        for i, q in enumerate(questions, 1):
            hint = f" ({len(q.answer)} numbers)" if q.is_vector else ""
            if q.choices:
                hint = f" (a letter, {q.letters})"
            if q.tolerance():
                hint = f" ({q.tolerance()})"
            click.echo(f"\nQ{i}/{n} [{q.topic}] {q.text}{hint}")
            got = _read_answer(q, sys.stdin)
            if got is None:
                return right, asked
            line, given = got
            asked += 1
            if grade(q, given):
                right += 1
                click.echo("  Right.")
            else:
                click.echo(f"  Not quite: you gave {line.strip()}.")
            _show_solution(q)
    except KeyboardInterrupt:
        click.echo("\ninterrupted.")
    return right, asked


def _read_answer(q, stdin):
    """Read lines until one parses as an answer of the right size: ``(line, answer)``, or None when
    the input ends or the user quits."""
    from attnlab.lessons.quiz import read_answer

    while True:
        click.echo("> ", nl=False)
        line = stdin.readline()
        if line and not stdin.isatty():
            click.echo(line.rstrip("\n"))  # echo piped answers so the transcript reads well
        if line == "":
            click.echo("\nend of input.")
            return None
        if line.strip().lower() in ("q", "quit", "exit"):
            return None
        try:
            given = read_answer(q, line)
        except ValueError as exc:
            click.echo(f"  {exc}; try again (q quits).")
            continue
        if q.is_vector and len(given) != len(q.answer):
            click.echo(
                f"  the answer has {len(q.answer)} numbers, you gave {len(given)}; try again (q quits)."
            )
            continue
        return line, given
