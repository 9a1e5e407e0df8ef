"""Score every head of a model: MiniLM or a folder written by ``attnlab train`` (a GPT, or the
encoder / decoder self-attention of a Transformer), on a ``[BOS, r, r]`` probe or on a text.

The patterns depend on token *equality* only, so a text's tokens are scored through their strings
(two positions match when their token texts are equal). Which scores mean what:

- causal self-attention (GPT, a decoder): every detector applies;
- bidirectional self-attention (MiniLM, an encoder): ``previous``, ``current`` and ``first``
  ([CLS]) apply as they are; ``duplicate`` and ``induction`` count earlier copies only, while the
  head may as well attend to later ones — a bidirectional head's score there is a lower bound.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from attnlab.interp.badges import SHORT, badges, ids_of  # noqa: F401  (SHORT, badges: read from here too)
from attnlab.interp.detectors import DETECTORS, heads_above, score_heads
from attnlab.interp.sequences import repeated_tokens

FIRST_WORDPIECE = 1000  # MiniLM's vocabulary: ids below are [PAD], [unused*], [CLS], [SEP], [MASK], ...
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


def _scan(label, view, kind, weights, ids, tokens, exclude_first, exclude_current) -> HeadScan:
    excl = {"exclude_first": exclude_first, "exclude_current": exclude_current}
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
    )


def scan_text(
    text: str, model: str | Path = "minilm", *, exclude_first: bool = False, exclude_current: bool = False
) -> list[HeadScan]:
    """Every self-attention view of ``model`` on ``text`` (:func:`attnlab.viz.attention_views`)."""
    from attnlab.viz.explorer import attention_views

    views, label = attention_views(text, model)
    out = []
    for v in views:
        if v.kind == "cross":
            continue  # queries and keys are different sequences: no token pattern relates them
        weights = [torch.from_numpy(w)[None] for w in v.weights]  # L x [1, h, T, T]
        tokens = list(v.query_tokens)
        ids = ids_of(tokens)  # [1, T]
        out.append(_scan(label, v.name, v.kind, weights, ids, tokens, exclude_first, exclude_current))
    return out


def scan_repeat(
    model: str | Path = "minilm",
    *,
    length: int | None = None,
    batch: int = 8,
    seed: int = 0,
    exclude_first: bool = False,
    exclude_current: bool = False,
) -> list[HeadScan]:
    """Scores on ``batch`` probes ``[BOS, r_1..r_L, r_1..r_L]`` of distinct random tokens.

    MiniLM: BOS = [CLS], r from the ordinary word pieces, ``L`` default 20. A GPT folder: BOS = the
    task's BOS id, r from the whole vocabulary, ``L`` default ``min(20, (max_len - 1) // 2)``;
    ``1 + 2 L`` must fit the model's context.
    """
    if str(model) == "minilm":
        from attnlab.models.pretrained import load_pretrained

        net, tokenizer = load_pretrained("minilm")
        cls = tokenizer.token_to_id("[CLS]")
        length = 20 if length is None else length
        _fits(length, net.config.max_len)
        ids = repeated_tokens(batch, length, net.config.vocab_size - FIRST_WORDPIECE + 1, seed=seed)
        ids = torch.where(ids == 0, torch.full_like(ids, cls), ids + FIRST_WORDPIECE - 1)  # [B, 1 + 2L]
        with torch.no_grad():
            weights = net(ids, output_attentions=True)["attentions"]  # L x [B, h, T, T]
        tokens = [tokenizer.id_to_token(i) for i in ids[0].tolist()]
        label = f"MiniLM (all-MiniLM-L6-v2), {len(weights)} layers x {weights[0].shape[1]} heads"
        view = "encoder self-attention"
        return [_scan(label, view, "self", weights, ids, tokens, exclude_first, exclude_current)]
    from attnlab.tasks import BOS, get_task
    from attnlab.training.checkpoint import load_trained

    directory = Path(model)
    if not directory.is_dir():
        raise ValueError(
            f"model must be 'minilm' or a folder written by attnlab train; {directory} is not one"
        )
    net, state = load_trained(directory)
    if net.kind != "gpt":
        raise ValueError(
            f"--tokens repeat needs a GPT (one causal sequence); {directory} holds a {net.kind!r}"
        )
    vocab, max_len = net.config.vocab_size, net.config.max_len
    length = min(20, (max_len - 1) // 2) if length is None else length
    _fits(length, max_len)
    ids = repeated_tokens(batch, length, vocab, bos=BOS, seed=seed)  # [B, 1 + 2L]
    net.eval()
    with torch.no_grad():
        _, weights = net(ids, return_attention=True)  # L x [B, h, T, T]
    spec = state.get("task") or {}
    tok = get_task(spec["name"], **spec.get("params", {})).tokenizer if "name" in spec else None
    tokens = [tok.token(i) if tok is not None else str(i) for i in ids[0].tolist()]
    label = f"gpt ({directory.name}), {len(weights)} layers x {weights[0].shape[1]} heads"
    view = "decoder causal self-attention"
    return [_scan(label, view, "causal", weights, ids, tokens, exclude_first, exclude_current)]


def _fits(length: int, max_len: int) -> None:
    if isinstance(length, bool) or not isinstance(length, int) or length <= 0:
        raise ValueError(f"length must be a positive integer, got {length!r}")
    if 1 + 2 * length > max_len:
        raise ValueError(
            f"--tokens repeat of length {length} needs 1 + 2*{length} = {1 + 2 * length} positions, "
            f"more than the model's context of {max_len}"
        )
