"""Text in, text out: a decoder continues a prompt (what ``attnlab generate`` runs on a Hugging Face
checkpoint or a saved GPT with its ``tokenizer.json``; a text run slides its context instead, in
:mod:`attnlab.training.text_generate`). The model and tokenizer come from
:func:`attnlab.models.load`; decode with :func:`attnlab.decoding.stream` (greedy or sampling, KV
cache) or :func:`~attnlab.decoding.beam_search`, stop at the checkpoint's end-of-sequence token(s),
and report the tokens, the text, the time and the KV cache the model held at the end."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import torch

from attnlab._checks import memory_bytes
from attnlab.decoding import beam_search, check_seed, room_hint, stream
from attnlab.devices import resolve_device
from attnlab.models.gpt import GPT
from attnlab.models.gpt_decode import DecodeEngine, unsupported
from attnlab.models.hf.checkpoint import read_hf_config, read_json
from attnlab.models.load import Loaded, load
from attnlab.models.precision import warn_if_slow
from attnlab.nn.nonfinite import require_finite_weights
from attnlab.tasks.text_tokenizer import char_vocabulary, describe_characters
from attnlab.tasks.tokenize import HFTokenizer, Tokenizer


@dataclasses.dataclass(frozen=True)
class GenerationRequest:
    """What to generate: ``prompt`` text, ``max_new`` tokens, greedy (``temperature=0``) or sampling
    (``temperature``, ``top_k``, ``top_p``, ``seed``) or ``beam`` search, with or without the cache."""

    prompt: str
    max_new: int = 32
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    beam: int | None = None
    use_cache: bool = True
    device: str = "cpu"  # "auto" | "cpu" | "cuda" (attnlab.devices.resolve_device)
    dtype: str = "float32"  # or "bfloat16": the decode engine's GEMMs (DecodeEngine(dtype="bfloat16"))

    def __post_init__(self):
        check_seed(self.seed)  # before any model is loaded


DTYPES = ("float32", "bfloat16")


def check_dtype(request: GenerationRequest) -> None:
    """A one-line ``ValueError`` for a ``dtype`` not in :data:`DTYPES`, or bfloat16 asked of beam
    search or of decoding without the KV cache (the bfloat16 GEMMs are the decode engine's)."""
    if request.dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {request.dtype!r}")
    if request.dtype != "float32" and (request.beam is not None or not request.use_cache):
        raise ValueError(
            "bfloat16 runs the cached decode engine: it takes neither beam search nor use_cache=False "
            "(--no-cache)"
        )


def decode_engine_for(model: GPT, request: GenerationRequest):
    """What :meth:`GPT.start` decodes ``request`` with: ``"auto"`` for float32, else a
    :class:`~attnlab.models.gpt_decode.DecodeEngine` whose GEMMs run in bfloat16 (weights cast once;
    norms, attention and the KV cache stay float32). bfloat16 needs the KV cache and greedy or
    sampled decoding, and an engine that can run the model: otherwise a one-line ``ValueError``. On a
    CPU without AVX-512 BF16 or AMX it warns once that it will be slow."""
    check_dtype(request)
    if request.dtype == "float32":
        return "auto"
    device = next(model.parameters()).device
    if device.type != "cpu":
        raise ValueError(f"bfloat16 generation runs oneDNN's CPU kernels; the model is on {device}")
    with torch.no_grad():  # as decoding will run
        why = unsupported(model)
    if why is not None:
        raise ValueError(f"bfloat16 needs the decode engine, which cannot run this model: {why}")
    warn_if_slow("bfloat16")
    return DecodeEngine(model, dtype="bfloat16")


def eos_ids(directory: str | Path) -> list[int]:
    """The end-of-sequence ids of a checkpoint: ``eos_token_id`` of ``generation_config.json``, else
    of ``config.json`` (an int or a list; Llama 3 lists two)."""
    directory = Path(directory)
    gen = directory / "generation_config.json"
    sources = [(gen, read_json(gen, kind=None))] if gen.is_file() else []
    for path, source in [*sources, (directory / "config.json", read_hf_config(directory))]:
        eos = source.get("eos_token_id") if isinstance(source, dict) else None
        if eos is None:
            continue
        ids = eos if isinstance(eos, list) else [eos]
        if not all(isinstance(e, int) and not isinstance(e, bool) and e >= 0 for e in ids):
            raise ValueError(f"{path}: eos_token_id must be a token id or a list of them, got {eos!r:.60}")
        return ids
    return []


class _TextStream:
    """Text of the ids so far, handed out piece by piece (a byte-level token may end inside a
    UTF-8 character: its text waits until the character is whole)."""

    def __init__(self, tokenizer: Tokenizer, on_text: Callable[[str], None] | None):
        self.tokenizer, self.on_text, self.ids, self.shown = tokenizer, on_text, [], ""

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids``, without special tokens (an end-of-sequence token shows no text)."""
        if isinstance(self.tokenizer, HFTokenizer):
            return self.tokenizer.decode(ids, skip_special_tokens=True)
        return self.tokenizer.decode(ids)

    def add(self, token: int) -> None:
        self.ids.append(token)
        text = self.decode(self.ids)
        if self.on_text is not None and text.startswith(self.shown) and not text.endswith("\ufffd"):
            self.on_text(text[len(self.shown) :])
            self.shown = text

    def result(self, request, prompt_ids: list[int], start: float, stopped_at_eos: bool, cache) -> dict:
        """Hand over what is not shown yet (beam search, a last partial character) and the run's
        record (see :func:`run_generation`); ``start`` is the ``perf_counter`` when decoding began."""
        seconds = time.perf_counter() - start
        text = self.decode(self.ids)
        if self.on_text is not None and self.shown != text:
            self.on_text(text[len(self.shown) :])
        n = len(self.ids)
        return {
            "prompt": request.prompt,
            "prompt_tokens": len(prompt_ids),
            "tokens": self.ids,
            "text": text,
            "new_tokens": n,
            "stopped_at_eos": stopped_at_eos,
            "seconds": seconds,
            "tokens_per_s": n / seconds if seconds > 0 else float("inf"),
            "strategy": _strategy(request),
            "dtype": request.dtype,
            "cache": cache,
        }


def run_generation(
    source: str | Path | Loaded, request: GenerationRequest, on_text: Callable[[str], None] | None = None
) -> dict:
    """Continue ``request.prompt`` with the decoder ``source`` (anything :func:`attnlab.models.load`
    reads, or what it returned); ``on_text(piece)`` receives the text as it is produced (greedy and
    sampling; beam search hands over the whole text at the end).

    Returns a dict: "prompt", "prompt_tokens", "tokens" (the new ids), "text", "new_tokens",
    "stopped_at_eos", "seconds", "tokens_per_s" (new tokens over the decoding time, prompt included),
    "strategy", "dtype", "cache" ({"positions_held", "bytes", "rolling_window"} or None)."""
    device = resolve_device(request.device)
    loaded = source if isinstance(source, Loaded) else load(source, device=device)
    model, tokenizer = decoder_of(loaded)
    model.to(device)
    ids = prompt_ids(tokenizer, request.prompt)
    prompt = torch.tensor([ids], device=device)  # [1, P]
    engine = decode_engine_for(model, request)
    eos = eos_ids(loaded.source) if loaded.origin == "hf" else []
    out = _TextStream(tokenizer, on_text)
    start = time.perf_counter()
    if request.beam is not None:
        _beam(model, prompt, request, eos, out)
        state = None
    else:
        state = _sample(model, prompt, request, eos, out, engine)
    stopped = bool(eos) and bool(out.ids) and out.ids[-1] in eos
    cache = None if state is None else _cache_held(state.caches, model.config.window)
    return out.result(request, ids, start, stopped, cache)


def decoder_of(loaded: Loaded) -> tuple[GPT, Tokenizer]:
    """The decoder and tokenizer of ``loaded``; an encoder, a sequence-to-sequence model, a model
    without a tokenizer or one whose weights hold NaN or infinity is a one-line ``ValueError``."""
    require_finite_weights(loaded.model)
    if not isinstance(loaded.model, GPT):
        raise ValueError(
            f"{loaded.source} holds a {loaded.kind} model; generate needs a decoder (a GPT-family checkpoint)"
        )
    if loaded.tokenizer is None:
        raise ValueError(
            f"{loaded.source} has no tokenizer.json beside the model: generate reads text with it"
        )
    return loaded.model, loaded.tokenizer


def prompt_ids(tokenizer: Tokenizer, text: str) -> list[int]:
    """The prompt's ids. A character vocabulary (an attnlab text run) refuses characters it lacks,
    naming them; any other tokenizer maps them to ``<unk>`` with one ``UnknownCharacterWarning``
    naming each (the CLI prints it as one line on stderr)."""
    vocab = char_vocabulary(tokenizer.backend) if isinstance(tokenizer, HFTokenizer) else None
    unknown = tokenizer.unknown(text) if vocab is not None else []
    if unknown:
        raise ValueError(
            f"the prompt has characters outside the model's vocabulary of {len(vocab)}: "
            f"{describe_characters(unknown)}"
        )
    ids = tokenizer.encode(text)
    if not ids:
        raise ValueError("the prompt is empty: it encodes to no tokens")
    return ids


def _beam(model, prompt: torch.Tensor, request: GenerationRequest, eos: list[int], out: _TextStream) -> None:
    """Beam search from ``prompt [1, P]``; the best hypothesis's tokens go to ``out`` at the end."""
    limit = model.config.max_len
    if prompt.shape[1] + request.max_new > limit:
        raise ValueError(
            f"prompt length {prompt.shape[1]} + max_new_tokens {request.max_new} exceeds max_len={limit} "
            f"(the model's positions): {room_hint(limit, prompt.shape[1])}"
        )
    check_beam(model.config, request.beam, limit)
    best = beam_search(model, prompt, request.beam, request.max_new, eos_id=eos[0] if eos else -1)
    for tok in best.hypotheses[0][0].tokens:
        out.add(int(tok))


def check_beam(config, beam: int, length: int) -> None:
    """Refuse, before anything is allocated, a beam wider than the vocabulary (the first step has
    only ``vocab_size`` candidates) or one whose KV caches ``2 x L x beam x h_kv x T x d_k`` float32
    and logits ``[beam, V]`` (x 3: scores, sort) would not fit in half of this machine's memory."""

    if beam > config.vocab_size:
        raise ValueError(f"--beam {beam:,} is more than the vocabulary ({config.vocab_size:,} tokens)")
    d_k = config.d_model // config.num_heads
    kv = config.num_kv_heads or config.num_heads
    need = 4 * beam * (2 * config.num_layers * kv * length * d_k + 3 * config.vocab_size)
    have = memory_bytes()
    if need > have // 2:
        raise ValueError(
            f"--beam {beam:,} would need {need / 2**30:,.1f} GiB of KV cache and logits; "
            f"this machine has {have / 2**30:,.1f} GiB"
        )


def _sample(
    model, prompt: torch.Tensor, request: GenerationRequest, eos: list[int], out: _TextStream, engine
):
    """Greedy or sampled decoding from ``prompt [1, P]`` on ``engine`` (:func:`decode_engine_for`),
    each token to ``out`` as it comes; returns the decoding state (its KV caches)."""
    steps = stream(
        model,
        prompt,
        request.max_new,
        use_cache=request.use_cache,
        temperature=request.temperature,
        top_k=request.top_k,
        top_p=request.top_p,
        seed=request.seed,
        eos_id=eos or None,
        engine=engine,
    )
    for tok, _ in steps:
        out.add(int(tok[0]))
    return steps.state


def _strategy(request: GenerationRequest) -> str:
    """The decoding strategy in words: "greedy", "sampling at temperature 0.8, top-k 40",
    "beam search, 4 beams"."""
    if request.beam is not None:
        return f"beam search, {request.beam} beams"
    if request.temperature == 0:
        return "greedy"
    name = f"sampling at temperature {request.temperature:g}"
    if request.top_k:
        name += f", top-k {request.top_k}"
    if request.top_p is not None:
        name += f", top-p {request.top_p:g}"
    return name


def _cache_held(caches, window: int | None) -> dict:
    """What the KV caches ``[B, h_kv, T, d_k]`` per layer held at the end: positions, bytes, window."""
    return {
        "positions_held": max(c.k.shape[-2] for c in caches),
        "bytes": sum(c.k.numel() * c.k.element_size() + c.v.numel() * c.v.element_size() for c in caches),
        "rolling_window": window,
    }
