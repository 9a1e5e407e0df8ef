"""``attnlab demo --out out/demo``: the whole tour as one self-contained report (what ``make demo`` runs)."""

from __future__ import annotations

import click

from attnlab.commands._errors import usage_errors
from attnlab.commands._types import POSITIVE


@click.command()
@click.option(
    "--out",
    type=str,
    default="out/demo",
    show_default=True,
    help="Folder for index.html, explorer pages and experiment files.",
)
@click.option(
    "--steps", type=POSITIVE, default=None, help="Training steps per model of the quick experiment."
)
@click.option(
    "--quick",
    is_flag=True,
    help="Every section at tiny sizes (about a minute; the numbers are not meant to be read): a smoke test.",
)
@click.option("--no-explorer", is_flag=True, help="Skip the attention explorer pages (MiniLM).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.option(
    "--overwrite",
    is_flag=True,
    help="Write into an --out folder that holds other files (they may be replaced).",
)
@usage_errors
def demo(out: str, steps: int | None, quick: bool, no_explorer: bool, quiet: bool, overwrite: bool) -> None:
    """Build OUT/index.html: the five lessons, the encoder-layer audit, the quick bottleneck
    experiment with its plot, table and alignment heatmaps, induction heads, a GPT trained on
    Shakespeare with the decoding, induction and faithfulness experiments, and the attention
    explorer."""
    import dataclasses

    from attnlab._io import check_out_path
    from attnlab.experiments.bottleneck import QUICK
    from attnlab.report.language_model import QUICK_LM
    from attnlab.report.tour import build_demo, check_demo_folder, quick_settings

    check_out_path(out)  # before minutes of work
    check_demo_folder(out, overwrite)
    settings, induction = quick_settings() if quick else (QUICK, None)
    if steps is not None:
        settings = dataclasses.replace(settings, steps=steps)
    result = build_demo(
        out,
        settings=settings,
        progress=not quiet,
        explorer=not no_explorer,
        induction=induction,
        language_model=QUICK_LM if quick else None,
    )
    missing = {k: v for k, v in result["sections"].items() if isinstance(v, str)}
    for key, err in missing.items():
        click.echo(f"warning: section {key} could not be built: {err}", err=True)
    click.echo(
        f"report: {result['index']}  ({len(result['sections']) - len(missing)} sections, "
        f"built in {result['seconds']:.0f} s)"
    )
