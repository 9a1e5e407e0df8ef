"""``attnlab embed TEXT... [--model minilm|DIR] [--json]``: sentence embeddings of a real encoder,
their norms and the pairwise cosine similarity table."""

from __future__ import annotations

import json

import click

from attnlab.commands._errors import BadInput, usage_errors
from attnlab.commands._types import device_option


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


@click.command("embed")
@click.argument("texts", nargs=-1, required=True, metavar="TEXT...")
@click.option(
    "--model",
    "model_name",
    default="minilm",
    show_default=True,
    help="A named pretrained encoder (minilm) or a BERT checkpoint directory.",
)
@click.option("--batch-size", default=32, show_default=True, type=int, help="Sentences per forward pass.")
@device_option()
@click.option(
    "--json", "as_json", is_flag=True, help="Print the embeddings, their norms and the cosine matrix as JSON."
)
@usage_errors
def embed(texts: tuple[str, ...], model_name: str, batch_size: int, device: str, as_json: bool) -> None:
    """Embed each TEXT with a pretrained encoder (mean pooling + L2 normalisation for MiniLM) and
    print every embedding's norm and the cosine similarity of every pair."""
    if batch_size <= 0:
        raise BadInput(f"--batch-size must be a positive integer, got {batch_size}")
    from attnlab.devices import resolve_device
    from attnlab.models.pretrained import load_pretrained
    from attnlab.models.sentence import embed as embed_sentences

    model, tokenizer = load_pretrained(model_name)
    model = model.to(resolve_device(device))
    vectors = embed_sentences(model, tokenizer, list(texts), batch_size=batch_size)  # [N, d]
    vectors = vectors.cpu()  # [N, d]
    norms = vectors.norm(dim=-1)  # [N]
    unit = vectors / norms.clamp_min(1e-12)[:, None]  # [N, d]
    cosine = unit @ unit.T  # [N, N]
    tokens = [len(e.ids) for e in tokenizer.encode_batch(list(texts))]
    c = model.config
    if as_json:
        click.echo(
            json.dumps(
                {
                    "model": model_name,
                    "dim": c.d_model,
                    "pooling": c.pooling,
                    "normalize": c.normalize,
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
