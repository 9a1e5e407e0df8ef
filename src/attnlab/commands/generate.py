"""``attnlab generate DIR PROMPT``: continue a prompt with any decoder :func:`attnlab.models.load`
reads (a Hugging Face checkpoint: GPT-2, Llama, Mistral, Qwen2; a GPT that ``attnlab train --text``
trained; a saved GPT with its ``tokenizer.json``), streaming the text as each token is chosen;
tokens/s at the end."""

from __future__ import annotations

import sys
import time

import click

from attnlab._io import dumps_json
from attnlab.commands._errors import BadInput, usage_errors
from attnlab.commands._text import text_or_file
from attnlab.commands._types import NUCLEUS, PositiveNumber, choice, device_option
from attnlab.commands._types import POSITIVE as POS


@click.command("generate")
@click.argument("directory", metavar="DIR", type=click.Path())
@click.argument("prompt", metavar="PROMPT")
@click.option("--max-new", default=32, show_default=True, type=POS, help="Tokens to generate.")
@click.option(
    "--temperature",
    default=None,
    type=PositiveNumber(),
    help="Sample at this temperature (default: greedy, the most likely token each step).",
)
@click.option("--top-k", default=None, type=POS, help="Sample among the K most likely tokens only.")
@click.option(
    "--top-p", default=None, type=NUCLEUS, help="Sample within the nucleus of probability P (0 < P <= 1)."
)
@click.option("--seed", default=None, type=int, help="Seed of the sampler (reproducible draws).")
@click.option("--beam", default=None, type=POS, help="Beam search with B beams instead (no streaming).")
@click.option("--no-cache", is_flag=True, help="Re-run the whole sequence every step (same tokens, slower).")
@click.option(
    "--dtype",
    default="float32",
    show_default=True,
    type=choice("attnlab.names:GENERATE_DTYPES"),
    help="Number format of the decode engine's matrix products: bfloat16 casts the weights once (fast "
    "with AVX-512 BF16 or AMX; norms, attention and KV cache stay float32). Greedy and sampling only.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (tokens, text, timing, cache).")
@click.option("--quiet", is_flag=True, help="Print the generated text only, no timing line.")
@device_option()
@usage_errors
def generate(
    directory, prompt, max_new, temperature, top_k, top_p, seed, beam, no_cache, dtype, as_json, quiet, device
) -> None:
    """Continue PROMPT (text, a file, or - for stdin) with the decoder in DIR (a Hugging Face
    checkpoint with its tokenizer.json, an attnlab train --text run folder, or a saved GPT with a
    tokenizer.json beside it), printing each piece of text as it is produced."""
    from attnlab.decoding import GenerationRequest, generate_text
    from attnlab.devices import resolve_device
    from attnlab.models import load

    sampling = temperature is not None
    if beam is not None and (sampling or top_k or top_p or seed is not None):
        raise BadInput(
            "--beam searches deterministically; it does not take --temperature, --top-k, --top-p or --seed"
        )
    if not sampling and (top_k or top_p is not None):
        raise BadInput("--top-k and --top-p apply to sampling: give --temperature too")
    if not sampling and beam is None and seed is not None:
        click.echo("note: greedy decoding (no --temperature) does not use --seed", err=True)
    if dtype != "float32" and (beam is not None or no_cache):
        raise BadInput(
            f"--dtype {dtype} runs the cached decode engine: it takes neither --beam nor --no-cache"
        )
    request = GenerationRequest(
        prompt=text_or_file(prompt, "PROMPT"),
        max_new=max_new,
        temperature=temperature or 0.0,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        beam=beam,
        use_cache=not no_cache,
        device=device,
        dtype=dtype,
    )

    echoed = [quiet or as_json]  # the prompt goes first, as it reads (--quiet: the continuation only)

    def show(piece: str) -> None:
        if not echoed[0]:
            click.echo(request.prompt, nl=False)
            echoed[0] = True
        if not as_json:
            click.echo(piece, nl=False)
            sys.stdout.flush()

    start = time.perf_counter()
    loaded = load(directory, device=resolve_device(device), finite=True)
    if loaded.origin == "run" and loaded.task is not None:
        raise BadInput(f"{directory} was trained on the task {loaded.task['name']!r}: use attnlab translate")
    warn = None if quiet else (lambda line: click.echo(f"Warning: {line}", err=True))
    try:
        result = generate_text(loaded, request, on_text=show, warn=warn)
    except ValueError as exc:  # the library names its arguments; the flags are ours
        said = str(exc).replace("max_new_tokens ", "--max-new ")
        raise BadInput(f"--{said}" if said.startswith("beam ") else said) from None
    if as_json:
        click.echo(dumps_json(result, indent=2, ensure_ascii=False))
        return
    show("")  # (the prompt, if no piece came)
    click.echo("")
    sys.stdout.flush()  # the text's line ends before the stats (stdout and stderr may share a pipe)
    if not quiet:
        cache = result["cache"]
        held = (
            ""
            if cache is None
            else f"; KV cache {cache['positions_held']} positions, {cache['bytes']:,} bytes"
        )
        click.echo(
            f"[{result['new_tokens']} tokens in {result['seconds']:.2f} s: "
            f"{result['tokens_per_s']:.1f} tokens/s "
            f"({result['strategy']}, {result['dtype']}); prompt {result['prompt_tokens']} tokens{held}; "
            f"total {time.perf_counter() - start:.2f} s with loading]",
            err=True,
        )
