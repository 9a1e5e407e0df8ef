"""Attention gathered from a model for showing: load -> tokenize -> run -> one :class:`AttentionView`
per stack of attention layers (weights ``A [L, h, T_q, T_k]`` with the query and key token texts).

:func:`attention_views` takes a sentence and any source :func:`attnlab.models.load` reads;
:func:`model_views` takes an attnlab model and ids already made. The explorer page
(:mod:`attnlab.viz.explorer`) draws these views, and :func:`attnlab.interp.scan.scan_text` scores
the heads of an encoder-decoder run from them; both reach them here, below viz.
"""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path

import numpy as np
import torch

from attnlab.devices import resolve_device
from attnlab.interp.badges import badges
from attnlab.interp.read import attention_maps, cross_stacks
from attnlab.models.load import load
from attnlab.tasks import BOS, EOS, SEP, get_task
from attnlab.tasks.tokenize import HFTokenizer, check_reads_something
from attnlab.training.evaluate import predict

KINDS = ("self", "causal", "cross")
EXPLANATIONS = {
    "self": "Encoder self-attention: each token (left) spreads one unit of attention over every token of "
    "the same sentence (right); a line's thickness is the weight, its colour the head.",
    "causal": "Decoder causal self-attention: each token (left) attends only to itself and earlier tokens "
    "(right); weights to later tokens are exactly zero.",
    "cross": "Encoder-decoder cross-attention: each target token (left) spreads one unit of attention over "
    "the source tokens (right).",
}
FLOAT32_LIMIT = 1 << 22  # above this many weights, embed float16 to keep the file small


@dataclasses.dataclass(frozen=True)
class AttentionView:
    """One kind of attention of one model: weights ``A [L, h, T_q, T_k]`` and the token texts.

    Args:
        name: shown in the page, e.g. ``"encoder self-attention"``.
        kind: ``"self"``, ``"causal"`` or ``"cross"`` (chooses the one-line explanation).
        query_tokens: ``T_q`` texts (rows / left column). key_tokens: ``T_k`` texts (columns / right).
        weights: ``[L, h, T_q, T_k]``; each row sums to one over the keys.
        layer_names: the ``L`` layers' names, their module paths (``"blocks.0"``, ...); default
            ``"layer 0"``, ``"layer 1"``, ... A head is written ``layer.head``, both counted from 0
            (``1.3``: head 3 of layer 1).
    """

    name: str
    kind: str
    query_tokens: tuple
    key_tokens: tuple
    weights: np.ndarray
    layer_names: tuple = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {list(KINDS)}, got {self.kind!r}")
        w = np.asarray(self.weights, dtype=np.float32)
        if w.ndim != 4:
            raise ValueError(f"weights must be [L, h, T_q, T_k], got shape {list(w.shape)}")
        if min(w.shape) == 0:
            raise ValueError(f"weights must not be empty, got shape {list(w.shape)}")
        q, k = tuple(str(t) for t in self.query_tokens), tuple(str(t) for t in self.key_tokens)
        if len(q) != w.shape[2]:
            raise ValueError(
                f"query_tokens has {len(q)} tokens but weights {list(w.shape)} has T_q={w.shape[2]}"
            )
        if len(k) != w.shape[3]:
            raise ValueError(
                f"key_tokens has {len(k)} tokens but weights {list(w.shape)} has T_k={w.shape[3]}"
            )
        if not np.all(np.isfinite(w)):
            raise ValueError(f"weights contains NaN or infinite values (shape {list(w.shape)})")
        names = tuple(str(n) for n in self.layer_names) or tuple(f"layer {i}" for i in range(w.shape[0]))
        if len(names) != w.shape[0]:
            raise ValueError(
                f"layer_names has {len(names)} names but weights {list(w.shape)} has L={w.shape[0]}"
            )
        object.__setattr__(self, "layer_names", names)
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "query_tokens", q)
        object.__setattr__(self, "key_tokens", k)

    def to_json(self) -> dict:
        """The view as the page reads it: weights as little-endian float32 (float16 if huge) base64."""
        dtype = "<f4" if self.weights.size <= FLOAT32_LIMIT else "<f2"
        raw = np.ascontiguousarray(self.weights, dtype=dtype).tobytes()
        layers, heads, t_q, t_k = self.weights.shape
        return {
            "name": self.name,
            "kind": self.kind,
            "explanation": EXPLANATIONS[self.kind],
            "queries": list(self.query_tokens),
            "keys": list(self.key_tokens),
            "layers": layers,
            "layerNames": list(self.layer_names),
            "heads": heads,
            "tq": t_q,
            "tk": t_k,
            "dtype": "float32" if dtype == "<f4" else "float16",
            "weights": base64.b64encode(raw).decode("ascii"),
            "badges": self.badges(),
        }

    def badges(self) -> list[list[str]]:
        """Per layer and head, its detector scores above 0.4 (``"prev 0.93"``, from
        :func:`attnlab.interp.scan.badges`); empty unless queries and keys are the same tokens."""
        layers, heads, t_q, t_k = self.weights.shape
        none = [[""] * heads for _ in range(layers)]
        if self.kind == "cross" or t_q != t_k or self.query_tokens != self.key_tokens:
            return none  # the patterns relate positions of one sequence
        try:
            return badges(self.weights, list(self.query_tokens))
        except ValueError:  # e.g. all-zero weights: no attention to score, so no badge
            return none


# --- gathering attention from models -------------------------------------------------------------

VIEW_NAMES = {
    "self": "encoder self-attention",
    "causal": "decoder causal self-attention",
    "cross": "encoder-decoder cross-attention",
}


def model_views(
    model,
    src_ids: list[int],
    src_tokens: list[str],
    tgt_ids: list[int] | None = None,
    tgt_tokens: list[str] | None = None,
) -> list[AttentionView]:
    """Attention of an attnlab model on one example: one view per stack of attention layers, read at
    the hook points (:func:`attnlab.interp.read.attention_maps`), each layer named by its module path.

    A model that reads one sequence (GPT, BERT) runs ``model(ids [1, S])``; a model with
    cross-attention (a Transformer, an attention RNN) is teacher-forced, ``model(src [1, S], tgt_in
    [1, T])``. A stack's kind is ``cross`` (target queries, source keys; an RNN's alignment ``[T, S]``
    is one layer with one head), ``causal`` (measured: no weight above the diagonal) or ``self``; a
    self-attention stack reads the target unless it sits in the ``encoder``.

    Args:
        model: an attnlab model with hook points (``attnlab.models.load(...).model`` or freshly built).
        src_ids: ``S`` ids (the source, or the one sequence); src_tokens: their ``S`` texts.
        tgt_ids: ``T`` decoder input ids (``[BOS] + y``); tgt_tokens: their texts.
    """
    if len(src_ids) != len(src_tokens):
        raise ValueError(f"src_ids has {len(src_ids)} ids but src_tokens has {len(src_tokens)} texts")
    two = bool(cross_stacks(model))  # a model without attention weights is refused here
    if two and (tgt_ids is None or tgt_tokens is None or len(tgt_ids) != len(tgt_tokens)):
        raise ValueError("a sequence-to-sequence model needs tgt_ids and tgt_tokens of equal length")
    model.eval()
    device = next(model.parameters()).device  # inputs go where the model is
    inputs = [torch.tensor([src_ids], dtype=torch.long, device=device)]  # [1, S]
    if two:
        inputs.append(torch.tensor([tgt_ids], dtype=torch.long, device=device))  # [1, T]
    views = []
    for m in attention_maps(model, *inputs):
        queries = tgt_tokens if two and (m.cross or not m.stack.startswith("encoder.")) else src_tokens
        kind = "cross" if m.cross else "causal" if m.causal else "self"
        weights = np.asarray(m.weights[:, 0].float().cpu())  # [L, h, T_q, T_k]
        keys = src_tokens if m.cross else queries
        views.append(AttentionView(VIEW_NAMES[kind], kind, queries, keys, weights, layer_names=m.layers))
    return views


def _task_views(sentence: str, loaded) -> tuple[list[AttentionView], str]:
    """A run trained on a task: its own greedy output is the target teacher-forced back in
    (``src = x + [EOS]``, ``tgt_in = [BOS] + y``; a model without cross-attention reads
    ``[BOS] + x + [SEP] + y``)."""
    model, tok, spec = loaded.model, loaded.tokenizer, loaded.task
    task = get_task(spec["name"], **spec.get("params", {}))
    tok.check_text(sentence, task.name)  # as translate does: never a silent <unk>
    two = bool(cross_stacks(model))  # before decoding: a model without attention weights is refused
    pred = predict(model, task, [sentence])[0]
    if two:
        src, tgt = tok.encode(sentence) + [EOS], [BOS] + tok.encode(pred)
        views = model_views(model, src, tok.tokens(src), tgt, tok.tokens(tgt))
    else:
        ids = [BOS] + tok.encode(sentence) + [SEP] + tok.encode(pred)
        views = model_views(model, ids, tok.tokens(ids))
    return views, f"{loaded.label}; output {pred!r}"


def _text_views(sentence: str, loaded) -> tuple[list[AttentionView], str]:
    """A model that reads text (MiniLM, a Hugging Face checkpoint, a text run, a saved model with its
    ``tokenizer.json``): the sentence's tokens, each shown as the text it decodes to."""
    tok = loaded.tokenizer
    if tok is None:
        raise ValueError(f"{loaded.source} has no tokenizer.json beside it: cannot tokenize the sentence")
    if isinstance(tok, HFTokenizer):
        # a sentence-embedding tokenizer truncates (MiniLM: 256); the explorer shows every token up
        # to the model's position limit and refuses longer input instead of cutting it
        tok.backend.no_truncation()
    check_reads_something(tok, sentence, "the sentence")
    ids = tok.encode(sentence)  # characters it maps to <unk> are named in one warning
    max_len = getattr(getattr(loaded.model, "config", None), "max_len", None)
    if max_len is not None and len(ids) > max_len:
        raise ValueError(
            f"sentence has {len(ids)} tokens but {loaded.source} has {max_len} positions; shorten it"
        )
    views = model_views(loaded.model, ids, tok.tokens(ids))
    return views, loaded.label + _details(loaded.model, views)


def _details(model, views: list[AttentionView]) -> str:
    """``" (2 key/value heads, window 8), causal"`` for a causal model with those fields; else ``""``."""
    if not any(v.kind == "causal" for v in views):
        return ""
    c = model.config
    kv = getattr(c, "num_kv_heads", None) or getattr(c, "num_heads", None)
    window = f", window {c.window}" if getattr(c, "window", None) else ""
    return f" ({kv} key/value heads{window}), causal" if kv else ", causal"


def attention_views(
    sentence: str, model: str | Path = "minilm", device: str = "cpu"
) -> tuple[list[AttentionView], str]:
    """Run ``sentence`` through ``model`` on ``device`` (``"cpu"``, ``"cuda"``, or ``"auto"``: CUDA
    when present): any source :func:`attnlab.models.load` reads (``"minilm"``, a Hugging Face
    checkpoint folder, a folder written by ``attnlab train``, a saved model with its
    ``tokenizer.json``).

    Returns:
        ``(views, model_label)``.
    """
    if not isinstance(sentence, str) or not sentence.strip():
        raise ValueError("sentence must be a non-empty string")

    loaded = load(model, device=resolve_device(device))
    if loaded.task is not None:
        return _task_views(sentence, loaded)
    return _text_views(sentence, loaded)
