"""The one decode loop: a model's next-token distribution turned into tokens, one at a time.

Every function drives the model through the incremental decoding protocol of
:mod:`attnlab.models`: ``state = model.start(src)``, ``logits, state = model.step(tokens, state)``.
Seq2seq models (Transformer, the RNNs) start by feeding BOS; a GPT's ``start(prompt)`` has already
consumed the prompt and left the next-token logits in ``state.last_logits``. Greedy, sampling,
top-k and top-p are choices of the next token in the same loop (:class:`Decoding`; greedy is
sampling at temperature 0); beam search (:mod:`attnlab.decoding.beam`) is the one other loop.

Sliding past the context is the loop's cache policy: a decoder-only model has ``max_len``
positions; while the sequence fits, each token costs one position through the KV cache, and once
it fills them every further token is predicted from the last ``max_len`` tokens, re-read (as
nanoGPT's ``generate`` crops its context). So greedy decoding and sampling take any number of new
tokens; the prompt itself must fit (:func:`check_fits`, the one fit check). The caller chooses
``model.eval()``; nothing here changes the mode.

Results are the *generated* tokens (no BOS, no prompt), EOS included, padded with ``pad_id``
after EOS; ``max_len`` counts generated tokens. A model loaded with weights holding NaN or
infinity (``model.nonfinite_weights``, found once at load) is refused, naming the tensor.
"""

from __future__ import annotations

import math
import numbers

import torch

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
    max_len = positive_int("max_len", max_len)
    check_choice(temperature, top_k, top_p)
    src = as_source(model, src)  # [B, S]
    check_fits(model, src.shape[1], max_len)
    gen = _generator(generator, check_seed(seed), src.device)
    rule = (temperature, top_k, top_p)
    steps = Decoding(
        model, src, max_len, rule, gen, _eos_ids(eos_id, src.device), _pad_id(model, pad_id), bos_id
    )
    return torch.stack([tok for tok, _ in steps], dim=1)  # [B, L]


def check_choice(temperature: float, top_k: int | None, top_p: float | None) -> None:
    """A ``ValueError`` naming the option unless ``(temperature, top_k, top_p)`` choose a next token
    (temperature 0: greedy; see :func:`filter_logits`), before any token is decoded."""
    if temperature != 0:
        filter_logits(torch.zeros(1, 2), temperature, top_k, top_p)


def _eos_ids(eos_id, device) -> torch.Tensor | None:
    """``eos_id`` (an id, a list of them, or None / a negative id: no end of sequence) as ``[E]``."""
    ids = [e for e in (eos_id if isinstance(eos_id, (list, tuple)) else [eos_id]) if e is not None and e >= 0]
    return torch.tensor(ids, dtype=torch.long, device=device) if ids else None  # [E]


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
    ``min(P + max_new_tokens, max_len)`` positions. Past ``max_len`` the context slides (module
    doc): any ``max_new_tokens`` is decoded; a prompt longer than ``max_len`` is a ``ValueError``.
    """
    _check_decoder(gpt, "stream")
    require_finite_weights(gpt)
    max_new_tokens = positive_int("max_new_tokens", max_new_tokens)
    vocab = gpt.config.vocab_size
    if eos_id is not None:
        _check_token("eos_id", eos_id, vocab, many=True)
    if pad_id is not None:
        _check_token("pad_id", pad_id, vocab)
    prompt = as_prompt(gpt, prompt)  # [B, P]
    check_fits(gpt, prompt.shape[1], max_new_tokens)
    check_choice(temperature, top_k, top_p)
    if isinstance(engine, str) and engine not in ("auto", "reference"):
        raise ValueError(f"engine must be 'auto', 'reference' or a DecodeEngine, got {engine!r}")
    gen = _generator(generator, check_seed(seed), prompt.device)
    eos = None if eos_id is None else _eos_ids(eos_id, prompt.device)
    rule = (temperature, top_k, top_p)
    return Decoding(
        gpt, prompt, max_new_tokens, rule, gen, eos, _pad_id(gpt, pad_id), use_cache=use_cache, engine=engine
    )


class Decoding:
    """The one decode loop (what :func:`sample`, :func:`greedy`, :func:`stream` and :func:`generate`
    run): an iterator of ``(tokens [B], logits [B, V])``, each token chosen by ``rule``
    ``(temperature, top_k, top_p)`` from the logits it is yielded with.

    ``src [B, S]``: a seq2seq model's source (decoding starts from ``bos_id``) or a decoder-only
    model's prompt. ``eos [E]`` (or None): rows that produced one of these get ``pad`` afterwards,
    and the loop stops once every row has. A decoder-only model decodes with its KV cache
    (``use_cache``; ``engine``: :meth:`GPT.start`'s) and slides past its ``max_len`` positions (see
    the module doc); ``state`` is the model's decoding state after the loop (None once it slid
    without a decode engine of its own, or without the cache).
    """

    def __init__(self, model, src, max_new, rule, gen, eos, pad, bos_id=1, use_cache=True, engine="auto"):
        self.model, self.src, self.max_new, self.rule, self.gen = model, src, max_new, rule, gen
        self.eos, self.pad, self.bos_id, self.use_cache, self.engine = eos, pad, bos_id, use_cache, engine
        self.decoder = getattr(model, "DECODER_ONLY", False)
        self.state, self.new = None, []  # new: the tokens [B] chosen so far (a decoder slides over them)

    @torch.no_grad()
    def __iter__(self):
        logits = self._start()  # [B, V]
        done = torch.zeros(self.src.shape[0], dtype=torch.bool, device=self.src.device)  # [B]
        for t in range(self.max_new):
            tok = _choose(logits, *self.rule, self.gen).masked_fill(done, self.pad)  # [B]
            yield tok, logits
            if self.eos is not None:
                done = done | torch.isin(tok, self.eos)
                if bool(done.all()):
                    return
            if t == self.max_new - 1:
                return
            logits = self._next(tok)

    def _start(self) -> torch.Tensor:
        """The logits ``[B, V]`` of the first new token."""
        model, src = self.model, self.src
        if not self.decoder:
            logits, self.state = _begin(model, src, self.bos_id)
            return logits
        if not self.use_cache:
            return model(src)[:, -1]
        capacity = min(src.shape[1] + self.max_new, model.config.max_len)  # every position it will hold
        self.state = model.start(src, capacity=capacity, engine=self.engine)
        return self.state.last_logits

    def _next(self, tok: torch.Tensor) -> torch.Tensor:
        """Feed ``tok [B]``: the logits ``[B, V]`` of the token after it. The cache policy: one step
        while a position is free, else re-read the last ``max_len`` tokens (the context slides)."""
        model = self.model
        if not self.decoder:
            logits, self.state = model.step(tok, self.state)
            return logits
        limit = model.config.max_len
        self.new.append(tok)
        if self.state is not None and self.state.length < limit:  # room in the cache: one position more
            logits, self.state = model.step(tok, self.state)
            return logits
        window = torch.cat([self.src, torch.stack(self.new, dim=1)], dim=1)[:, -limit:]  # [B, <= max_len]
        if self.use_cache and not isinstance(self.engine, str):  # bfloat16 etc.: re-read on the same engine
            self.state = model.start(window, engine=self.engine)
            return self.state.last_logits
        self.state = None
        return model(window)[:, -1]  # [B, V]


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


def fit_problem(model, prompt: int, max_new: int, slides: bool = True) -> str | None:
    """Why a prompt of ``prompt`` tokens plus ``max_new`` new ones cannot be decoded by ``model``,
    or None: the one fit check. A decoder-only model has ``max_len`` positions: the prompt must fit
    them, and a decoding that cannot slide (``slides=False``: beam search) must fit its new tokens
    too. A seq2seq model's target is checked by the model (its positions are the target's)."""
    if not getattr(model, "DECODER_ONLY", False):
        return None
    limit = model.config.max_len
    if prompt > limit:
        return f"the prompt has {prompt:,} tokens but the model has {limit:,} positions"
    if not slides and prompt + max_new > limit:
        return (
            f"prompt length {prompt:,} + max_new_tokens {max_new:,} exceeds max_len={limit:,} (the model's "
            f"positions) and beam search cannot slide its context: {room_hint(limit, prompt)}"
        )
    return None


def check_fits(model, prompt: int, max_new: int, slides: bool = True) -> None:
    """:func:`fit_problem` as a ``ValueError``."""
    problem = fit_problem(model, prompt, max_new, slides)
    if problem is not None:
        raise ValueError(problem)


def room_hint(limit: int, prompt: int) -> str:
    """What fits ``limit`` positions after a prompt of ``prompt`` tokens, said as a fix."""
    room = limit - prompt
    return f"ask for at most {room:,} new tokens" if room > 0 else f"the prompt alone fills all {limit}"
