"""Score every head of a model: any model :func:`attnlab.models.load` reads (MiniLM, a Hugging Face
GPT-2, Llama, Mistral or Qwen2 folder, a run or model written by attnlab), on a ``[BOS, r, r]``
probe or on a text. A decoder's weights are read through the hook points
(``blocks.*.self_attn.weights``, :func:`attnlab.nn.capture`); an encoder-decoder run's views
through :func:`attnlab.interp.attention_views.attention_views`.

The patterns depend on token *equality* only, so a text's tokens are scored through their ids (a
decoder) or their strings (the explorer's views: two positions match when their token texts are
equal). Which scores mean what:

- causal self-attention (GPT, a decoder): every detector applies;
- bidirectional self-attention (MiniLM, an encoder): ``previous``, ``current`` and ``first``
  ([CLS]) apply as they are; ``duplicate`` and ``induction`` count earlier copies only, while the
  head may as well attend to later ones — a bidirectional head's score there is a lower bound.

The repeat probe needs no tokenizer (its tokens are random ids, shown as numbers when the model
has none); a text needs the model's tokenizer (a task alphabet, a text run's or a Hugging Face
``tokenizer.json``).
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Callable

import torch

from attnlab.interp.ablation import refuse_pruned
from attnlab.interp.attention_views import attention_views
from attnlab.interp.badges import SHORT, badges, ids_of  # noqa: F401  (SHORT, badges: read from here too)
from attnlab.interp.detectors import DETECTORS, heads_above, score_heads
from attnlab.interp.sequences import repeated_tokens
from attnlab.models.capabilities import attention_view, is_encoder, layer_point, token_texts
from attnlab.models.load import Loaded, load
from attnlab.nn.hooks import capture
from attnlab.tasks import BOS
from attnlab.tasks.tokenize import check_reads_something

FIRST_WORDPIECE = 1000  # MiniLM's first probe id (_probe_ids): below are [PAD], [unused*], [CLS], ..., '!'
PLACEHOLDER = re.compile(r"\[[^\[\]\s]+\]|<[^<>\s]+>")  # [unused0], [PAD], <unk>: no text's word piece
# the way out each refusal names, in words for Python and the command line alike (`attnlab heads`
# adds its flags to them)
ON_TEXT = "score its heads on a text instead"
ON_REPEAT = "score its heads on the repeat probe instead, which needs no tokenizer"
APPLIES = {
    "causal": "all five scores apply (causal self-attention)",
    "self": "bidirectional: previous, current and first ([CLS]) apply; duplicate and induction count "
    "earlier copies only (a lower bound)",
}


@dataclasses.dataclass
class HeadScan:
    """Scores ``name -> [L, h]`` (lists) of one attention kind of one model on ``tokens``."""

    model: str
    view: str
    kind: str
    tokens: list[str]
    scores: dict[str, list[list[float]]]
    exclude_first: bool
    exclude_current: bool
    convention: str = "attnlab"

    @property
    def applies(self) -> str:
        """Which scores apply to this kind of attention."""
        return APPLIES[self.kind]

    def above(self, threshold: float) -> dict[str, list[tuple[int, int, float]]]:
        """Per detector, the heads scoring above ``threshold``: ``(layer, head, score)``, best first."""
        return {n: heads_above(torch.tensor(s), threshold) for n, s in self.scores.items()}

    def to_json(self, threshold: float) -> dict:
        """Everything, plus the heads above ``threshold``."""
        data = dataclasses.asdict(self)
        data["applies"] = self.applies
        data["threshold"] = threshold
        data["above"] = {n: [list(x) for x in found] for n, found in self.above(threshold).items()}
        return data


def _ids_of(tokens: list[str]) -> torch.Tensor:
    """Token texts -> ids ``[1, T]`` equal exactly where the texts are equal."""
    index: dict[str, int] = {}
    return torch.tensor([[index.setdefault(t, len(index)) for t in tokens]])


def _scan(label, view, kind, weights, ids, tokens, exclude_first, exclude_current, convention) -> HeadScan:
    excl = {"exclude_first": exclude_first, "exclude_current": exclude_current, "convention": convention}
    names = [n for n in DETECTORS if not (n == "first" and exclude_first)]  # first with exclude_first: 0/0
    scores = score_heads(weights, ids, names, **excl)
    return HeadScan(
        label,
        view,
        kind,
        tokens,
        {n: [[round(float(v), 4) for v in row] for row in s] for n, s in scores.items()},
        exclude_first,
        exclude_current,
        convention,
    )


def _weights(model, ids: torch.Tensor) -> list[torch.Tensor]:
    """Every layer's self-attention weights ``[B, h, T, T]`` of ``model`` on ``ids [B, T]``, read at
    the hook points of the stack the model declares (:func:`attnlab.models.capabilities.layer_point`)."""
    with torch.no_grad(), capture(model, [layer_point(model, "weights", "*")]) as cache:
        model(ids)
    return list(cache.values())  # in layer order


def _loaded(model):
    return model if isinstance(model, Loaded) else load(model)


def scan_text(
    text: str,
    model="minilm",
    *,
    exclude_first: bool = False,
    exclude_current: bool = False,
    convention: str = "attnlab",
    warn: Callable[[str], None] | None = None,
) -> list[HeadScan]:
    """Every self-attention view of ``model`` (a source for :func:`attnlab.models.load`, or what it
    returned) on ``text``: a decoder's or BERT's through its tokenizer and hook points, the rest
    through :func:`attnlab.interp.attention_views.attention_views`. A text longer than the model's
    positions is read up to them, and ``warn`` (default: :func:`warnings.warn`) gets one line saying
    so."""
    excl = (exclude_first, exclude_current, convention)
    loaded = _loaded(model)
    refuse_pruned(loaded.model, "scan_text")
    if attention_view(loaded.model) is None:  # no self-attention stack: the explorer's views
        return _scan_views(text, loaded.source, *excl)
    tok = loaded.tokenizer
    if tok is None:
        raise ValueError(
            f"{loaded.source} has no tokenizer (no tokenizer.json), so it cannot read a text: {ON_REPEAT}"
        )
    limit = loaded.model.config.max_len
    check_reads_something(tok, text)
    row, total = _text_ids(tok, text, limit)
    if not row:
        raise ValueError(f"the text is 0 tokens; the model reads 1 to {limit}")
    if total > len(row):
        line = f"the text has {total} tokens; {loaded.source} reads only the first {len(row)} (its positions)"
        (warn or (lambda m: warnings.warn(m, stacklevel=3)))(line)
    ids = torch.tensor([row])  # [1, T], T <= limit
    view, kind = attention_view(loaded.model)
    return [_scan(loaded.label, view, kind, _weights(loaded.model, ids), ids, _tokens(loaded, ids), *excl)]


def _text_ids(tok, text: str, limit: int) -> tuple[list[int], int]:
    """``(ids, total)``: ``text``'s first ``limit`` ids and how many the whole text has. A
    ``tokenizer.json`` cuts with its own truncation (which keeps the special tokens: BERT's closing
    [SEP]), whatever truncation it had (MiniLM's: 256) put back after; characters it cannot represent
    are warned about in the part read only."""
    backend = getattr(tok, "backend", None)
    if backend is None:  # a task alphabet: no special tokens to keep
        ids = tok.encode(text)
        return ids[:limit], len(ids)
    saved = backend.truncation
    try:
        backend.no_truncation()
        total = len(backend.encode(text, add_special_tokens=tok.add_special_tokens))  # no <unk> check
        backend.enable_truncation(max_length=limit)
        ids = tok.encode(text)
    finally:
        if saved is None:
            backend.no_truncation()
        else:
            backend.enable_truncation(**saved)
    return ids, total


def _tokens(loaded, ids: torch.Tensor) -> list[str]:
    """Display text of ``ids [B, T]``'s first row: BERT's word pieces as they are (``##ing``), other
    tokenizers' decoded ids, the ids themselves without a tokenizer."""
    return token_texts(loaded.model, loaded.tokenizer, ids[0].tolist())


def _scan_views(text: str, source, exclude_first, exclude_current, convention) -> list[HeadScan]:
    views, label = attention_views(text, source)
    out = []
    for v in views:
        if v.kind == "cross":
            continue  # queries and keys are different sequences: no token pattern relates them
        weights = [torch.from_numpy(w)[None] for w in v.weights]  # L x [1, h, T, T]
        tokens = list(v.query_tokens)
        ids = _ids_of(tokens)  # [1, T]
        out.append(
            _scan(label, v.name, v.kind, weights, ids, tokens, exclude_first, exclude_current, convention)
        )
    return out


def probe_bos(loaded) -> int:
    """The probe's first token: the task's BOS, a text run's line break, the tokenizer's leading
    special token (what it puts before any text), its end-of-text/padding token, else id 0."""
    if loaded.task is not None:
        return BOS
    tok = loaded.tokenizer
    if loaded.text is not None and tok is not None and tok.encode("\n"):
        return tok.encode("\n")[0]  # text has no BOS: a speech starts after a line break
    if tok is None:
        return 0
    lead = tok.encode("")
    return lead[0] if lead else tok.pad_id


def scan_repeat(
    model="minilm",
    *,
    length: int | None = None,
    batch: int = 8,
    seed: int = 0,
    exclude_first: bool = False,
    exclude_current: bool = False,
    convention: str = "attnlab",
) -> list[HeadScan]:
    """Scores on ``batch`` probes ``[BOS, r_1..r_L, r_1..r_L]`` of distinct random tokens.

    A BERT (MiniLM): BOS = [CLS], r from the ordinary word pieces (:func:`_probe_ids`). A decoder (any
    :func:`attnlab.models.load` source): BOS from :func:`probe_bos`, r from the whole vocabulary.
    ``L`` default ``min(20, (max_len - 1) // 2)`` (fewer where the vocabulary has fewer ids to draw
    from); ``1 + 2 L`` must fit the model's context.
    """
    loaded = _loaded(model)
    net = loaded.model
    if attention_view(net) is None:
        raise ValueError(
            f"the repeat probe needs a decoder (one causal sequence) or a BERT such as MiniLM; "
            f"{loaded.source} holds a model of kind {loaded.kind!r}: {ON_TEXT}"
        )
    refuse_pruned(net, "scan_repeat")
    vocab, max_len = net.config.vocab_size, net.config.max_len
    if is_encoder(net):
        bos, table = _probe_ids(loaded, vocab)
        drawable = max(len(table) - 1, 0)  # table[1:]
        length = min(20, (max_len - 1) // 2, max(drawable, 1)) if length is None else length
        _fits(length, max_len)
        if length > drawable:
            raise ValueError(
                f"a repeat probe of length {length} needs {length} distinct ordinary tokens; the "
                f"vocabulary of {vocab} ids of {loaded.source} has {drawable} to draw from"
            )
        raw = repeated_tokens(batch, length, len(table), seed=seed)  # [B, 1 + 2L] in 0..len(table)-1
        ids = torch.where(raw == 0, torch.full_like(raw, bos), torch.tensor(table)[raw])  # [B, 1 + 2L]
    else:
        length = min(20, (max_len - 1) // 2, vocab - 1) if length is None else length
        _fits(length, max_len)
        ids = repeated_tokens(batch, length, vocab, bos=probe_bos(loaded), seed=seed)  # [B, 1 + 2L]
    view, kind = attention_view(net)
    excl = (exclude_first, exclude_current, convention)
    return [_scan(loaded.label, view, kind, _weights(net, ids), ids, _tokens(loaded, ids), *excl)]


def _probe_ids(loaded, vocab: int) -> tuple[int, list[int]]:
    """``(bos, table)`` of a BERT's repeat probe: BOS = [CLS] (else :func:`probe_bos`), and the
    ordinary ids in increasing order: below ``vocab`` and the tokenizer's vocabulary, neither a special
    token it declares nor a bracketed placeholder (``[unused0]``, ``<unk>``). The probe draws from
    ``table[1:]`` (index 0 is BOS's slot in :func:`repeated_tokens`): MiniLM's ids from
    :data:`FIRST_WORDPIECE` up, as it always drew. Without a tokenizer: BOS 0, every other id."""
    tok = loaded.tokenizer
    backend = getattr(tok, "backend", None)
    if backend is None:
        return probe_bos(loaded), list(range(vocab))
    cls = backend.token_to_id("[CLS]")
    bos = probe_bos(loaded) if cls is None else cls
    special = {i for i, added in backend.get_added_tokens_decoder().items() if added.special}
    pieces = backend.get_vocab(with_added_tokens=True)
    table = sorted(
        i
        for piece, i in pieces.items()
        if i < vocab and i != bos and i not in special and not PLACEHOLDER.fullmatch(piece)
    )
    return bos, table


def _fits(length: int, max_len: int) -> None:
    if isinstance(length, bool) or not isinstance(length, int) or length <= 0:
        raise ValueError(f"length must be a positive integer, got {length!r}")
    if 1 + 2 * length > max_len:
        raise ValueError(
            f"a repeat probe of length {length} needs 1 + 2*{length} = {1 + 2 * length} positions, "
            f"more than the model's context of {max_len}"
        )
