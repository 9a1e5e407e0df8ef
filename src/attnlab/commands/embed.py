"""``attnlab embed TEXT... | --input FILE --output OUT``: sentence embeddings of a real encoder.

With TEXTs: every embedding's norm and the pairwise cosine table (``--json``: the vectors too);
``--explain A B`` splits the cosine of two sentences into token-pair terms
(:mod:`attnlab.interp.similarity`).
With ``--input``: a whole file (or ``-`` for stdin) streamed into ``OUT.npy`` / ``OUT.safetensors``
by :func:`attnlab.embedding.stream.embed_file` (bounded memory, ``--resume`` after an interruption).
"""

from __future__ import annotations

from pathlib import Path

import click

from attnlab._io import dumps_json
from attnlab.commands._errors import BadInput, usage_errors
from attnlab.commands._types import POSITIVE, choice, device_option
from attnlab.names import CHUNK_SIZE, MODEL_DTYPES, STREAM_FORMATS


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _warn_truncated(truncated: int, total: int, limit: int) -> None:
    if truncated:
        click.echo(
            f"warning: {truncated:,} of {total:,} sentences were longer than {limit} tokens and were "
            f"truncated to {limit} (the model's sentence-embedding limit)",
            err=True,
        )


def _warn_unknown(sentences: int, words: list[str], total: int) -> None:
    """One line naming what the vocabulary could not represent (embedded as ``[UNK]``)."""
    from attnlab.tasks.text_tokenizer import describe_characters

    if sentences:
        shown = describe_characters(words) if all(len(w) == 1 for w in words) else _words(words)
        click.echo(
            f"warning: {sentences:,} of {total:,} sentences hold text the vocabulary cannot represent, "
            f"embedded as [UNK]: {shown}",
            err=True,
        )


def _words(words: list[str], most: int = 8) -> str:
    shown = ", ".join(repr(w) for w in words[:most])
    return shown + (f" and {len(words) - most} more" if len(words) > most else "")


def _warn_inputs(tokenizer, texts, limit: int) -> None:
    """Warn about truncated sentences and ``[UNK]`` among TEXTs (``--explain``, which tokenises them
    itself, sentence by sentence)."""
    from attnlab.models.sentence import unknown_words

    encodings = tokenizer.encode_batch(list(texts))
    _warn_truncated(sum(1 for e in encodings if e.overflowing), len(texts), limit)
    _warn_unknown(*unknown_words(tokenizer, texts, encodings), len(texts))


@click.command("embed")
@click.argument("texts", nargs=-1, metavar="[TEXT]...")
@click.option(
    "--model",
    "model_name",
    default="minilm",
    show_default=True,
    help="An encoder: minilm, a BERT checkpoint directory, or a saved encoder with its tokenizer.json.",
)
@click.option(
    "--batch-size", "--batch", default=32, show_default=True, type=int, help="Sentences per forward pass."
)
@device_option()
@click.option(
    "--dtype",
    type=choice(MODEL_DTYPES),
    default="float32",
    show_default=True,
    help="Matmul number format: bfloat16 (fast with AMX / AVX-512 BF16) or int8 (dynamic quantisation).",
)
@click.option(
    "--input", "source", metavar="FILE", help="Embed every sentence of FILE (- for stdin) instead of TEXTs."
)
@click.option(
    "--format",
    "fmt",
    type=choice(STREAM_FORMATS),
    default="lines",
    show_default=True,
    help="--input layout: one sentence per line, or JSON Lines.",
)
@click.option("--field", default="text", show_default=True, help="The JSONL field holding the sentence.")
@click.option("--output", metavar="OUT", help="With --input: OUT.npy or OUT.safetensors (float32 [N, d]).")
@click.option(
    "--chunk-size",
    default=CHUNK_SIZE,
    show_default=True,
    type=POSITIVE,
    help="Sentences held in memory and written per resumable part (an interrupt loses at most one).",
)
@click.option("--resume", is_flag=True, help="Continue an interrupted --input run into the same --output.")
@click.option("--overwrite", is_flag=True, help="Replace an existing --output (and any interrupted run).")
@click.option("--quiet", is_flag=True, help="With --input: no progress lines.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the embeddings, their norms and the cosine matrix as JSON."
)
@click.option(
    "--explain",
    is_flag=True,
    help="With exactly two TEXTs: split their cosine into token-pair terms (mean pooling only).",
)
@click.option("--top", default=10, show_default=True, type=int, help="Token pairs to list with --explain.")
@click.option(
    "--heatmap", default=None, metavar="FILE.png", help="With --explain: draw the n x m pair terms."
)
@usage_errors
def embed(
    texts: tuple[str, ...],
    model_name: str,
    batch_size: int,
    device: str,
    dtype: str,
    source: str | None,
    fmt: str,
    field: str,
    output: str | None,
    chunk_size: int,
    resume: bool,
    overwrite: bool,
    quiet: bool,
    as_json: bool,
    explain: bool,
    top: int,
    heatmap: str | None,
) -> None:
    """Embed each TEXT with a pretrained encoder (mean pooling + L2 normalisation for MiniLM) and
    print every embedding's norm and the cosine similarity of every pair; or embed a whole
    --input file into --output."""
    if batch_size <= 0:
        raise BadInput(f"--batch-size must be a positive integer, got {batch_size}")
    given = (
        click.get_current_context().get_parameter_source("field") == click.core.ParameterSource.COMMANDLINE
    )
    if given and (source is None or fmt != "jsonl"):  # it would be ignored
        read = (
            "TEXT arguments are plain text" if source is None else "the input is plain text (--format lines)"
        )
        raise BadInput(
            f"--field names a JSONL field, but {read}: give --format jsonl with --input, or no --field"
        )
    if source is not None:
        if texts:
            raise BadInput("give TEXT arguments or --input FILE, not both")
        if output is None:
            raise BadInput("--input needs --output OUT.npy or OUT.safetensors")
        _embed_file(
            model_name,
            source,
            output,
            fmt,
            field,
            batch_size,
            dtype,
            chunk_size,
            resume,
            overwrite,
            quiet,
            as_json,
        )
        return
    if output is not None or resume or overwrite:
        raise BadInput("--output, --resume and --overwrite go with --input FILE")
    if not texts:
        raise BadInput("give at least one TEXT, or --input FILE --output OUT")
    if explain:
        _explain(texts, model_name, top, as_json, heatmap)
        return
    if heatmap is not None:
        raise BadInput("--heatmap goes with --explain")
    _embed_texts(texts, model_name, batch_size, device, dtype, as_json)


def _embed_texts(
    texts: tuple[str, ...], model_name: str, batch_size: int, device: str, dtype: str, as_json: bool
) -> None:
    """TEXT arguments: each embedding's norm and token count, and the cosine of every pair."""
    from attnlab.devices import resolve_device
    from attnlab.models.sentence import embed as embed_sentences
    from attnlab.models.sentence import load_encoder

    model, tokenizer = load_encoder(model_name, resolve_device(device))
    stats: dict = {}
    vectors = embed_sentences(
        model, tokenizer, list(texts), batch_size=batch_size, dtype=dtype, stats=stats
    )  # [N, d]
    vectors = vectors.cpu()  # [N, d]
    norms = vectors.norm(dim=-1)  # [N]
    unit = vectors / norms.clamp_min(1e-12)[:, None]  # [N, d]
    cosine = unit @ unit.T  # [N, N]
    cosine = (cosine + cosine.T) / 2  # cos(a, b) = cos(b, a) exactly (an AVX2 GEMM's halves differ by 6e-8)
    tokens = [len(e.ids) for e in tokenizer.encode_batch(list(texts))]
    c = model.config
    _warn_truncated(stats["truncated"], len(texts), c.max_seq_length or c.max_len)
    _warn_unknown(stats["unknown"], stats["unknown_words"], len(texts))  # what embed found encoding them
    if as_json:
        click.echo(
            dumps_json(
                {
                    "model": model_name,
                    "dim": c.d_model,
                    "pooling": c.pooling,
                    "normalize": c.normalize,
                    "dtype": dtype,
                    "truncated": stats["truncated"],
                    "texts": list(texts),
                    "tokens": tokens,
                    "norms": norms.tolist(),
                    "cosine": cosine.tolist(),
                    "embeddings": vectors.tolist(),
                }
            )
        )
        return
    click.echo(
        f"model {model_name}: {c.num_layers} layers, d_model {c.d_model}, {c.pooling} pooling"
        f"{', L2-normalised' if c.normalize else ''}\n"
    )
    click.echo(f"{'#':>3}  {'norm':>9}  {'tokens':>6}  text")
    for i, (text, n, t) in enumerate(zip(texts, norms.tolist(), tokens), start=1):
        click.echo(f"{i:>3}  {n:9.6f}  {t:>6}  {_short(text)}")
    click.echo("\ncosine similarity")
    click.echo("   " + "".join(f"{j:>8}" for j in range(1, len(texts) + 1)))
    for i, row in enumerate(cosine.tolist(), start=1):
        click.echo(f"{i:>3}" + "".join(f"{v:8.4f}" for v in row))


def _explain(texts: tuple[str, ...], model_name: str, top: int, as_json: bool, heatmap: str | None) -> None:
    """``--explain``: the top token pairs of cos(A, B) = Σ_ij C_ij and their share of it."""
    if len(texts) != 2:
        raise BadInput(f"--explain takes exactly two TEXTs, got {len(texts)}")
    if top <= 0:
        raise BadInput(f"--top must be a positive integer, got {top}")
    from attnlab.interp.similarity import explain_similarity
    from attnlab.models.sentence import load_encoder

    model, tokenizer = load_encoder(model_name)
    _warn_inputs(tokenizer, texts, model.config.max_seq_length or model.config.max_len)
    pairs = explain_similarity(model, tokenizer, *texts)
    rows = pairs.top(top)
    if heatmap is not None:
        _draw(pairs, heatmap)
    if as_json:
        click.echo(
            dumps_json(
                {
                    "model": model_name,
                    "texts": list(texts),
                    "tokens_a": pairs.tokens_a,
                    "tokens_b": pairs.tokens_b,
                    "cosine": pairs.cosine,
                    "terms": pairs.terms.tolist(),
                    "top": [{"a": a, "b": b, "term": t, "share": s} for a, b, t, s in rows],
                }
            )
        )
        return
    n, m = pairs.terms.shape
    click.echo(f"cosine {pairs.cosine:.6f} = the sum of {n} x {m} token-pair terms a_i.b_j / (n m |a| |b|)")
    click.echo(f"A: {_short(texts[0])}\nB: {_short(texts[1])}\n")
    click.echo(f"{'token of A':<14}  {'token of B':<14}  {'term':>9}  {'share':>7}")
    for a, b, term, share in rows:
        click.echo(f"{a:<14}  {b:<14}  {term:9.5f}  {share:7.1%}")
    rest = pairs.cosine - sum(r[2] for r in rows)
    click.echo(
        f"{'(the other ' + str(n * m - len(rows)) + ' pairs)':<30}  {rest:9.5f}  {rest / pairs.cosine:7.1%}"
    )


def _draw(pairs, path: str) -> None:
    """The pair terms C_ij as a heatmap: rows are A's tokens, columns B's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnlab.viz import heatmap
    from attnlab.viz.legends import save_figure

    terms = pairs.terms.numpy()  # [n, m]
    # the terms are small (they sum to one cosine over n*m pairs) and of either sign: a scale of
    # [0, 1] drew them all near white, so the colours span the data, centred on 0
    reach = float(abs(terms).max()) or 1.0
    ax = heatmap(
        terms,
        pairs.tokens_b,
        pairs.tokens_a,
        title=f"cos = {pairs.cosine:.4f} = sum of the terms",
        fmt="{:.3f}",
        cmap="RdBu_r",
        vmin=-reach,
        vmax=reach,
    )
    save_figure(ax.figure, path)
    plt.close(ax.figure)
    click.echo(f"wrote the {terms.shape[0]} x {terms.shape[1]} pair terms as a heatmap to {path}", err=True)


def _warn(line: str) -> None:
    """A warning on stderr, even with --quiet; above the progress bar on a terminal, not through it."""
    import sys

    from tqdm import tqdm

    tqdm.write(f"warning: {line}", file=sys.stderr)


def _embed_file(
    model_name, source, output, fmt, field, batch_size, dtype, chunk_size, resume, overwrite, quiet, as_json
):
    from attnlab.embedding.stream import Interrupted, check_job, embed_file
    from attnlab.models.sentence import load_encoder
    from attnlab.progress import progress

    parts = Path(output).with_name(Path(output).name + ".parts")
    fresh = resume and not parts.is_dir()  # nothing interrupted to continue
    total = check_job(source, output, fmt, field, resume, overwrite)  # bad input fails before the model loads
    if fresh:
        _warn(f"--resume: no interrupted run to continue ({parts} does not exist); starting afresh")
    model, tokenizer = load_encoder(model_name)
    try:
        summary = embed_file(
            model,
            tokenizer,
            source,
            output,
            fmt=fmt,
            field=field,
            batch_size=batch_size,
            dtype=dtype,
            chunk_size=chunk_size,
            resume=resume,
            overwrite=overwrite,
            model_name=model_name,
            progress=lambda n: progress(total=n, desc="embed", unit="sentences", quiet=quiet),
            total=total,
            log=_warn,
        )
    except Interrupted as stop:
        click.echo(f"{stop}; run the same command with --resume to continue into {output}", err=True)
        raise SystemExit(130) from None
    c = model.config
    _warn_truncated(summary["truncated"], summary["sentences"], c.max_seq_length or c.max_len)
    _warn_unknown(summary["unknown"], summary["unknown_words"], summary["sentences"])
    if not summary["sentences"]:
        click.echo(f"warning: {source} holds no sentences: {output} has 0 rows", err=True)
    if as_json:
        click.echo(dumps_json(summary))
        return
    resumed = ""
    if summary["resumed_chunks"] or summary["redone_chunks"]:
        redone = summary["redone_chunks"]
        redone = f", {redone} damaged and embedded again" if redone else ""
        resumed = f" ({summary['resumed_chunks']} of {summary['chunks']} parts resumed{redone})"
    click.echo(
        f"wrote {summary['sentences']:,} x {summary['dim']} float32 embeddings to "
        f"{summary['output']}{resumed}: "
        f"{summary['tokens']:,} tokens, {summary['empty']:,} empty, {summary['truncated']:,} truncated, "
        f"{summary['seconds']:.1f} s, {summary['sentences_per_s']:,.0f} sentences/s ({dtype})"
    )
