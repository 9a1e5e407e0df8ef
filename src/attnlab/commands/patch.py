"""``attnlab patch``, ``attnlab attribute`` and ``attnlab compose``: activation patching, direct logit
attribution and composition scores on any decoder :func:`attnlab.models.load` reads
(:mod:`attnlab.interp.patching`, :mod:`~attnlab.interp.attribution`, :mod:`~attnlab.interp.composition`)."""

from __future__ import annotations

import click

from attnlab._io import dumps_json
from attnlab.commands._errors import BadInput, usage_errors
from attnlab.commands._text import text_or_file as read_text  # (heads imports it from here)
from attnlab.commands._types import SEED, OutFile, Positive, choice

MODEL = dict(metavar="MODEL")
MODEL_HELP = "a Hugging Face decoder folder (GPT-2, Llama, Mistral, Qwen2), or a GPT attnlab trained or saved"
HEATMAP = OutFile("attnlab.viz.grids:FORMATS")  # the path and its format checked before the model runs


def heatmap_help(what: str) -> str:
    """``--heatmap``'s help: ``what`` is drawn; the formats are matplotlib's (:data:`FORMATS`)."""
    return (
        f"Also write {what} as a picture to FILE, after the tables; its extension picks the format "
        "(png, svg, pdf, ...: any matplotlib writes by itself). Checked before the model runs."
    )


def load_decoder(source: str, *, text: bool):
    """The loaded decoder at ``source``; with ``text`` it must have a tokenizer."""
    from attnlab.interp.attribution import check_decoder
    from attnlab.models.load import load

    loaded = load(source)
    check_decoder(loaded.model)
    if text and loaded.tokenizer is None:
        raise BadInput(f"{source} has no tokenizer (no tokenizer.json beside the weights): cannot read text")
    return loaded


def one_token(tok, text: str, option: str) -> int:
    """The id of ``text`` as one token (what the tokenizer puts before any text is dropped)."""
    lead = tok.encode("")
    ids = tok.encode(text, strict=True)
    if lead and ids[: len(lead)] == lead:
        ids = ids[len(lead) :]
    if len(ids) != 1:
        pieces = ", ".join(repr(t) for t in tok.tokens(ids))
        raise BadInput(
            f"{option} {text!r} is {len(ids)} tokens ({pieces}); give one token (a leading space counts)"
        )
    return ids[0]


def target_and_wrong(tok, target: str, wrong: str | None) -> tuple[int, int | None]:
    """The ids of ``--target`` and ``--wrong`` (None without it), each one token; a warning when they
    are the same token, whose logit difference (and every share of it) is 0 whatever the model does."""
    t_id = one_token(tok, target, "--target")
    w_id = None if wrong is None else one_token(tok, wrong, "--wrong")
    if w_id == t_id:
        click.echo(
            f"Warning: --target {target!r} and --wrong {wrong!r} are the same token "
            f"({tok.token(t_id)!r}): logit(target) - logit(wrong) is 0 in every run and every part",
            err=True,
        )
    return t_id, w_id


def encode(loaded, text: str):
    import torch

    ids = loaded.tokenizer.encode(text)
    if not ids or len(ids) > loaded.model.config.max_len:
        raise BadInput(f"the text is {len(ids)} tokens; the model reads 1 to {loaded.model.config.max_len}")
    return torch.tensor([ids])  # [1, T]


def grid_lines(title: str, grid, rows, cols, fmt: str = "{:7.2f}") -> list[str]:
    """A table: ``title``, a header of ``cols`` and one line per row of ``grid``."""
    width = max(7, *(len(str(c)) + 1 for c in cols))
    lines = [title, "layer".rjust(8) + "".join(str(c)[: width - 1].rjust(width) for c in cols)]
    for r, row in zip(rows, grid):
        lines.append(str(r).rjust(8) + "".join(fmt.format(float(v)).rjust(width) for v in row))
    return lines


def _metric_name(tok, target: int, wrong: int | None) -> str:
    name = f"logit({tok.token(target)!r})"
    return name if wrong is None else f"{name} - logit({tok.token(wrong)!r})"


PATCH_HELP = (
    """Activation patching on MODEL ("""
    + MODEL_HELP
    + """): run the corrupted prompt with one
    activation restored from the clean run — the residual stream at one layer and position, or one
    head's output — and report how much of the clean logit (difference) comes back:
    recovered = (patched - corrupt) / (clean - corrupt)."""
)


@click.command("patch", help=PATCH_HELP)
@click.argument("model", **MODEL)
@click.option("--clean", required=True, help="The clean prompt (text, a FILE, or - for stdin).")
@click.option("--corrupt", required=True, help="The corrupted prompt, of the same length in tokens.")
@click.option("--target", required=True, help="The token whose logit at the last position is measured.")
@click.option("--wrong", default=None, help="Measure logit(target) - logit(wrong) instead.")
@click.option(
    "--point",
    type=choice("attnlab.names:POINTS"),
    default="resid_pre",
    show_default=True,
    help="Which residual-stream point of each block to restore.",
)
@click.option("--heatmap", "heatmap_path", type=HEATMAP, help=heatmap_help("both grids"))
@click.option("--json", "as_json", is_flag=True, help="Print the metric of every patched run as JSON.")
@click.option("--quiet", is_flag=True, help="No progress, only the tables.")
@usage_errors
def patch(model, clean, corrupt, target, wrong, point, heatmap_path, as_json, quiet) -> None:
    from attnlab.interp.patching import activation_patching, logit_metric
    from attnlab.progress import progress

    loaded = load_decoder(model, text=True)
    tok = loaded.tokenizer
    clean_ids = encode(loaded, read_text(clean, "--clean"))
    corrupt_ids = encode(loaded, read_text(corrupt, "--corrupt"))
    t_id, w_id = target_and_wrong(tok, target, wrong)
    # one step per hook point patched: each layer's residual point, then each layer's heads (z)
    points = 2 * len(loaded.model.blocks)
    with progress(total=points, desc="patching", unit="hook point", quiet=quiet or as_json) as bar:
        result = activation_patching(
            loaded.model,
            clean_ids,
            corrupt_ids,
            logit_metric(t_id, w_id),
            point=point,
            tokens=tok.tokens(clean_ids[0].tolist()),
            on_layer=lambda _: bar.update(1),
        )
    _report_patch(loaded, result, _metric_name(tok, t_id, w_id), heatmap_path, as_json)


# nats of logit (difference): below it, (patched - corrupt) / (clean - corrupt) amplifies noise
SMALL_GAP = 0.1


def small_gap_warning(clean: float, corrupt: float, metric: str) -> str | None:
    """The warning for a clean and a corrupted run whose metrics nearly agree, or None."""
    gap = abs(clean - corrupt)
    if not 1e-6 <= gap < SMALL_GAP:
        return None
    return (
        f"clean and corrupt differ by only {gap:.3f} in {metric}: every recovered share divides by that, "
        "so small changes look large; choose prompts the model tells apart"
    )


def save_heatmap(path: str, panels: list[tuple], title: str, *, say: bool) -> None:
    """Draw ``panels`` (:func:`attnlab.viz.grids.grids_figure`'s ``(title, grid [R, C], rows, cols,
    x_label, y_label)``) into ``path`` once the analysis is printed. A picture that cannot be written
    after all (a full disk, a folder gone since the check) is one ``Error:`` line naming --heatmap and
    ``path`` (never the temporary file written first) and exit status 1: the printed analysis stands."""
    from attnlab.viz.grids import grids_figure

    try:
        grids_figure(panels, path, title=title)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        click.echo(f"Error: --heatmap {path}: the picture could not be written ({reason})", err=True)
        raise click.exceptions.Exit(1) from None
    if say:
        click.echo(f"\nheatmap: {path}")


def _report_patch(loaded, result, metric: str, heatmap_path, as_json: bool) -> None:
    """Print ``result`` (a :class:`attnlab.interp.patching.Patching`: ``resid [L, T]``, ``heads [L, h]``)
    as JSON or two tables, then draw both grids into ``heatmap_path`` if given."""
    warning = small_gap_warning(result.clean, result.corrupt, metric)
    if warning:
        click.echo(f"Warning: {warning}", err=True)
    normalise = not result.tied
    resid = result.recovered(result.resid) if normalise else result.resid  # [L, T]
    heads = result.recovered(result.heads) if normalise else result.heads  # [L, h]
    what = "recovered" if normalise else f"{metric} (clean and corrupt tie: not normalised)"
    if as_json:
        click.echo(dumps_json({"model": loaded.label, "metric": metric, **result.to_json()}))
    else:
        click.echo(f"{loaded.label}\nmetric: {metric} at the last position")
        click.echo(f"clean {result.clean:.3f}, corrupt {result.corrupt:.3f}; cells: {what}\n")
        cols = [f"{p}:{t.strip() or repr(t)}" for p, t in enumerate(result.tokens)]
        rows = range(len(resid))
        title = f"{result.point} restored at one position (layer x position)"
        click.echo("\n".join(grid_lines(title, resid, rows, cols)) + "\n")
        title = "one head's output restored at every position (layer x head)"
        click.echo("\n".join(grid_lines(title, heads, rows, list(range(heads.shape[1])))))
    if heatmap_path:
        layers = list(range(len(resid)))
        panels = [
            (f"{result.point} restored at one position", resid, layers, result.tokens, "position", "layer"),
            ("one head's output restored", heads, layers, list(range(heads.shape[1])), "head", "layer"),
        ]
        save_heatmap(heatmap_path, panels, f"{loaded.label}: {what}", say=not as_json)


ATTRIBUTE_HELP = (
    """Direct logit attribution on MODEL ("""
    + MODEL_HELP
    + """): the share of the embeddings, each
    head and each MLP in the logit of --target at TEXT's last position (minus --wrong's), with the
    final norm's scale frozen at the real run's; the shares add up to the model's logit. Also the
    accumulated residual stream read the same way (0_pre, 0_mid, ..., final_post)."""
)


@click.command("attribute", help=ATTRIBUTE_HELP)
@click.argument("model", **MODEL)
@click.argument("text")
@click.option("--target", required=True, help="The token whose logit at the last position is attributed.")
@click.option("--wrong", default=None, help="Attribute logit(target) - logit(wrong) instead.")
@click.option("--top", type=Positive(10_000), default=12, show_default=True, help="Parts to list.")
@click.option("--heatmap", "heatmap_path", type=HEATMAP, help=heatmap_help("the heads' grid"))
@click.option(
    "--json", "as_json", is_flag=True, help="Print every part, the heads' grid and the accumulated stream."
)
@usage_errors
def attribute(model, text, target, wrong, top, heatmap_path, as_json) -> None:
    from attnlab.interp.attribution import accumulated_attribution, logit_attribution

    loaded = load_decoder(model, text=True)
    tok = loaded.tokenizer
    ids = encode(loaded, read_text(text, "TEXT"))
    t_id, w_id = target_and_wrong(tok, target, wrong)
    attr = logit_attribution(loaded.model, ids, t_id, w_id)
    accumulated = accumulated_attribution(loaded.model, ids, t_id, w_id)  # (labels, [S, 1])
    metric = _metric_name(tok, t_id, w_id)
    _report_attribution(loaded, tok.tokens(ids[0].tolist()), metric, attr, accumulated, top, as_json)
    if heatmap_path:
        heads = attr.heads()[:, :, 0]  # [L, h]
        rows, cols = list(range(heads.shape[0])), list(range(heads.shape[1]))
        panels = [("direct logit attribution", heads, rows, cols, "head", "layer")]
        save_heatmap(heatmap_path, panels, f"{loaded.label}: {metric}", say=not as_json)


def _report_attribution(loaded, tokens, metric: str, attr, accumulated, top: int, as_json: bool) -> None:
    """Print ``attr`` (parts ``values [P, 1]``, heads ``[L, h, 1]``) and the ``accumulated`` stream
    ``(labels, values [S, 1])`` as JSON or as tables (the ``top`` largest parts)."""
    acc_labels, acc = accumulated
    heads = attr.heads()[:, :, 0]  # [L, h]
    if as_json:
        data = {
            "model": loaded.label,
            "metric": metric,
            "tokens": tokens,
            "logit": round(float(attr.logit[0]), 5),
            "sum": round(float(attr.values[:, 0].sum()), 5),
            "parts": {lab: round(float(v), 5) for lab, v in zip(attr.labels, attr.values[:, 0])},
            "heads": [[round(float(v), 5) for v in row] for row in heads],
            "accumulated": {lab: round(float(v), 5) for lab, v in zip(acc_labels, acc[:, 0])},
        }
        click.echo(dumps_json(data))
        return
    click.echo(
        f"{loaded.label}\n{metric} at the last position: model {float(attr.logit[0]):.4f}, "
        f"sum of the parts {float(attr.values[:, 0].sum()):.4f} ({len(attr.labels)} parts)\n"
    )
    click.echo("largest parts (|value|):")
    for label, value in attr.top(top):
        click.echo(f"  {label:<18} {value:+9.4f}")
    click.echo("")
    click.echo(
        "\n".join(grid_lines("heads (layer x head)", heads, range(heads.shape[0]), range(heads.shape[1])))
    )
    click.echo("\naccumulated residual stream through the frozen final norm:")
    click.echo("  " + "  ".join(f"{lab} {float(v):+.3f}" for lab, v in zip(acc_labels, acc[:, 0])))


def _head(value: str) -> tuple[int, int]:
    """``--receiver``'s ``layer.head`` as a pair (:func:`attnlab.interp.ablation.parse_head`)."""
    from attnlab.interp.ablation import parse_head

    try:
        return parse_head(value)
    except ValueError:
        raise BadInput(f"--receiver must be a head written layer.head (e.g. 1.3), got {value!r}") from None


COMPOSE_HELP = (
    """Q-, K- and V-composition scores (Elhage et al. 2021) between every earlier and later head of
    MODEL ("""
    + MODEL_HELP
    + """), against the score of random matrices; then, on repeat probes, the
    receiver head's induction score and the repeat loss with each earlier head's write removed from
    only its queries, keys or values (path ablation: what shows a circuit when positions act inside
    attention, as RoPE does, and the weights alone cannot)."""
)


@click.command(
    "compose",
    help=COMPOSE_HELP,
    short_help="Q-, K- and V-composition between heads, and path ablation into a receiver head.",
)
@click.argument("model", **MODEL)
@click.option(
    "--receiver",
    default=None,
    help="Path-ablate into this head (layer.head); default: the best induction head.",
)
@click.option(
    "--length",
    type=Positive(10_000),
    default=None,
    help="L of the [BOS, r, r] probes, at least 2 (default: the most the model's context and "
    "vocabulary fit, at most 20).",
)
@click.option("--batch", type=Positive(10_000), default=16, show_default=True, help="Probes to average over.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the probes.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the scores, the baseline and the path ablations as JSON."
)
@usage_errors
def compose(model, receiver, length, batch, seed, as_json) -> None:
    from attnlab.interp.composition import circuit_report, probe_length
    from attnlab.interp.scan import probe_bos

    loaded = load_decoder(model, text=False)
    head = None if receiver is None else _head(receiver)
    c = loaded.model.config  # the probes must fit its positions and vocabulary: checked before any work
    length = probe_length(length, c.max_len, c.vocab_size, name="--length")
    bos = probe_bos(loaded)
    report = circuit_report(loaded.model, receiver=head, length=length, batch=batch, seed=seed, bos=bos)
    if as_json:
        click.echo(dumps_json({"model": loaded.label, **report.to_json()}))
        return
    click.echo(f"{loaded.label}\n")
    click.echo("\n".join(report.lines()))
