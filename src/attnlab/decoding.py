"""Turning a model's next-token distribution into sequences: greedy, beam search, sampling, and
GPT generation with or without the KV cache.

Every function drives the model through the incremental decoding protocol of
:mod:`attnlab.models`: ``state = model.start(src)``, ``logits, state = model.step(tokens, state)``,
``state = model.reorder(state, index)``. Seq2seq models (Transformer, the RNNs) start by feeding
BOS; a GPT's ``start(prompt)`` has already consumed the prompt and left the next-token logits in
``state.last_logits``. The caller chooses ``model.eval()``; nothing here changes the mode.

Results are the *generated* tokens (no BOS, no prompt), EOS included, padded with ``pad_id``
after EOS; ``max_len`` counts generated tokens. A model loaded with weights holding NaN or
infinity (``model.nonfinite_weights``, found once at load) is refused, naming the tensor.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import NamedTuple

import torch
import torch.nn.functional as F

from attnlab._checks import int_in, positive_int
from attnlab.nn.nonfinite import require_finite_weights
from attnlab.tasks.tokenize import wrap


def _pad_id(model, pad_id: int | None) -> int:
    if pad_id is not None:
        return pad_id
    return int(getattr(getattr(model, "config", None), "pad_id", 0))


def _check_decoder(model, what: str = "generate") -> None:
    """A ``ValueError`` unless ``model`` is decoder-only (a GPT): what :func:`generate` and
    :func:`stream` continue. A seq2seq model decodes from a source with greedy/sample/beam_search."""
    if not getattr(model, "DECODER_ONLY", False):
        kind = getattr(model, "kind", None)
        named = f"a {kind} model ({type(model).__name__})" if kind else f"a {type(model).__name__}"
        raise ValueError(
            f"{what} needs a decoder-only model (a GPT-family checkpoint), got {named}; "
            "a seq2seq model decodes a source with greedy, sample or beam_search"
        )


def _check_token(name: str, value, vocab: int, *, many: bool = False) -> None:
    """A ``ValueError`` naming ``name`` unless ``value`` is a token id in ``0..vocab-1`` (with
    ``many``: also a non-empty list of them)."""
    values = list(value) if many and isinstance(value, (list, tuple)) and value else [value]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v < vocab:
            also = " (or a list of them)" if many else ""
            raise ValueError(f"{name} must be a token id in 0..{vocab - 1}{also}, got {value!r}")


MAX_SEED = 2**63 - 1  # torch.Generator.manual_seed takes no more


def check_seed(seed) -> int | None:
    """``seed`` if it is None or an integer in ``0..MAX_SEED`` (not a bool), else a ``ValueError``
    naming it (a negative seed was taken, and is not one a sampler documents)."""
    return None if seed is None else int_in("seed", seed, 0, MAX_SEED)


def as_source(model, src) -> torch.Tensor:
    """``src`` as source ids ``[B, S]`` (long, on ``model``'s device) for :func:`greedy`,
    :func:`sample` and :func:`beam_search`: a tensor ``[B, S]`` or ``[S]``, or a list of ids (or of
    equal-length lists of ids), as :func:`as_prompt` reads a prompt. Text is a ``ValueError``:
    these functions take no tokenizer (encode it first; :func:`generate` takes text)."""
    if isinstance(src, str):
        raise ValueError(
            "src must be token ids [B, S] (a tensor or a list of lists of ints), not text: "
            "encode it with the model's tokenizer first"
        )
    return as_prompt(model, src, name="src")


def _begin(model, src: torch.Tensor, bos_id: int):
    """Start decoding: ``(logits [B, V] of the first generated token, state)``."""
    state = model.start(src)
    last = getattr(state, "last_logits", None)
    if last is not None:  # a decoder-only model has read its prompt already
        return last, state
    bos = torch.full((src.shape[0],), bos_id, dtype=torch.long, device=src.device)  # [B]
    return model.step(bos, state)


# ----------------------------------------------------------------------------------------- greedy
@torch.no_grad()
def greedy(
    model, src: torch.Tensor, max_len: int, bos_id: int = 1, eos_id: int = 2, pad_id: int | None = None
) -> torch.Tensor:
    """y_t = argmax_v p(v | y_<t, src) until EOS or ``max_len`` tokens.

    Args:
        model: a model with ``start``/``step`` (Transformer, Seq2SeqRNN, AttentionRNN, GPT).
        src: ``[B, S]`` source ids (for a GPT: the prompt ``[B, P]``).
        max_len: most tokens to generate per sequence.
    Returns:
        ``[B, L]`` long (``L <= max_len``): generated tokens, ``pad_id`` after each row's EOS.
    """
    # sampling at temperature 0 is exactly this: argmax at every step
    return sample(model, src, max_len, temperature=0, bos_id=bos_id, eos_id=eos_id, pad_id=pad_id)


# ----------------------------------------------------------------------------------------- sampling
def filter_logits(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """The sampling distribution's logits: ``(logits - max) / T`` (the same softmax as ``logits / T``),
    then all but the ``top_k`` largest set to -inf, then all outside the nucleus (the smallest set of
    most likely tokens whose probability reaches ``top_p``; the most likely token always stays) set
    to -inf. The division is in float64 after the shift, so a tiny T (1e-300) is its T -> 0 limit:
    every token but the most likely (ties share) gets -inf, i.e. greedy, never NaN.

    Args:
        logits: ``[B, V]``. temperature: T > 0. top_k: positive int or None. top_p: in (0, 1] or None.
    Returns:
        ``[B, V]``; ``softmax`` of it is the distribution sampled from.
    """
    if not (isinstance(temperature, (int, float)) and 0 < temperature < math.inf):
        raise ValueError(
            f"temperature must be > 0 and finite for sampling (use greedy for 0), got {temperature!r}"
        )
    top = logits.max(dim=-1, keepdim=True).values  # [B, 1]
    shifted = logits - top.masked_fill(~top.isfinite(), 0.0)  # the largest finite logit -> 0
    logits = (shifted.double() / temperature).to(logits.dtype)  # float32's 1e-300 would be 0
    if top_k is not None:
        top_k = positive_int("top_k", top_k)
        if top_k < logits.shape[-1]:
            kth = logits.topk(top_k, dim=-1).values[..., -1:]  # [B, 1]
            logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        if not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
            raise ValueError(f"top_p must lie in (0, 1], got {top_p!r}")
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # [B, V]
        probs = sorted_logits.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # probability of the more likely tokens  [B, V]
        drop_sorted = before >= top_p  # the nucleus is reached before this token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # back to vocabulary order
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def _generator(generator: torch.Generator | None, seed: int | None, device) -> torch.Generator | None:
    if generator is not None:
        return generator
    if seed is None:
        return None
    return torch.Generator(device=device).manual_seed(seed)


def _choose(logits, temperature, top_k, top_p, gen) -> torch.Tensor:
    if temperature == 0:
        return logits.argmax(dim=-1)  # [B]
    probs = filter_logits(logits.float(), temperature, top_k, top_p).softmax(dim=-1)  # [B, V]
    return torch.multinomial(probs, 1, generator=gen)[:, 0]  # [B]


@torch.no_grad()
def sample(
    model,
    src: torch.Tensor,
    max_len: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    seed: int | None = None,
    bos_id: int = 1,
    eos_id: int = 2,
    pad_id: int | None = None,
) -> torch.Tensor:
    """y_t ~ softmax(filter(logits_t)) (see :func:`filter_logits`) until EOS or ``max_len`` tokens.

    ``seed`` (or a ``generator``) makes the draw reproducible; ``temperature=0`` is greedy.

    Returns:
        ``[B, L]`` long, ``pad_id`` after each row's EOS.
    """
    require_finite_weights(model)  # weights found NaN at load: every token would be noise
    positive_int("max_len", max_len)
    if temperature != 0:
        filter_logits(torch.zeros(1, 2), temperature, top_k, top_p)  # validate the options up front
    src = as_source(model, src)  # [B, S]
    gen = _generator(generator, check_seed(seed), src.device)
    pad = _pad_id(model, pad_id)
    logits, state = _begin(model, src, bos_id)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    out = []
    for t in range(max_len):
        tok = _choose(logits, temperature, top_k, top_p, gen).masked_fill(done, pad)  # [B]
        out.append(tok)
        done = done | (tok == eos_id)
        if bool(done.all()) or t == max_len - 1:
            break
        logits, state = model.step(tok, state)
    return torch.stack(out, dim=1)  # [B, L]


# ----------------------------------------------------------------------------------------- beam search
@dataclasses.dataclass(frozen=True)
class Hypothesis:
    """A finished hypothesis: generated ``tokens`` (EOS included if it ended with one), the sum of
    their log-probabilities, and ``score = log_prob / len(tokens) ** length_penalty``."""

    tokens: tuple[int, ...]
    log_prob: float
    score: float


class BeamResult(NamedTuple):
    """``tokens [B, L]``: each source's best hypothesis (``pad_id``-padded); ``scores [B]``; and
    ``hypotheses``: per source, the ``n_best`` best, best first."""

    tokens: torch.Tensor
    scores: torch.Tensor
    hypotheses: list[list[Hypothesis]]


def _score(log_prob: float, length: int, alpha: float) -> float:
    return log_prob / length**alpha


@torch.no_grad()
def _beam_one(
    model,
    src: torch.Tensor,
    beam_size: int,
    max_len: int,
    alpha: float,
    n_best: int,
    bos_id: int,
    eos_id: int,
) -> list[Hypothesis]:
    logits, state = _begin(model, src, bos_id)  # [1, V]
    logp = F.log_softmax(logits.double(), dim=-1).cpu()  # [k, V]
    vocab = logp.shape[-1]
    alive = torch.zeros(1, 0, dtype=torch.long)  # tokens of each live beam  [k, t-1]
    alive_lp = torch.zeros(1, dtype=torch.float64)  # their summed log-probabilities  [k]
    finished: list[Hypothesis] = []
    for t in range(1, max_len + 1):  # t = length of the hypotheses after this step
        flat = (alive_lp[:, None] + logp).reshape(-1)  # every one-token extension  [k V]
        n_finite = int(torch.isfinite(flat).sum())
        top = flat.topk(min(2 * beam_size, n_finite))  # enough to refill the beam after EOS
        keep: list[int] = []
        for rank, (lp, idx) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
            beam, tok = divmod(idx, vocab)
            if tok == eos_id:
                if rank < beam_size:  # an ended hypothesis ranked in the beam is set aside
                    finished.append(Hypothesis((*alive[beam].tolist(), eos_id), lp, _score(lp, t, alpha)))
            elif len(keep) < beam_size:
                keep.append(idx)
        index = torch.tensor(keep, dtype=torch.long)
        beam_idx, tok = index // vocab, index % vocab  # [k'] each
        alive = torch.cat([alive[beam_idx], tok[:, None]], dim=1)  # [k', t]
        alive_lp = flat[index]  # [k']
        if t == max_len:  # out of room: the live beams end here, truncated
            finished += [
                Hypothesis(tuple(a), lp, _score(lp, t, alpha))
                for a, lp in zip(alive.tolist(), alive_lp.tolist())
            ]
            break
        finished.sort(key=lambda h: -h.score)
        if not keep or len(finished) >= beam_size:  # the beam is done (fairseq's rule)
            break
        if len(finished) >= n_best:
            # log-probabilities only fall, so a live beam can at best keep its sum at the most
            # favourable final length; stop when none of them can enter the n-best
            bound = max(_score(float(alive_lp.max()), n, alpha) for n in (t + 1, max_len))
            if finished[n_best - 1].score >= bound:
                break
        dev = src.device
        state = model.reorder(state, beam_idx.to(dev))
        logits, state = model.step(tok.to(dev), state)
        logp = F.log_softmax(logits.double(), dim=-1).cpu()
    finished.sort(key=lambda h: -h.score)
    return finished[:n_best]


def beam_search(
    model,
    src: torch.Tensor,
    beam_size: int,
    max_len: int,
    length_penalty: float = 1.0,
    n_best: int = 1,
    bos_id: int = 1,
    eos_id: int = 2,
    pad_id: int | None = None,
) -> BeamResult:
    """Keep the ``beam_size`` best partial hypotheses at each step (by summed log-probability).

    Each step ranks every one-token extension of the live beams; an extension ending in EOS that
    ranks within the beam is finished and set aside while the best ``beam_size`` others continue.
    The search stops at ``max_len`` (live beams end there, truncated), when ``beam_size``
    hypotheses have finished, or when no live beam can still beat the ``n_best``-th finished one.
    With ``beam_size=1`` this is greedy decoding.
    Hypotheses are ranked by ``score = log p(y | src) / |y| ** length_penalty`` (``|y|`` counts
    EOS; 0 ranks by raw log-probability, 1 by the mean per token).

    Args:
        src: ``[B, S]`` (each row is searched separately). beam_size, max_len, n_best: positive ints.
    Returns:
        :class:`BeamResult` ``(tokens [B, L], scores [B], hypotheses)``.
    """
    require_finite_weights(model)
    beam_size, max_len, n_best = (
        positive_int(n, v) for n, v in (("beam_size", beam_size), ("max_len", max_len), ("n_best", n_best))
    )
    if n_best > beam_size:
        raise ValueError(f"n_best={n_best} cannot exceed beam_size={beam_size}")
    if not isinstance(length_penalty, (int, float)) or not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty!r}")
    pad = _pad_id(model, pad_id)
    src = as_source(model, src)  # [B, S]
    hyps = [
        _beam_one(model, src[b : b + 1], beam_size, max_len, float(length_penalty), n_best, bos_id, eos_id)
        for b in range(src.shape[0])
    ]
    width = max(len(h[0].tokens) for h in hyps)
    tokens = torch.full((src.shape[0], width), pad, dtype=torch.long)  # [B, L]
    for b, h in enumerate(hyps):
        tokens[b, : len(h[0].tokens)] = torch.tensor(h[0].tokens)
    scores = torch.tensor([h[0].score for h in hyps], dtype=torch.float64)  # [B]
    return BeamResult(tokens.to(src.device), scores, hyps)


# ----------------------------------------------------------------------------------------- GPT generation
def as_prompt(model, prompt, tokenizer=None, *, name: str = "prompt") -> torch.Tensor:
    """``prompt`` as token ids ``[B, P]`` (long, on ``model``'s device): a tensor ``[B, P]`` or ``[P]``,
    a list of ids (or of equal-length lists of ids), or a string, which ``tokenizer`` (any
    tokenizer :func:`attnlab.tasks.tokenize.wrap` takes) encodes. Anything else, or an empty prompt,
    is a one-line ``ValueError`` (naming the argument ``name``)."""
    if isinstance(prompt, str):
        if tokenizer is None:
            raise ValueError(f"a text {name} needs tokenizer= (model, tokenizer = attnlab.models.load(...))")
        prompt = [wrap(tokenizer).encode(prompt)]
    if isinstance(prompt, (list, tuple)):
        rows = [prompt] if not prompt or not isinstance(prompt[0], (list, tuple)) else prompt
        if any(isinstance(i, bool) or not isinstance(i, int) for r in rows for i in r):
            raise ValueError(
                f"{name} must be token ids (ints), a list of equal-length lists of them, or text"
            )
        if len({len(r) for r in rows}) > 1:
            raise ValueError(f"{name} rows have different lengths {sorted({len(r) for r in rows})}")
        prompt = torch.tensor(rows, dtype=torch.long)  # [B, P]
    if not torch.is_tensor(prompt):
        raise ValueError(
            f"{name} must be a string, a list of token ids or a tensor [B, P], got {type(prompt).__name__}"
        )
    if prompt.dtype.is_floating_point or prompt.dtype == torch.bool or prompt.is_complex():
        raise ValueError(f"{name} must hold integer token ids, got dtype {prompt.dtype}")
    if prompt.ndim == 1:
        prompt = prompt[None]  # [P] -> [1, P]
    if prompt.ndim != 2 or prompt.shape[1] == 0:
        raise ValueError(f"{name} must be [B, P] with P >= 1, got shape {list(prompt.shape)}")
    return prompt.to(device=_device(model, prompt.device), dtype=torch.long)  # [B, P]


def _device(model, default: torch.device) -> torch.device:
    """Where ``model``'s parameters live; ``default`` for a model without any (a lookup table that
    only speaks the decoding protocol)."""
    params = getattr(model, "parameters", None)
    first = next(iter(params()), None) if callable(params) else None
    return default if first is None else first.device


def stream(
    gpt,
    prompt,
    max_new_tokens: int,
    use_cache: bool = True,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    seed: int | None = None,
    eos_id: int | list[int] | None = None,
    pad_id: int | None = None,
    engine="auto",
):
    """Continue ``prompt [B, P]`` one token at a time: an iterator of ``(tokens [B], logits [B, V])``,
    each new token as soon as it is chosen (and the logits it was chosen from). ``prompt`` may also
    be ``[P]`` or a list of ids (:func:`as_prompt`).

    With ``use_cache`` each new token costs one position through the model (its K/V are appended
    to each layer's cache; a sliding-window model keeps only its last W positions); without it the
    whole sequence is re-run at every step (O(n^2) work, same numbers). ``temperature=0`` is
    greedy, otherwise sampling (see :func:`filter_logits`). With ``eos_id`` (one id or a list: a
    checkpoint may end on any of several) rows that produced EOS
    get ``pad_id`` afterwards, and the iterator stops once every row has. The arguments are checked
    when ``stream`` is called, before the first token. After the loop, ``gpt``'s decoding state
    is the iterator's ``state`` attribute (``None`` without the cache). ``engine`` is
    :meth:`GPT.start`'s (``"auto"``, ``"reference"`` or a
    :class:`~attnlab.models.gpt_decode.DecodeEngine`); the KV caches are allocated once for
    ``P + max_new_tokens`` positions.
    """
    _check_decoder(gpt, "stream")
    require_finite_weights(gpt)
    max_new_tokens = positive_int("max_new_tokens", max_new_tokens)
    vocab = gpt.config.vocab_size
    if eos_id is not None:
        _check_token("eos_id", eos_id, vocab, many=True)
    if pad_id is not None:
        _check_token("pad_id", pad_id, vocab)
    limit = gpt.config.max_len
    prompt = as_prompt(gpt, prompt)  # [B, P]
    if prompt.shape[1] + max_new_tokens > limit:
        raise ValueError(
            f"prompt length {prompt.shape[1]} + max_new_tokens {max_new_tokens} exceeds max_len={limit} "
            f"(the model's positions): {room_hint(limit, prompt.shape[1])}"
        )
    if temperature != 0:
        filter_logits(torch.zeros(1, 2), temperature, top_k, top_p)
    if isinstance(engine, str) and engine not in ("auto", "reference"):
        raise ValueError(f"engine must be 'auto', 'reference' or a DecodeEngine, got {engine!r}")
    rule = (temperature, top_k, top_p)
    return _Stream(gpt, prompt, max_new_tokens, use_cache, rule, seed, generator, eos_id, pad_id, engine)


class _Stream:
    """The iterator :func:`stream` returns (``state``: the model's decoding state, for inspection)."""

    def __init__(self, gpt, prompt, max_new, use_cache, choice, seed, generator, eos_id, pad_id, engine):
        self.gpt, self.prompt, self.max_new, self.use_cache, self.choice = (
            gpt,
            prompt,
            max_new,
            use_cache,
            choice,
        )
        self.engine = engine
        self.gen = _generator(generator, check_seed(seed), prompt.device)
        self.eos = None if eos_id is None else torch.tensor(eos_id, device=prompt.device).reshape(-1)  # [E]
        self.pad = _pad_id(gpt, pad_id)
        self.state = None

    @torch.no_grad()
    def __iter__(self):
        gpt, ids = self.gpt, self.prompt
        if self.use_cache:
            capacity = ids.shape[1] + self.max_new  # every position this generation will hold
            self.state = gpt.start(ids, capacity=capacity, engine=self.engine)
            logits = self.state.last_logits  # [B, V]
        else:
            logits = gpt(ids)[:, -1]  # [B, V]
        done = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
        for t in range(self.max_new):
            tok = _choose(logits, *self.choice, self.gen).masked_fill(done, self.pad)  # [B]
            yield tok, logits
            if self.eos is not None:
                done = done | torch.isin(tok, self.eos)
                if bool(done.all()):
                    return
            if t == self.max_new - 1:
                return
            if self.use_cache:
                logits, self.state = gpt.step(tok, self.state)
            else:
                ids = torch.cat([ids, tok[:, None]], dim=1)  # [B, P + t + 1]
                logits = gpt(ids)[:, -1]


@torch.no_grad()
def generate(
    gpt,
    prompt,
    max_new_tokens: int,
    use_cache: bool = True,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    seed: int | None = None,
    eos_id: int | None = None,
    pad_id: int | None = None,
    return_logits: bool = False,
    tokenizer=None,
    engine="auto",
):
    """Continue ``prompt [B, P]`` by ``max_new_tokens`` tokens: :func:`stream`, collected.

    ``prompt``: a tensor ``[B, P]`` or ``[P]``, a list of ids, or text, which ``tokenizer`` encodes
    (``model, tokenizer = attnlab.models.load(source)``; decode the result with
    ``tokenizer.decode(ids[0].tolist())``); anything else is a one-line ``ValueError``.
    ``engine``: see :func:`stream`.

    Returns:
        ``ids [B, P + N]`` (prompt then new tokens), and with ``return_logits`` also the logits
        of each new token ``[B, N, V]``.
    """
    _check_decoder(gpt)
    prompt = as_prompt(gpt, prompt, tokenizer)  # [B, P]
    rule = (temperature, top_k, top_p)
    steps = stream(gpt, prompt, max_new_tokens, use_cache, *rule, generator, seed, eos_id, pad_id, engine)
    new, all_logits = [], []
    for tok, logits in steps:
        new.append(tok)
        all_logits.append(logits)
    ids = torch.cat([prompt, torch.stack(new, dim=1)], dim=1)  # [B, P + N]
    if return_logits:
        return ids, torch.stack(all_logits, dim=1)  # [B, P + N], [B, N, V]
    return ids


def room_hint(limit: int, prompt: int) -> str:
    """What fits ``limit`` positions after a prompt of ``prompt`` tokens, said as a fix."""
    room = limit - prompt
    return f"ask for at most {room:,} new tokens" if room > 0 else f"the prompt alone fills all {limit}"
