"""``attnlab figures`` (the notes' five figures) and ``attnlab explore`` (the attention explorer page)."""

from __future__ import annotations

import os

import click

from attnlab._io import dumps_json
from attnlab.commands._errors import BadInput, usage_errors
from attnlab.commands._text import text_or_file
from attnlab.commands._types import RATE, OutFile, choice, device_option


@click.command()
@click.option(
    "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Folder for fig1..fig5."
)
@click.option(
    "--format",
    "fmt",
    type=choice("attnlab.names:FIGURE_FORMATS"),
    default="png",
    show_default=True,
    help="Image format of the figures.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the plotted numbers as JSON.")
@usage_errors
def figures(out_dir: str, fmt: str, as_json: bool) -> None:
    """Draw the five figures of the Week 1 notes, computed by attnlab, into OUT."""
    from attnlab._io import check_out_path
    from attnlab.progress import progress
    from attnlab.viz.figures import FIGURES, draw_figures

    check_out_path(out_dir, "out_dir")
    with progress(total=len(FIGURES), desc="figures", unit="fig", quiet=as_json) as bar:
        result = draw_figures(out_dir, fmt, progress=bar.update)
    if as_json:
        click.echo(
            dumps_json(
                {
                    name: {"path": str(r["path"]), "numbers": _plain(r["numbers"])}
                    for name, r in result.items()
                },
                indent=2,
            )
        )
        return
    g = result["fig5"]["numbers"]
    v = result["fig3"]["numbers"]["variance"]
    rows = [
        ("fig1", "fixed context vs per-step additive alignment", "rows sum to 1 (illustrative)"),
        (
            "fig2",
            "five-token toy weights",
            "row sums " + ", ".join(f"{s:.6f}" for s in result["fig2"]["numbers"]["row_sums"]),
        ),
        (
            "fig3",
            "Var(q.k) vs d_k, scaled, saturation",
            "Var "
            + ", ".join(f"{x:.2f}" for x in v["var"])
            + "; scaled "
            + ", ".join(f"{x:.3f}" for x in v["scaled_var"]),
        ),
        ("fig4", "four heads; 8 x 64 -> 512", f"concat width {result['fig4']['numbers']['concat_width']}"),
        (
            "fig5",
            "encoder layer parameter groups",
            f"MHA {g['MHA']:,} / FFN {g['FFN']:,} / norms {g['norms']:,} (total {g['total']:,})",
        ),
    ]
    for name, what, numbers in rows:
        click.echo(f"{str(result[name]['path']):<28} {what:<44} {numbers}")


def _plain(x):
    """NumPy arrays and scalars -> JSON-ready lists and floats."""
    import numpy as np

    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x


@click.command()
@click.argument("sentence")
@click.option(
    "--model",
    default="minilm",
    show_default=True,
    help="'minilm', a Hugging Face checkpoint directory (GPT-2, Llama, Mistral, Qwen2, BERT) "
    "or a folder saved by attnlab train.",
)
@click.option(
    "--out",
    "out_path",
    default="explorer.html",
    show_default=True,
    type=OutFile(),
    help="The HTML page to write (a file: '-' is refused). A file that is not an attnlab explorer page "
    "is kept unless --overwrite.",
)
@click.option(
    "--overwrite", is_flag=True, help="Replace the --out file even if it is not an attnlab explorer page."
)
@click.option(
    "--min-weight", default=0.01, show_default=True, type=RATE, help="Lightest edge drawn as a line."
)
@device_option()
@click.option(
    "--json", "as_json", is_flag=True, help="Print what was written (path, size, model, each view's tokens)."
)
@usage_errors
def explore(
    sentence: str, model: str, out_path: str, overwrite: bool, min_weight: float, device: str, as_json: bool
) -> None:
    """Write ONE self-contained HTML page exploring MODEL's attention on SENTENCE (a text, a FILE, or -
    for standard input; whitespace alone is refused)."""
    from attnlab.viz import explorer

    # --out is checked (writable, not '-') as it is read; what it holds, before the model runs
    if (
        not overwrite
        and os.path.isfile(out_path)
        and os.path.getsize(out_path)
        and not explorer.is_explorer_page(out_path)
    ):
        raise BadInput(
            f"--out {out_path} exists and is not an attnlab explorer page; it would be replaced: "
            "choose another name, or pass --overwrite"
        )
    text = text_or_file(sentence, "SENTENCE", blank=False)
    page = explorer.explore(text, model, min_weight=min_weight, device=device)
    path = page.save(out_path)
    if as_json:
        views = [
            {
                "name": v.name,
                "shape": list(v.weights.shape),
                "queries": list(v.query_tokens),
                "keys": list(v.key_tokens),
            }
            for v in page.views
        ]
        click.echo(
            dumps_json(
                {"out": str(path), "bytes": path.stat().st_size, "model": page.model_label, "views": views}
            )
        )
        return
    shapes = ", ".join(f"{v.name} {list(v.weights.shape)}" for v in page.views)
    click.echo(f"wrote {path} ({path.stat().st_size:,} bytes): {page.model_label}; {shapes}")
