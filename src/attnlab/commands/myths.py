"""``attnlab myths [N] [--json]``: list the misconceptions of the notes, or refute one by computing it."""

from __future__ import annotations

import textwrap

import click

from attnlab._io import dumps_json
from attnlab.commands._errors import usage_errors


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


@click.command("myths")
@click.argument("number", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the claim(s) and the computed evidence as JSON.")
@usage_errors
def myths(number: str | None, as_json: bool) -> None:
    """List every misconception of the source documents, or demonstrate why myth NUMBER is false."""
    from attnlab.lessons.myths import MYTHS, get_myth

    if number is None:
        if as_json:
            click.echo(
                dumps_json(
                    [
                        {"number": m.number, "claim": m.claim, "source": m.source, "why_false": m.why_false}
                        for m in MYTHS
                    ],
                    indent=2,
                )
            )
            return
        click.echo(
            f"{len(MYTHS)} misconceptions that the Week 1 notes on attention, the plain-language notes and "
            "the Week 19 course page warn about (each one's source: --json); "
            "`attnlab myths N` computes why N is false.\n"
        )
        for m in MYTHS:
            click.echo(f"{m.number:3d}. {m.claim}")
        return
    myth = get_myth(number)
    lines, evidence = myth.demonstrate()
    if as_json:
        click.echo(
            dumps_json(
                {
                    "number": myth.number,
                    "claim": myth.claim,
                    "source": myth.source,
                    "why_false": myth.why_false,
                    "evidence": _jsonable(evidence),
                },
                indent=2,
            )
        )
        return
    click.echo(f"Myth {myth.number}: {myth.claim}")
    click.echo(f"Source: {myth.source}")
    click.echo(textwrap.fill(f"Why it is false: {myth.why_false}", width=100))
    click.echo("\nComputed with attnlab:")
    for line in lines:
        click.echo(f"  {line}")
