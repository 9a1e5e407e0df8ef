"""``attnlab experiment bottleneck``: fixed context vs attention, accuracy by source length."""

from __future__ import annotations

import dataclasses
import json

import click

from attnlab.commands._errors import usage_errors
from attnlab.commands._types import POSITIVE, SEED, choice


@click.group()
def experiment() -> None:
    """Studies that train small models and write tables and plots."""


@experiment.command()
@click.option(
    "--task",
    type=choice("attnlab.tasks:TASKS"),
    default="reverse",
    show_default=True,
    help="The built-in task the models learn.",
)
@click.option("--quick", is_flag=True, help="The demo's small run (about 2-3 minutes on 2 cores).")
@click.option("--out", type=str, required=True, help="Folder for the results.")
@click.option("--steps", type=POSITIVE, default=None, help="Training steps per model (overrides the preset).")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Random seed (data and models).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.option("--json", "as_json", is_flag=True, help="Print results.json instead of the table.")
@usage_errors
def bottleneck(
    task: str, quick: bool, out: str, steps: int | None, seed: int, quiet: bool, as_json: bool
) -> None:
    """Train Seq2SeqRNN (fixed context), AttentionRNN (Bahdanau, Luong) and a Transformer at
    comparable sizes; report exact and token accuracy by source-length bucket on held-out data."""
    from attnlab.experiments.bottleneck import DATES, QUICK, Settings, run

    settings = QUICK if quick else Settings()
    changes = {"task": task, "seed": seed}
    if task == "dates":
        changes.update(DATES)
    if steps is not None:
        changes["steps"] = steps
    settings = dataclasses.replace(settings, **changes)
    from attnlab._io import check_out_path

    check_out_path(out, "--out")  # before minutes of training
    log = (lambda *_: None) if as_json else click.echo
    result = run(settings, out, progress=not quiet, log=log)
    if as_json:
        with open(result.files["json"]) as f:
            click.echo(json.dumps(json.load(f), indent=2))
        return
    click.echo("")
    click.echo("Exact-sequence accuracy on held-out sources, by source length:")
    click.echo(result.table())
    click.echo("")
    click.echo(result.summary)
    click.echo(
        f"wrote {result.files['csv']}, {result.files['json']}, {result.files['plot']} and "
        f"{len(result.heatmaps)} heatmaps"
    )
