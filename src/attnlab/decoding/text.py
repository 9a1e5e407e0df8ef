"""Text in, text out: the one front end that ``attnlab generate``, ``attnlab serve``'s generate
view, the experiments and the Python API call. :func:`generate_text` tokenizes the prompt, checks
it, decodes with the one loop (:func:`attnlab.decoding.stream`: greedy or sampling, KV cache,
sliding past the context) or beam search, stops at the model's end-of-sequence ids
(``Loaded.eos_ids``, read once by :func:`attnlab.models.load`), detokenizes, hands the text to a
callback piece by piece and reports the tokens, the time and the KV cache held at the end.

Any decoder :func:`attnlab.models.load` reads: a Hugging Face checkpoint, a GPT that ``attnlab
train --text`` trained, a saved GPT with its ``tokenizer.json``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import torch

from attnlab._checks import memory_bytes
from attnlab.decoding.beam import beam_search
from attnlab.decoding.loop import check_fits, check_seed, stream
from attnlab.devices import resolve_device, torch_threads
from attnlab.models.capabilities import require_decoder
from attnlab.models.gpt import GPT
from attnlab.models.gpt_decode import DecodeEngine, unsupported
from attnlab.models.load import Loaded, load
from attnlab.models.precision import warn_if_slow
from attnlab.names import GENERATE_DTYPES as DTYPES
from attnlab.nn.nonfinite import require_finite_weights
from attnlab.tasks.text_tokenizer import char_vocabulary, describe_characters
from attnlab.tasks.tokenize import HFTokenizer, Tokenizer


@dataclasses.dataclass(frozen=True)
class GenerationRequest:
    """What to generate: ``prompt`` text, ``max_new`` tokens, greedy (``temperature=0``) or sampling
    (``temperature``, ``top_k``, ``top_p``, ``seed``) or ``beam`` search, with or without the cache.
    ``device``: where a model loaded from a path goes (a model already loaded stays where it is)."""

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


def check_dtype(request: GenerationRequest) -> None:
    """A one-line ``ValueError`` for a ``dtype`` not in :data:`DTYPES`, or bfloat16 asked of beam
    search or of decoding without the KV cache (the bfloat16 GEMMs are the decode engine's)."""
    if request.dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {request.dtype!r}")
    if request.dtype != "float32" and (request.beam is not None or not request.use_cache):
        raise ValueError(
            "bfloat16 runs the cached decode engine: it takes neither beam search nor use_cache=False"
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

    def finish(self) -> str:
        """Hand over what is not shown yet (beam search, a last partial character); the whole text."""
        text = self.decode(self.ids)
        if self.on_text is not None and self.shown != text:
            self.on_text(text[len(self.shown) :])
        return text


def generate_text(
    source: str | Path | Loaded,
    request: GenerationRequest,
    on_text: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> dict:
    """Continue ``request.prompt`` with the decoder ``source`` (anything :func:`attnlab.models.load`
    reads, or what it returned); ``on_text(piece)`` receives the text as it is produced (greedy and
    sampling; beam search hands over the whole text at the end). A prompt longer than the model's
    positions keeps its last ``max_len`` tokens, said through ``warn(line)``; beam search refuses
    it, and any prompt plus ``max_new`` beyond the positions (it cannot slide).

    A text run decodes on one torch thread (restored after): these models are small, and on a busy
    2-core machine we measured 80 tokens in 4.0 s with two threads and 0.18 s with one.

    Returns a dict: "prompt", "prompt_tokens", "tokens" (the new ids, an end-of-sequence id
    included), "text", "new_tokens", "stopped_at_eos", "seconds", "tokens_per_s" (new tokens over
    the decoding time, prompt included), "strategy", "dtype", "score" (beam search's length-normalised
    log-probability, else None), "cache" ({"positions_held", "bytes", "rolling_window"} or None)."""
    loaded = source if isinstance(source, Loaded) else load(source, device=resolve_device(request.device))
    model, tokenizer = decoder_of(loaded)
    with torch_threads(1 if loaded.text is not None else None):
        return _generate(model, tokenizer, loaded.eos_ids, request, on_text, warn)


def _generate(model: GPT, tokenizer: Tokenizer, eos: list[int], request: GenerationRequest, on_text, warn):
    ids = prompt_ids(tokenizer, request.prompt)
    engine = decode_engine_for(model, request)
    limit = model.config.max_len
    if request.beam is None and len(ids) > limit:
        if warn is not None:
            warn(f"the prompt has {len(ids)} tokens; the model reads only its last {limit} (its positions)")
        ids = ids[-limit:]
    prompt = torch.tensor([ids], device=next(model.parameters()).device)  # [1, P]
    out, state, score = _TextStream(tokenizer, on_text), None, None
    start = time.perf_counter()
    if request.beam is not None:
        check_fits(model, len(ids), request.max_new, slides=False)
        check_beam(model.config, request.beam, len(ids) + request.max_new)
        best = beam_search(model, prompt, request.beam, request.max_new, eos_id=eos or None).hypotheses[0][0]
        for tok in best.tokens:
            out.add(int(tok))
        score = best.score
    else:
        rule = {"temperature": request.temperature, "top_k": request.top_k, "top_p": request.top_p}
        steps = stream(
            model,
            prompt,
            request.max_new,
            request.use_cache,
            **rule,
            seed=request.seed,
            eos_id=eos or None,
            engine=engine,
        )
        for tok, _ in steps:
            out.add(int(tok[0]))
        state = steps.state
    text = out.finish()
    seconds = time.perf_counter() - start
    n = len(out.ids)
    return {
        "prompt": request.prompt,
        "prompt_tokens": len(ids),
        "tokens": out.ids,
        "text": text,
        "new_tokens": n,
        "stopped_at_eos": bool(out.ids) and out.ids[-1] in eos,
        "seconds": seconds,
        "tokens_per_s": n / seconds if seconds > 0 else float("inf"),
        "strategy": strategy(request),
        "dtype": request.dtype,
        "score": score,
        "cache": None if state is None else _cache_held(state.caches, model.config.window),
    }


def decoder_of(loaded: Loaded) -> tuple[GPT, Tokenizer]:
    """The decoder and tokenizer of ``loaded``; an encoder, a sequence-to-sequence model, a model
    without a tokenizer or one whose weights hold NaN or infinity is a one-line ``ValueError``."""
    require_finite_weights(loaded.model)
    require_decoder(loaded.model, "generate", loaded.source)
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


def check_beam(config, beam: int, length: int) -> None:
    """Refuse, before anything is allocated, a beam wider than the vocabulary (the first step has
    only ``vocab_size`` candidates) or one whose KV caches ``2 x L x beam x h_kv x T x d_k`` float32
    and logits ``[beam, V]`` (x 3: scores, sort) would not fit in half of this machine's memory."""
    if beam > config.vocab_size:
        raise ValueError(f"beam {beam:,} is more than the vocabulary ({config.vocab_size:,} tokens)")
    d_k = config.d_model // config.num_heads
    kv = config.num_kv_heads or config.num_heads
    need = 4 * beam * (2 * config.num_layers * kv * length * d_k + 3 * config.vocab_size)
    have = memory_bytes()
    if need > have // 2:
        raise ValueError(
            f"beam {beam:,} would need {need / 2**30:,.1f} GiB of KV cache and logits; "
            f"this machine has {have / 2**30:,.1f} GiB"
        )


def strategy(request: GenerationRequest) -> str:
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
