"""``attnlab heads MODEL [--tokens repeat|TEXT] [--json]``: every head's previous-token, duplicate,
induction, first-token and current-token score; ``attnlab prune MODEL``: heads removed least
important first (:mod:`attnlab.interp`). MODEL is anything :func:`attnlab.models.load` reads."""

from __future__ import annotations

import click

from attnlab._io import dumps_json
from attnlab.commands._errors import BadInput, usage_errors
from attnlab.commands._types import SEED, SHARE, Positive, choice
from attnlab.commands.patch import MODEL_HELP as DECODER_HELP  # (patch, attribute, compose: the same models)
from attnlab.commands.patch import load_decoder, read_text


def _table(name: str, scores: list[list[float]], threshold: float) -> list[str]:
    heads = len(scores[0])
    lines = [
        f"{name} score (layer x head; * above {threshold:g})",
        "layer" + "".join(f"{h:>7}" for h in range(heads)),
    ]
    for layer, row in enumerate(scores):
        lines.append(f"{layer:>5}" + "".join(f"{v:6.2f}{'*' if v > threshold else ' '}" for v in row))
    return lines


def _warn(line: str) -> None:
    """One ``Warning:`` line on stderr (a text longer than the model's positions)."""
    click.echo(f"Warning: {line}", err=True)


MODEL_HELP = (
    "minilm, a Hugging Face folder (GPT-2, Llama, Mistral, Qwen2, BERT), or what attnlab train/save wrote"
)


HEADS_HELP = (
    """Score every head of MODEL ("""
    + MODEL_HELP
    + """) as a previous-token, duplicate-token,
    induction, first-token (sink) and current-token head: the share of its attention that falls where
    each pattern says (TransformerLens's 'mul' measure, Σ A⊙P / Σ A)."""
)


@click.command("heads", help=HEADS_HELP)
@click.argument("model", default="minilm", metavar="MODEL")
@click.option(
    "--tokens",
    default="repeat",
    show_default=True,
    help="'repeat': random probes [BOS, r_1..r_L, r_1..r_L] (no tokenizer needed); anything else is a "
    "text to run, a FILE, or '-' for stdin.",
)
@click.option(
    "--length",
    type=Positive(100_000),
    default=None,
    help="L of the repeat probe (default: what fits the model and its vocabulary, at most 20).",
)
@click.option(
    "--batch", type=Positive(10_000), default=8, show_default=True, help="Repeat probes to average over."
)
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the repeat probes.")
@click.option(
    "--threshold",
    type=SHARE,
    default=0.4,
    show_default=True,
    help="Name the heads above this score (a share of attention, 0 to 1).",
)
@click.option(
    "--exclude-first", is_flag=True, help="Drop attention to the first token (BOS/[CLS]) before scoring."
)
@click.option(
    "--exclude-current", is_flag=True, help="Drop attention to the query's own position before scoring."
)
@click.option(
    "--convention",
    type=choice("attnlab.names:CONVENTIONS"),
    default="attnlab",
    show_default=True,
    help="Induction pattern: the attended key strictly before the query (attnlab), or TransformerLens's, "
    "which also counts the query itself where a token repeats at once ('A A').",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print every score and the heads above the threshold as JSON."
)
@click.option("--quiet", is_flag=True, help="Only the heads above the threshold, no tables.")
@usage_errors
def heads(
    model, tokens, length, batch, seed, threshold, exclude_first, exclude_current, convention, as_json, quiet
) -> None:
    from attnlab.interp.scan import ON_REPEAT, ON_TEXT, SHORT, scan_repeat, scan_text

    excl = {"exclude_first": exclude_first, "exclude_current": exclude_current, "convention": convention}
    if batch <= 0:
        raise BadInput(f"--batch must be a positive integer, got {batch}")
    if tokens != "repeat" and length is not None:
        raise BadInput("--length applies to --tokens repeat only")
    try:
        if tokens == "repeat":
            scans = scan_repeat(model, length=length, batch=batch, seed=seed, **excl)
        else:
            scans = scan_text(read_text(tokens, "--tokens").strip(), model, warn=_warn, **excl)
    except ValueError as exc:  # the way out a scan names, with this command's flags
        line = str(exc).replace(ON_TEXT, f"{ON_TEXT} (--tokens TEXT)")
        raise BadInput(line.replace(ON_REPEAT, f"{ON_REPEAT} (--tokens repeat, the default)")) from None
    if as_json:
        click.echo(dumps_json([s.to_json(threshold) for s in scans]))
        return
    for s in scans:
        click.echo(f"{s.model}: {s.view}, {len(s.tokens)} tokens")
        click.echo(f"tokens: {' '.join(s.tokens[:24])}{' ...' if len(s.tokens) > 24 else ''}")
        click.echo(f"{s.applies}\n")
        if not quiet:
            for name, scores in s.scores.items():
                click.echo("\n".join(_table(name, scores, threshold)) + "\n")
        for name, found in s.above(threshold).items():
            named = ", ".join(f"{layer}.{head} ({SHORT[name]} {v:.2f})" for layer, head, v in found[:8])
            named += f" and {len(found) - 8} more" if len(found) > 8 else ""
            click.echo(f"{name + ' heads:':<17} {named or 'none above ' + format(threshold, 'g')}")
        click.echo("")


PRUNE_HELP = (
    """Rank MODEL's heads (minilm, or """
    + DECODER_HELP
    + """) by Michel et al.'s importance (|dL/d xi_h| of a head mask),
    remove them least important first or in a random order (their outputs zeroed: what removing them
    from W^Q/W^K/W^V/W^O computes), and report at 0, 10, ..., 90% of the heads removed: MiniLM's
    agreement with itself on held-out sentences (its paraphrase loss ranks), a decoder's loss."""
)


@click.command("prune", help=PRUNE_HELP)
@click.argument("model", default="minilm", metavar="MODEL")
@click.option(
    "--text",
    default=None,
    help="A decoder: rank and judge heads by the language-model loss on this text (a FILE, or - for "
    "stdin; alternate windows rank and judge). Default: the repeated half of [BOS, r, r] probes.",
)
@click.option(
    "--length",
    type=Positive(100_000),
    default=None,
    help="L of the repeat probes (default: what fits, at most 20).",
)
@click.option(
    "--batch", type=Positive(10_000), default=16, show_default=True, help="Repeat probes per batch."
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the random removal order and the probes."
)
@click.option(
    "--orders",
    type=Positive(100),
    default=5,
    show_default=True,
    help="MiniLM: random removal orders (seeds SEED, SEED+1, ...) the importance order is judged against.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the importance and both curves as JSON.")
@usage_errors
def prune(model: str, text, length, batch, seed: int, orders: int, as_json: bool) -> None:
    from attnlab.experiments.pruning import judged_minilm
    from attnlab.interp.prune import prune_decoder

    if model == "minilm":
        if text is not None or length is not None:
            raise BadInput(
                "--text and --length apply to decoders; MiniLM is judged on its held-out sentences"
            )
        _minilm_table(judged_minilm(seed, orders), as_json)
        return
    loaded = load_decoder(model, text=text is not None)
    words = None if text is None else read_text(text, "--text")
    result = prune_decoder(loaded, text=words, length=length, batch=batch, seed=seed)
    if as_json:
        click.echo(dumps_json({"model": loaded.label, **result}))
        return
    click.echo(f"{loaded.label}: {result['judged_on']}")
    click.echo("(heads zeroed, as removing them from the weights computes; every layer keeps one head)\n")
    click.echo(f"{'removed':>12}  {'parameters':>13}  {'loss, by importance':>19}  {'loss, random':>12}")
    for a, b in _distinct(result):
        click.echo(f"{_removed(a)}  {a['params']:>13,}  {a['loss']:>19.4f}  {b['loss']:>12.4f}")
    _removed_first(result)


def _distinct(result: dict) -> list[tuple[dict, dict]]:
    """The two curves' rows side by side, once per number of heads removed (a fraction asked for
    can round to the count of the one before, or be capped when every layer keeps a head)."""
    rows = list(zip(result["importance_order"], result["random_order"]))
    return [r for i, r in enumerate(rows) if i == 0 or r[0]["removed"] != rows[i - 1][0]["removed"]]


def _removed(row: dict) -> str:
    """``' 6 ( 75%)'``: the heads removed and their share of all heads."""
    return f"{row['removed']:>3} ({row['share']:>4.0%})"


def _removed_first(result: dict) -> None:
    """The heads the importance order removes first (the JSON lists each row's)."""
    last = result["importance_order"][-1]["heads"]
    shown = ", ".join(last[:12]) + (f" and {len(last) - 12} more" if len(last) > 12 else "")
    click.echo(f"\nremoved by importance, first to last: {shown or 'none'}")


def _minilm_table(result: dict, as_json: bool) -> None:
    from attnlab.interp.minilm_pruning import HELD_OUT

    if as_json:
        click.echo(dumps_json(result))
        return
    k = len(result["random_orders"])
    click.echo(f"MiniLM: agreement with the unpruned model on {len(HELD_OUT)} held-out sentences")
    click.echo("(heads zeroed, as removing them from the weights computes; every layer keeps one head)\n")
    click.echo(
        f"{'removed':>12}  {'parameters':>11}  {'cos, by importance':>18}  {'top-1':>5}  "
        f"{f'cos, {k} random: mean (min-max)':>30}  {'difference (95%)':>24}  verdict"
    )
    judged = {r["removed"]: r for r in result["comparison"]}
    for a, _ in _distinct(result):
        r = judged.get(a["removed"])
        spread = "" if r is None else f"{r['random_mean']:.4f} ({r['random_min']:.4f}-{r['random_max']:.4f})"
        diff = "" if r is None else "{:+.4f} ({:+.4f}..{:+.4f})".format(r["difference"], *r["interval"])
        click.echo(
            f"{_removed(a)}  {a['params']:>11,}  {a['mean_cosine']:>18.4f}  "
            f"{a['top1_agreement']:>5.2f}  {spread:>30}  {diff:>24}  {'' if r is None else r['verdict']}"
        )
    saved = result["importance_order"][0]["params"] - result["importance_order"][-1]["params"]
    click.echo(f"\nparameters saved at {result['importance_order'][-1]['removed']} heads removed: {saved:,}")
    click.echo(result["summary"])
