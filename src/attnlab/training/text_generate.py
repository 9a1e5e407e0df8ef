"""Continue a prompt with a GPT trained on text (``attnlab generate RUN_DIR PROMPT`` on a text run).

The model has ``max_len`` positions (its training context). Greedy decoding and sampling slide:
while the sequence fits, each new token costs one position through the KV cache; once it fills
the positions, every further token is predicted from the last ``max_len`` tokens, re-read from
scratch (as nanoGPT's ``generate`` crops its context), so ``--max-new`` is not bounded by the
context. Beam search does not slide: prompt plus new tokens must fit in the positions.

A prompt longer than the positions keeps its last ``max_len`` tokens (with a warning). A character
outside a char model's vocabulary is a ``ValueError`` naming it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from attnlab.decoding import beam_search, filter_logits
from attnlab.devices import resolve_device, torch_threads
from attnlab.models.hf.textgen import (
    GenerationRequest,
    _TextStream,
    check_dtype,
    decode_engine_for,
    decoder_of,
    prompt_ids,
)
from attnlab.models.load import Loaded, load
from attnlab.training.text_data import read_meta


def is_text_run(source: Loaded | str | Path) -> bool:
    """Whether ``source`` (a loaded model or a folder) is a run of a GPT trained on text (its folder
    holds ``text.json`` beside ``latest.json``)."""
    if isinstance(source, Loaded):
        return source.origin == "run" and source.text is not None
    return (Path(source) / "text.json").is_file() and (Path(source) / "latest.json").is_file()


def load_text_run(directory: str | Path):
    """``(model in eval mode, tokenizer, text.json)`` of a text run, every file verified
    (:func:`attnlab.models.load`); a folder that is not a text run is a ``ValueError``."""
    read_meta(Path(directory))  # a text run's own checks, with its messages
    loaded = load(directory)
    model, tokenizer = decoder_of(loaded)
    return model, tokenizer, loaded.text


@torch.no_grad()
def slide(
    model,
    prompt: list[int],
    request: GenerationRequest,
    device,
) -> Iterator[int]:
    """New token ids, one at a time: greedy (``temperature`` 0) or sampled, context cropped to the
    model's ``max_len`` positions (see module doc). ``prompt``: at most ``max_len`` ids."""
    limit = model.config.max_len
    gen = None if request.seed is None else torch.Generator(device=device).manual_seed(request.seed)
    window = list(prompt)
    engine = decode_engine_for(model, request)  # "auto", or bfloat16 GEMMs (cache only)
    state = model.start(torch.tensor([window], device=device), engine=engine) if request.use_cache else None
    logits = state.last_logits if state is not None else model(torch.tensor([window], device=device))[:, -1]
    for t in range(request.max_new):
        if request.temperature == 0:
            tok = int(logits.argmax(-1)[0])
        else:
            probs = filter_logits(logits.float(), request.temperature, request.top_k, request.top_p).softmax(
                -1
            )
            tok = int(torch.multinomial(probs, 1, generator=gen)[0, 0])  # probs [1, V]
        yield tok
        if t == request.max_new - 1:
            return
        window = (window + [tok])[-limit:]
        if state is not None and state.length < limit:  # room in the cache: one position more
            logits, state = model.step(torch.tensor([tok], device=device), state)
        elif engine != "auto":  # full, bfloat16: re-read the last max_len tokens on the same engine
            state = model.start(torch.tensor([window], device=device), engine=engine)
            logits = state.last_logits  # [1, V]
        else:  # full (or no cache): re-read the last max_len tokens
            logits = model(torch.tensor([window], device=device))[:, -1]  # [1, V]
            state = None


def run_text_generation(
    source: str | Path | Loaded,
    request: GenerationRequest,
    on_text: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
    threads: int | None = 1,
) -> dict:
    """Continue ``request.prompt`` with the text run ``source`` (its folder, or what
    :func:`attnlab.models.load` returned for it); ``on_text(piece)`` receives the
    text as it comes. Returns the same dict as :func:`attnlab.models.hf.textgen.run_generation`
    (``cache`` is None: the cache is dropped once the context slides).

    ``threads``: torch intra-op threads meanwhile (restored after; None = leave as is). One, as for
    training: these models are small, and on a busy 2-core machine we measured 80 tokens in 4.0 s
    with two threads and 0.18 s with one."""
    with torch_threads(threads):
        return _generate(source, request, on_text, warn)


def _generate(source, request: GenerationRequest, on_text, warn) -> dict:
    device = resolve_device(request.device)
    if isinstance(source, Loaded):
        model, tokenizer = decoder_of(source)
    else:
        model, tokenizer, _ = load_text_run(source)
    model.to(device)
    ids = prompt_ids(tokenizer, request.prompt)
    limit = model.config.max_len
    check_dtype(request)
    if request.beam is not None and len(ids) + request.max_new > limit:
        raise ValueError(
            f"prompt of {len(ids)} tokens + --max-new {request.max_new} exceeds the model's {limit} "
            f"positions; beam search cannot slide its context (use fewer tokens, or greedy/sampling)"
        )
    if len(ids) > limit:
        if warn is not None:
            warn(f"the prompt has {len(ids)} tokens; the model reads only its last {limit} (its positions)")
        ids = ids[-limit:]
    if request.temperature != 0:
        filter_logits(torch.zeros(1, 2), request.temperature, request.top_k, request.top_p)  # checks
    out = _TextStream(tokenizer, on_text)
    start = time.perf_counter()
    if request.beam is not None:
        best = beam_search(
            model, torch.tensor([ids], device=device), request.beam, request.max_new, eos_id=-1
        )
        for tok in best.hypotheses[0][0].tokens:
            out.add(int(tok))
    else:
        for tok in slide(model, ids, request, device):
            out.add(tok)
    return out.result(request, ids, start, stopped_at_eos=False, cache=None)
