"""``attnlab lesson N | --all | --list [--json]``: run the code blocks of the Week 1 notes on attention
(01-05, "Week 1 code block N") and of the Week 19 course page (w19-1 ``class Block``, w19-2 attention
in einsum; not the seven Week 19 lessons of ``attnlab study``) through attnlab and print Concept,
Code, Output and Interpretation."""

from __future__ import annotations

import textwrap

import click

from attnlab._io import dumps_json
from attnlab.commands._errors import BadInput, usage_errors


def _indent(text: str) -> str:
    return textwrap.indent(text, "    ")


def _render(lesson, output: list[str]) -> str:
    wrap = lambda s: textwrap.fill(s, width=100, initial_indent="    ", subsequent_indent="    ")
    return "\n".join(
        [
            f"{lesson.name}: {lesson.title}",
            "Concept",
            wrap(lesson.concept),
            "Code",
            _indent(lesson.code),
            "Output",
            _indent("\n".join(output)),
            "Interpretation",
            wrap(lesson.interpretation),
        ]
    )


@click.command("lesson")
@click.argument("number", required=False)
@click.option("--all", "run_all", is_flag=True, help="Run every code block, 01 to 05, w19-1, w19-2.")
@click.option("--list", "list_only", is_flag=True, help="List the code blocks without running them.")
@click.option("--json", "as_json", is_flag=True, help="Print number, title, concept, code, output as JSON.")
@usage_errors
def lesson(number: str | None, run_all: bool, list_only: bool, as_json: bool) -> None:
    """Run code block NUMBER (01-05) of the Week 1 notes on attention: the original code next to
    attnlab's; w19-1 and w19-2 run the Week 19 course page's class Block and its einsum attention.
    (The seven Week 19 lessons are 'attnlab study'.)"""
    from attnlab.lessons import ALL_LESSONS, get_lesson

    if sum([number is not None, run_all, list_only]) != 1:
        raise BadInput("give exactly one of: a code block number (01-05, w19-1, w19-2), --all, --list")
    if list_only:
        if as_json:
            click.echo(
                dumps_json(
                    [
                        {"number": n, "title": les.title, "concept": les.concept}
                        for n, les in ALL_LESSONS.items()
                    ],
                    indent=2,
                )
            )
        else:
            for n, les in ALL_LESSONS.items():
                click.echo(f"{n:<5}  {les.title:<26} {les.concept}")
        return
    chosen = list(ALL_LESSONS.values()) if run_all else [get_lesson(number)]
    results = [(les, les.run()) for les in chosen]
    if as_json:
        click.echo(
            dumps_json(
                [
                    {
                        "number": les.number,
                        "title": les.title,
                        "concept": les.concept,
                        "code": les.code,
                        "output": out,
                        "interpretation": les.interpretation,
                    }
                    for les, out in results
                ],
                indent=2,
            )
        )
        return
    click.echo("\n\n".join(_render(les, out) for les, out in results))
