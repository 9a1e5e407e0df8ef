"""What each view of ``attnlab serve`` shows: pure functions, a loaded model
(:class:`attnlab.models.load.Loaded`) and text in, a JSON-able dict out.

Everything here is the library called on the user's text; nothing is computed that the library
does not compute, so a test can compare each view with the library directly:

===========  ========================================================================  ============
view         library call                                                              models
===========  ========================================================================  ============
tokens       ``tokenizer.encode`` / ``offsets`` / ``unknown``                          all
attention    ``attnlab.nn.hooks.capture`` of every layer's ``self_attn.weights``       all
             ``[1, h, T, T]``, scored by ``attnlab.interp.detectors.score_heads``
next         ``softmax(model(ids))`` per position, the loss ``-mean log p(x_{t+1})``    GPT
lens         ``attnlab.interp.lens.logit_lens`` (layer x position, top tokens)         GPT
generate     ``attnlab.decoding.generate_text``: greedy, beam search, sampling         GPT
ablate       ``attnlab.nn.hooks.patch``: head h's ``z_h := 0`` (= zeroing W^O_h)       all
similarity   ``attnlab.interp.similarity.explain_similarity``                          mean-pooled BERT
audit        ``attnlab.audit.audit_params`` and ``audit_shapes`` (one block)           all
math         ``attnlab.interp.equation.query_math``: one query of one head, each step   all
             of the equation with the forward's numbers, and the what-ifs
===========  ========================================================================  ============

A head is written ``layer.head``, both counted from 0. Inputs are bounded (:data:`MAX_CHARS`
characters, :data:`MAX_TOKENS` tokens, :data:`MAX_NEW` generated tokens, beams up to
:data:`MAX_BEAM`); bad input is one ``ValueError`` naming the field. Weights travel as float32
bytes in base64 (``[L, h, T, T]``, row-major), so the page draws exactly the numbers computed.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F

from attnlab import concepts
from attnlab._checks import did_you_mean
from attnlab.audit import Workload, audit_params, audit_shapes, model_spec
from attnlab.concepts.markdown import mathml
from attnlab.decoding import GenerationRequest, fit_problem, generate_text
from attnlab.interp.badges import BADGE_THRESHOLD
from attnlab.interp.detectors import DETECTORS, heads_above, score_heads
from attnlab.interp.equation import query_math
from attnlab.interp.lens import eventual_token_by_layer, logit_lens, residual_stream
from attnlab.interp.scan import APPLIES
from attnlab.interp.similarity import explain_similarity
from attnlab.models.capabilities import attention_view, is_decoder, layer_point
from attnlab.models.load import Loaded
from attnlab.nn.hooks import capture, patch

MAX_CHARS = 2000  # characters of one text
MAX_TOKENS = 128  # tokens of one text (and never more than the model's context)
MAX_NEW = 48  # tokens one generation may add
MAX_BEAM = 8
TOP_K = 5  # tokens shown per next-token distribution
LENS_K = 3  # tokens shown per logit-lens cell
LENS_FLOATS = 2**25  # (L + 1) x positions x V logits the lens may hold at once (128 MiB of float32)
THRESHOLD = BADGE_THRESHOLD  # a detector score above this names the head (the explorer's 0.4)


def points(model) -> dict[str, str]:
    """The hook points the views read or change, as ``str.format`` patterns of ``layer``, in the
    stack ``model`` declares (:func:`attnlab.models.capabilities.layer_point`): attention weights
    ``[B, h, T, T]``, head outputs z ``[B, T, h, d_k]``, the residual stream after a block
    ``[B, T, d_model]``."""
    return {point: layer_point(model, point) for point in ("weights", "z", "resid_post")}


# What each view shows, in the notes' terms, and the concept pages it draws on.
EXPLAIN = {
    "tokens": "The text as the model reads it: one box per token, X = [T] ids embedded to [T, d_model]. "
    "Text the tokenizer cannot represent is flagged: it became <unk> (a whole word, for WordPiece) or "
    "was dropped.",
    "attention": "Each row of A = softmax(QK^T / sqrt(d_k) + M) is one query's weights over the keys and "
    "sums to 1. Click a token to draw its row as lines; the heatmap is A [T_q, T_k] of one layer and head "
    "(or their mean). In a decoder the causal mask M gives every later key -inf, so those cells are 0 "
    "(hatched). A weight is a learned soft alignment, not an explanation of a decision.",
    "heads": "Every head has its own W^Q, W^K, W^V. A detector scores the share of a head's attention "
    "that falls where a fixed pattern P says, sum(A * P) / sum(A): the previous token, an earlier copy "
    "of the token (duplicate), the token after an earlier copy (induction), the first token, itself. "
    "Heads above the threshold are named layer.head; distinct specialisations are not guaranteed.",
    "next": "p(x_{t+1} | x_1..x_t) = softmax(LN_f(h_L) W_U) at every position t: the model's guess of the "
    "token that comes next. The loss is -mean log p of the tokens that do come next in your text.",
    "lens": "The logit lens reads the residual stream h_l after each block as if it were the last, "
    "softmax(LN_f(h_l) W_U). The bottom row is the model's own output; earlier rows show at which layer "
    "the final prediction appears.",
    "generate": "One model, three decoders: greedy takes the argmax at each step; beam search keeps the "
    "k partial sequences with the highest summed log-probability; sampling draws from softmax(logits / T) "
    "(top-k optional, seeded so it repeats).",
    "ablate": "A layer's output is sum_h z_h W^O_h + b^O, so switching head h off (z_h = 0) is zeroing its "
    "rows of W^O. Pick heads: the change in the next-token distribution and the loss (language models) "
    "or in the sentence vector (encoders) is what the rest of the model does without them.",
    "similarity": "With mean pooling the cosine of two sentence vectors splits exactly into token pairs: "
    "cos(mean a, mean b) = sum_ij a_i . b_j / (n m |mean a| |mean b|). Each term is what one pair adds; "
    "a term can be negative.",
    # {layer}: the loaded model's layer, "decoder layer" or "encoder layer" (layer_name; the page fills it)
    "audit": "Parameters by group, counted from the configuration (L times the count of one {layer}, "
    "plus what sits outside the layers: embeddings, final norm, head; the notes count 4d^2 + 2df + f + 9d "
    "for one post-norm encoder layer in PyTorch's convention) and checked against the loaded tensors; "
    "then the shape on every arrow of the first block for this text (B = 1).",
    "math": "One query of one head, step by step: click a token in the attention view and every equation "
    "of that head at that position is shown with the numbers of the model's own forward (read through the "
    "hook points), recomputed by the library: softmax(K q / sqrt(d_k) + M) gives the attention view's row, "
    "and a V gives the head's output z.",
}
CONCEPTS = {
    "tokens": ("04-self-attention-qkv.md",),
    "attention": ("05-scaled-dot-product.md", "06-masks.md"),
    "heads": ("07-multi-head-attention.md",),
    "next": ("15-decoding.md",),
    "lens": ("10-residuals-and-norms.md",),
    "generate": ("15-decoding.md", "14-kv-cache.md"),
    "ablate": ("07-multi-head-attention.md",),
    "similarity": ("04-self-attention-qkv.md",),
    "audit": ("12-parameter-counting.md", "13-cost-and-flashattention.md"),
    "math": ("05-scaled-dot-product.md",),
}
# The math view's steps: (id, title, LaTeX, concept pages); the page draws each formula as MathML.
STEPS = (
    ("qkv", "Query, keys, values", r"q = x_i W^Q_h,\quad K = X W^K_g,\quad V = X W^V_g",
     ("04-self-attention-qkv.md", "08-gqa-mqa.md")),
    ("rope", "Rotation by position (RoPE)", r"q' = R_{\Theta, i}\, q,\quad k'_j = R_{\Theta, j}\, k_j",
     ("11-positions.md",)),
    ("scores", "Scores and the scale", r"s = K q,\quad e_j = \frac{s_j}{\sqrt{d_k}} + b_j",
     ("05-scaled-dot-product.md",)),
    ("weights", "Mask and softmax",
     r"a = \operatorname{softmax}(e + M),\quad M_j = -\infty \text{ where key } j \text{ is masked}",
     ("06-masks.md", "05-scaled-dot-product.md")),
    ("z", "The head's output", r"z_h = a V = \sum_j a_j v_j", ("05-scaled-dot-product.md",)),
    ("concat", "Heads together, then W^O", r"o = \operatorname{Concat}(z_0, \dots, z_{h-1})\, W^O",
     ("07-multi-head-attention.md",)),
    ("residual_pre", "Residual and norm (pre-norm)", r"u = x + o,\quad y = u + \operatorname{FFN}(N_2(u))",
     ("10-residuals-and-norms.md", "09-feed-forward.md")),
    ("residual_post", "Residual and norm (post-norm)",
     r"u = N_1(x + o),\quad y = N_2(u + \operatorname{FFN}(u))",
     ("10-residuals-and-norms.md", "09-feed-forward.md")),
    ("unscaled", "Without the scale", r"\operatorname{Var}(q \cdot k) = d_k \;\Rightarrow\; "
     r"\operatorname{Var}\left(\frac{q \cdot k}{\sqrt{d_k}}\right) = 1", ("05-scaled-dot-product.md",)),
    ("unmasked", "Without the causal mask", r"a = \operatorname{softmax}(e)\ \text{over every key}",
     ("06-masks.md",)),
    ("next", "Next token, with a temperature", r"p(x_{i+1}) = \operatorname{softmax}(\ell_i / \tau)",
     ("15-decoding.md",)),
)  # fmt: skip


@functools.cache
def steps() -> list[dict]:
    """The math view's steps with their formulas as MathML (``concepts.markdown.mathml``, as the concept
    pages draw them) and their concept pages: ``[{"id", "title", "mathml", "concepts"}]``."""
    return [
        {
            "id": key,
            "title": title,
            "mathml": mathml(latex, True),
            "concepts": [{"href": concepts.href(md), "title": concepts.page_title(md)} for md in pages],
        }
        for key, title, latex, pages in STEPS
    ]


def guide() -> dict[str, dict]:
    """Per view: its text and its concept pages ``[{"href", "title"}]`` (served under ``/concepts/``)."""
    return {
        view: {
            "text": text,
            "concepts": [
                {"href": concepts.href(md), "title": concepts.page_title(md)} for md in CONCEPTS[view]
            ],
        }
        for view, text in EXPLAIN.items()
    } | {"math": {"text": EXPLAIN["math"], "concepts": [], "steps": steps()}}


# ------------------------------------------------------------------------------------------ models
def check_servable(loaded: Loaded) -> None:
    """A ``ValueError`` unless ``loaded`` has one self-attention stack, causal or not (a decoder-only
    language model or an encoder: :func:`attnlab.models.capabilities.attention_view`) and a tokenizer
    (what the views read)."""
    if attention_view(loaded.model) is None:
        raise ValueError(
            f"{loaded.source} holds a {loaded.kind!r} model; serve shows decoder-only (gpt) and encoder "
            "(bert) models (attnlab explore draws the others)"
        )
    if loaded.tokenizer is None:
        raise ValueError(f"{loaded.source} has no tokenizer.json beside it: serve cannot read text for it")


def is_lm(loaded: Loaded) -> bool:
    """Whether ``loaded`` is a causal language model (logits ``[B, T, V]``: ``DECODER_ONLY``)."""
    return is_decoder(loaded.model)


def layer_name(loaded: Loaded) -> str:
    """``"decoder layer"`` or ``"encoder layer"``: what one layer of ``loaded`` is, as the model declares
    it (``DECODER_ONLY``), for the audit view's text."""
    return "decoder layer" if is_decoder(loaded.model) else "encoder layer"


def max_tokens(loaded: Loaded) -> int:
    """The most tokens one text may have for ``loaded``: :data:`MAX_TOKENS` or its context."""
    return min(MAX_TOKENS, int(loaded.model.config.max_len))


def describe(loaded: Loaded, index: int, name: str) -> dict:
    """What the page needs to know of a loaded model (no path: the client picks by index or name)."""
    c = loaded.model.config
    views = ["tokens", "attention", "heads", "math", "ablate", "audit"]
    views += ["next", "lens", "generate"] if is_lm(loaded) else []
    views += ["similarity"] if getattr(c, "pooling", None) == "mean" else []
    return {
        "index": index,
        "name": name,
        "label": loaded.label,
        "kind": loaded.kind,
        "causal": is_lm(loaded),
        "layer": layer_name(loaded),
        "layers": int(c.num_layers),
        "heads": int(c.num_heads),
        "max_tokens": max_tokens(loaded),
        "max_new": MAX_NEW,
        "max_beam": MAX_BEAM,
        "views": views,
    }


def shown(value) -> str:
    """``value`` as the JSON it came in (``true``, ``null``, ``"x"``), for an error message: the client
    wrote JSON, not Python (``True``, ``None``)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


# ------------------------------------------------------------------------------------------ text
def text_field(value, field: str = "text") -> str:
    """``value`` if it is a non-empty string of at most :data:`MAX_CHARS` characters."""
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{field} is empty: type some text")
    if len(value) > MAX_CHARS:
        raise ValueError(f"{field} has {len(value):,} characters; the server takes at most {MAX_CHARS:,}")
    lone = next((c for c in value if "\ud800" <= c <= "\udfff"), None)  # JSON's "\ud800": no character
    if lone is not None:
        raise ValueError(f"{field} holds a lone surrogate (U+{ord(lone):04X}), which is not a character")
    return value


def _cut(loaded: Loaded, text: str, limit: int) -> int:
    """The length of the longest start of ``text`` that ends at a token's end and encodes to at most
    ``limit`` tokens (special tokens counted), tried from the ``limit``-th token's end down; 0 if none."""
    ends = sorted({end for _, end in loaded.tokenizer.offsets(text)[:limit] if end > 0}, reverse=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for end in ends[:8]:
            if len(loaded.tokenizer.encode(text[:end], strict=False)) <= limit:
                return end
    return 0


def encode(loaded: Loaded, text: str, field: str = "text") -> list[int]:
    """The ids of ``text`` (unknown characters become ``<unk>`` or are dropped, as the tokenizer does;
    :func:`tokens` flags them), at most :func:`max_tokens` of them."""
    text = text_field(text, field)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unknown characters are shown on the page instead
        ids = loaded.tokenizer.encode(text, strict=False)
    if not ids:
        raise ValueError(f"{field} has no token this tokenizer knows: every character was dropped")
    limit = max_tokens(loaded)
    if len(ids) > limit:
        cut = _cut(loaded, text, limit)
        raise ValueError(
            f"{field} has more than {limit} tokens ({len(ids)} counted); the server takes at most {limit} "
            f"for this model (its first {cut} characters fit)"
        )
    return ids


def tokens(loaded: Loaded, text: str, ids: list[int]) -> dict:
    """Each id with its display text, its characters ``[start, end)`` of ``text`` and whether it stands
    for characters the tokenizer cannot represent; ``unknown``: every such character."""
    tok = loaded.tokenizer
    unknown = tok.unknown(text)
    bad = set(unknown)
    offsets = tok.offsets(text)
    rows = []
    for i, (t, (start, end)) in enumerate(zip(ids, offsets)):
        flagged = (tok.unk_id is not None and t == tok.unk_id) or any(ch in bad for ch in text[start:end])
        rows.append(
            {"i": i, "id": int(t), "text": tok.token(int(t)), "start": start, "end": end, "unk": flagged}
        )
    return {"tokens": rows, "unknown": unknown}


def as_batch(loaded: Loaded, ids: list[int]) -> torch.Tensor:
    """``ids`` as a batch of one on the model's device: ``[1, T]``."""
    device = next(loaded.model.parameters()).device
    return torch.tensor([ids], dtype=torch.long, device=device)  # [1, T]


def forward(loaded: Loaded, ids: torch.Tensor) -> torch.Tensor:
    """One forward pass: a GPT's logits ``[1, T, V]``, a BERT's last hidden state ``[1, T, d_model]``."""
    with torch.inference_mode():
        if is_lm(loaded):
            return loaded.model(ids)
        return loaded.model.encode(ids)


def attention_weights(loaded: Loaded, ids: torch.Tensor) -> torch.Tensor:
    """Every layer's attention weights for ``ids [1, T]``, read through the hook points: ``[L, h, T, T]``."""
    pattern = points(loaded.model)["weights"]
    names = [pattern.format(layer=i) for i in range(loaded.model.config.num_layers)]
    with capture(loaded.model, names) as cache:
        forward(loaded, ids)
    return torch.stack([cache[n][0] for n in names]).float()  # [L, h, T, T]


def packed(t: torch.Tensor) -> dict:
    """A float tensor as little-endian float32 bytes in base64, with its shape (the page decodes it)."""
    data = t.detach().to(torch.float32).contiguous().cpu().numpy().astype("<f4").tobytes()
    return {"shape": list(t.shape), "dtype": "float32", "base64": base64.b64encode(data).decode("ascii")}


def unpack(data: dict) -> torch.Tensor:
    """The inverse of :func:`packed`."""
    raw = bytearray(base64.b64decode(data["base64"]))
    return torch.frombuffer(raw, dtype=torch.float32).reshape(data["shape"])


def heads(weights: torch.Tensor, ids: torch.Tensor, causal: bool) -> dict:
    """The detector scores of every head, ``weights [L, h, T, T]`` of ``ids [1, T]``: per detector
    ``[L, h]``, and the heads scoring above :data:`THRESHOLD` (``"layer.head"``, best first)."""
    scores = score_heads([w[None] for w in weights], ids, DETECTORS)  # name -> [L, h]
    named = [
        {"head": f"{layer}.{head}", "detector": name, "score": score}
        for name, s in scores.items()
        for layer, head, score in heads_above(s, THRESHOLD)
    ]
    return {
        "detectors": list(DETECTORS),
        "scores": {name: s.tolist() for name, s in scores.items()},
        "threshold": THRESHOLD,
        "named": sorted(named, key=lambda x: -x["score"]),
        "applies": APPLIES["causal" if causal else "self"],
    }


def attention(loaded: Loaded, text: str) -> dict:
    """Tokens, the weights ``[L, h, T, T]`` of every layer and head, and the detector grid."""
    ids = encode(loaded, text)
    x = as_batch(loaded, ids)
    w = attention_weights(loaded, x)
    return {
        **tokens(loaded, text, ids),
        "causal": is_lm(loaded),
        "layer": layer_name(loaded),
        "weights": packed(w),
        "heads": heads(w, x, is_lm(loaded)),
    }


# ------------------------------------------------------------------------------------------ language models
def _top(loaded: Loaded, probs: torch.Tensor, k: int) -> list[dict]:
    """The ``k`` most likely ids of ``probs [V]``: ``[{"id", "text", "p"}]``, most likely first."""
    p, i = probs.topk(min(k, probs.shape[-1]))
    tok = loaded.tokenizer
    return [{"id": int(j), "text": tok.token(int(j)), "p": float(q)} for q, j in zip(p.tolist(), i.tolist())]


def loss(logits: torch.Tensor, ids: torch.Tensor) -> float | None:
    """-mean_t log p(x_{t+1} | x_1..x_t): ``logits [T, V]`` of ``ids [T]``; None for one token."""
    if ids.shape[0] < 2:
        return None
    return float(F.cross_entropy(logits[:-1].float(), ids[1:]))


def next_tokens(loaded: Loaded, text: str) -> dict:
    """Per position t the :data:`TOP_K` most likely next tokens of ``softmax(logits[t])``, the
    probability of the token that does follow, and the loss over the text."""
    ids = encode(loaded, text)
    x = as_batch(loaded, ids)
    logits = forward(loaded, x)[0].float()  # [T, V]
    probs = logits.softmax(dim=-1)  # [T, V]
    follows = [float(probs[t, ids[t + 1]]) for t in range(len(ids) - 1)] + [None]
    return {
        **tokens(loaded, text, ids),
        "positions": [{"top": _top(loaded, probs[t], TOP_K), "follows": follows[t]} for t in range(len(ids))],
        "loss": loss(logits, x[0]),
    }


def lens(loaded: Loaded, text: str) -> dict:
    """The logit lens: for each layer l = 0..L (0: the embeddings) and position, the :data:`LENS_K`
    most likely tokens of ``softmax(LN_f(h_l) W_U)``, and the rank and probability of the model's
    final choice there. Positions: the last ones that fit :data:`LENS_FLOATS` (all, for small V)."""
    ids = encode(loaded, text)
    x = as_batch(loaded, ids)
    c = loaded.model.config
    keep = max(1, min(len(ids), LENS_FLOATS // ((c.num_layers + 1) * c.vocab_size)))
    stream = residual_stream(loaded.model, x)
    stream = dataclasses.replace(stream, resid=[h[:, -keep:] for h in stream.resid])  # [1, keep, d] each
    logits = logit_lens(loaded.model, x, stream)[:, 0].float()  # [L+1, keep, V]
    probs = logits.softmax(dim=-1)
    final = eventual_token_by_layer(logits[:, None])  # rank and prob [L+1, keep] of the last row's argmax
    return {
        **tokens(loaded, text, ids),
        "first": len(ids) - keep,
        "cells": [
            [_top(loaded, probs[layer, t], LENS_K) for t in range(keep)] for layer in range(len(logits))
        ],
        "final_rank": final["rank"].long().tolist(),
        "final_prob": final["prob"].tolist(),
    }


def _int(name: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, got {shown(value)}")
    return value


def _box(loaded: Loaded, result: dict) -> dict:
    """One continuation of :func:`attnlab.decoding.generate_text` as the page shows it: the new ids
    (up to and including an end-of-sequence id), their tokens and the text."""
    ids = result["tokens"]
    return {"ids": ids, "tokens": loaded.tokenizer.tokens(ids), "text": result["text"]}


def generate(
    loaded: Loaded, text: str, n: int = 20, beam: int = 4, temperature: float = 1.0, top_k=None, seed: int = 0
) -> dict:
    """``n`` tokens after ``text`` three ways, each what ``attnlab generate`` gives for the same
    request (:func:`attnlab.decoding.generate_text`): greedy, sampling at ``temperature`` (``top_k``
    optional, ``seed``) and beam search with ``beam`` beams (length penalty 1). Greedy and sampling
    slide past the model's context; where beam search cannot, its box holds no tokens and a ``note``
    saying why."""
    ids = encode(loaded, text)
    n, beam, seed = (
        _int("n", n, 1, MAX_NEW),
        _int("beam", beam, 1, MAX_BEAM),
        _int("seed", seed, 0, 2**31 - 1),
    )
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not 0 < temperature <= 10
    ):
        raise ValueError(f"temperature must be a number in (0, 10], got {shown(temperature)}")
    if top_k is not None:
        top_k = _int("top_k", top_k, 1, loaded.model.config.vocab_size)
    asked = GenerationRequest(text, max_new=n)
    drawn = dataclasses.replace(asked, temperature=float(temperature), top_k=top_k, seed=seed)
    why = fit_problem(loaded.model, len(ids), n, slides=False)
    if why is None:
        found = generate_text(loaded, dataclasses.replace(asked, beam=beam))
        beamed = {**_box(loaded, found), "score": found["score"]}
    else:
        beamed = {"ids": [], "tokens": [], "text": "", "score": None, "note": why}
    return {
        **tokens(loaded, text, ids),
        "greedy": _box(loaded, generate_text(loaded, asked)),
        "beam": beamed,
        "sample": _box(loaded, generate_text(loaded, drawn)),
        "settings": {"n": n, "beam": beam, "temperature": float(temperature), "top_k": top_k, "seed": seed},
    }


# ------------------------------------------------------------------------------------------ ablation
def parse_heads(loaded: Loaded, value) -> list[tuple[int, int]]:
    """``["1.3", [0, 2], ...]`` -> sorted distinct ``(layer, head)`` pairs, each within the model."""
    c = loaded.model.config
    if not isinstance(value, list) or len(value) > c.num_layers * c.num_heads:
        raise ValueError(f"heads must be a list of at most {c.num_layers * c.num_heads} heads like '1.3'")
    found = set()
    for item in value:
        parts = item.split(".") if isinstance(item, str) else item
        if not isinstance(parts, list) or len(parts) != 2:
            raise ValueError(f"a head is written layer.head (e.g. '1.3') or [layer, head], got {shown(item)}")
        try:
            layer, head = (int(p) if isinstance(p, str) and p.isascii() and p.isdigit() else p for p in parts)
            layer = _int("a head's layer", layer, 0, c.num_layers - 1)
            head = _int("a head's number", head, 0, c.num_heads - 1)
        except ValueError:
            raise ValueError(
                f"head {item!r} is not in this model: layers 0..{c.num_layers - 1}, "
                f"heads 0..{c.num_heads - 1}"
            ) from None
        found.add((layer, head))
    return sorted(found)


def switched_off(loaded: Loaded, off: list[tuple[int, int]]):
    """A context in which heads ``off`` write nothing: ``z [B, T, h, d_k]`` of each is set to 0
    through :func:`attnlab.nn.hooks.patch` (equal to zeroing its rows of W^O)."""
    by_layer: dict[int, list[int]] = {}
    for layer, head in off:
        by_layer.setdefault(layer, []).append(head)
    pattern = points(loaded.model)["z"]

    def zero(heads_of_layer: list[int]) -> Callable[[torch.Tensor], torch.Tensor]:
        index = torch.tensor(heads_of_layer)
        return lambda z: z.index_fill(2, index.to(z.device), 0.0)  # [B, T, h, d_k]

    return patch(loaded.model, {pattern.format(layer=layer): zero(hs) for layer, hs in by_layer.items()})


def _lm_change(loaded: Loaded, x: torch.Tensor, before: torch.Tensor, after: torch.Tensor) -> dict:
    """Next-token change per position: KL(p_before || p_after), and the top tokens before with their
    probability after; the loss before and after. ``before``/``after``: logits ``[T, V]``."""
    lp0, lp1 = before.log_softmax(dim=-1), after.log_softmax(dim=-1)  # [T, V]
    kl = (lp0.exp() * (lp0 - lp1)).sum(dim=-1)  # [T]
    positions = []
    for t in range(before.shape[0]):
        top = _top(loaded, lp0[t].exp(), TOP_K)
        for row in top:
            row["p_after"] = float(lp1[t, row["id"]].exp())
        positions.append({"kl": float(kl[t]), "top": top, "argmax_after": _top(loaded, lp1[t].exp(), 1)[0]})
    return {"positions": positions, "loss_before": loss(before, x[0]), "loss_after": loss(after, x[0])}


def ablate(loaded: Loaded, text: str, heads: list | None = None, text_b: str | None = None) -> dict:
    """The change made by switching ``heads`` off (see :func:`switched_off`): for a language model in
    the next-token distributions and the loss; for an encoder the cosine between the mean-pooled
    sentence vectors with and without the heads (each token's too), and with ``text_b`` the two
    sentences' similarity before and after."""
    off = parse_heads(loaded, [] if heads is None else heads)
    ids = encode(loaded, text)
    x = as_batch(loaded, ids)
    before = forward(loaded, x)[0].float()  # [T, V] or [T, d]
    with switched_off(loaded, off):
        after = forward(loaded, x)[0].float()
    out = {**tokens(loaded, text, ids), "off": [f"{layer}.{head}" for layer, head in off]}
    if is_lm(loaded):
        return {**out, **_lm_change(loaded, x, before, after)}
    out["vector_cosine"] = float(F.cosine_similarity(before.mean(dim=0), after.mean(dim=0), dim=0))
    out["token_cosine"] = F.cosine_similarity(before, after, dim=-1).tolist()  # [T]
    if text_b is not None:
        out["similarity_before"] = similarity(loaded, text, text_b)["cosine"]
        with switched_off(loaded, off):
            out["similarity_after"] = similarity(loaded, text, text_b)["cosine"]
    return out


# ------------------------------------------------------------------------------------------ encoders, audit
def similarity(loaded: Loaded, text: str, text_b: str) -> dict:
    """Why ``text`` and ``text_b`` are similar: :func:`~attnlab.interp.similarity.explain_similarity`,
    the terms ``C [n, m]`` (summing to the cosine) and the ten largest."""
    if getattr(loaded.model.config, "pooling", None) != "mean":
        raise ValueError("the similarity split needs an encoder with mean pooling (MiniLM is one)")
    encode(loaded, text)
    encode(loaded, text_b, "text_b")  # both within the bounds before the model runs
    backend = getattr(loaded.tokenizer, "backend", loaded.tokenizer)
    pairs = explain_similarity(loaded.model, backend, text, text_b)
    return {
        "tokens_a": pairs.tokens_a,
        "tokens_b": pairs.tokens_b,
        "terms": pairs.terms.tolist(),
        "cosine": pairs.cosine,
        "top": [{"a": a, "b": b, "term": c, "share": s} for a, b, c, s in pairs.top(10)],
    }


def audit(loaded: Loaded, text: str) -> dict:
    """Parameters by group (:func:`~attnlab.audit.audit_params` of the model's config, and the loaded
    tensors counted) and the shape on every arrow of one block for ``text`` (B = 1, T its tokens)."""
    ids = encode(loaded, text)
    config = loaded.model.config
    params = audit_params(config)
    spec = dataclasses.replace(model_spec(config), layers=1)
    shapes = audit_shapes(spec, Workload(seq=len(ids), batch=1))
    first = shapes["layer_output_names"][0] if shapes["layer_output_names"] else ""
    loaded_total = sum(p.numel() for p in {id(p): p for p in loaded.model.parameters()}.values())
    return {
        "total": params["total"],
        "formula": params["formula"],
        "by_group": params["by_group"],
        "group_formulas": params["group_formulas"],
        "module_total": params["module_total"],
        "loaded_total": loaded_total,
        "sizes": params["sizes"],
        "block": [
            {"where": s["where"], "step": s["step"], "shape": s["shape"]}
            for s in shapes["steps"]
            if s["layer"] == first
        ],
        "seq": len(ids),
    }


# ------------------------------------------------------------------------------------------ the equations
def _vec(t) -> list[float] | None:
    """A float64 tensor ``[n]`` as a list (None stays None)."""
    return None if t is None else t.tolist()


def equation(loaded: Loaded, text: str, layer=0, head=0, position=None) -> dict:
    """The numbers of every step of head ``layer.head`` at query ``position`` (default: the last
    token), :func:`attnlab.interp.equation.query_math` of the text: q, K and V (before and after
    RoPE; ``[T, d_k]`` packed), ``K q``, the scale, bias and mask, the weights (the forward's, and
    the softmax recomputed) and z, the layer's vectors at this position (``[d_model]`` packed, with
    their norms), the keys of largest weight, and the what-ifs: no scale, no causal mask, a
    temperature on the next token."""
    ids = encode(loaded, text)
    if position is None:
        position = len(ids) - 1
    r = query_math(loaded.model, as_batch(loaded, ids), layer, head, position)
    tok = loaded.tokenizer
    layer_vectors = (
        "resid_pre",
        "attn_in",
        "concat",
        "attn_out",
        "resid_mid",
        "ffn_in",
        "ffn_out",
        "resid_post",
    )
    top = r.top_keys()
    for row in top:
        row["text"] = tok.token(ids[row["key"]])
    unscaled, unmasked, temps = r.unscaled(), r.unmasked(), r.temperatures()
    unscaled["weights"] = _vec(unscaled["weights"])
    if unmasked is not None:
        unmasked["weights"] = _vec(unmasked["weights"])
        for row in unmasked["future"]:
            row["text"] = tok.token(ids[row["key"]])
    for t in temps or ():
        for row in t["top"]:
            row["text"] = tok.token(row["id"])
    c = loaded.model.config
    return {
        **tokens(loaded, text, ids),
        "layer": r.layer,
        "head": r.head,
        "name": f"{r.layer}.{r.head}",
        "position": r.position,
        "heads": r.heads,
        "kv_head": r.kv_head,
        "group": [f"{r.layer}.{g}" for g in r.group],
        "d_k": len(r.q),
        "d_model": int(c.d_model),
        "scale": r.scale,
        "positions": r.positions,
        "rotated": r.rotated,
        "causal": r.causal,
        "window": r.window,
        "norm": r.norm,
        "norm_place": r.norm_place,
        "q_pre": _vec(r.q_pre),
        "q": _vec(r.q),
        "k_pre": packed(r.k_pre),
        "k": packed(r.k),
        "v": packed(r.v),
        "raw": _vec(r.raw),
        "bias": _vec(r.bias),
        "mask": r.mask.tolist(),
        "scores": _vec(r.raw * r.scale + r.bias),
        "weights": _vec(r.weights),
        "softmax": _vec(r.softmax),
        "z": _vec(r.z),
        "av": _vec(r.av),
        "vectors": {name: packed(getattr(r, name)) for name in layer_vectors if getattr(r, name) is not None},
        "norms": {
            name: float(getattr(r, name).norm()) for name in layer_vectors if getattr(r, name) is not None
        },
        "top": top,
        "checks": r.checks(),
        "unscaled": unscaled,
        "unmasked": unmasked,
        "temperature": temps,
    }


# ------------------------------------------------------------------------------------------ one request
VIEWS: dict[str, tuple[Callable[..., dict], tuple[str, ...]]] = {
    "tokens": (lambda loaded, text: tokens(loaded, text, encode(loaded, text)), ("text",)),
    "attention": (attention, ("text",)),
    "next": (next_tokens, ("text",)),
    "lens": (lens, ("text",)),
    "generate": (generate, ("text", "n", "beam", "temperature", "top_k", "seed")),
    "ablate": (ablate, ("text", "heads", "text_b")),
    "similarity": (similarity, ("text", "text_b")),
    "audit": (audit, ("text",)),
    "math": (equation, ("text", "layer", "head", "position")),
}


def check_request(view: str, loaded: Loaded, body: dict) -> None:
    """What can be checked without the model (cheap, so the server does it before queueing): the view
    exists and applies to ``loaded``, ``body`` has only its fields (and ``model``), and its texts are
    strings within :data:`MAX_CHARS`. A ``ValueError`` naming what is wrong."""
    if view == "heads":  # a tab of the page, filled by the attention view's answer
        raise ValueError("the heads tab is filled by the attention view: its answer holds the head scores")
    if view not in VIEWS:
        raise ValueError(f"there is no view {view!r}{did_you_mean(view, VIEWS)}")
    fields = VIEWS[view][1]
    extra = sorted(set(body) - set(fields) - {"model"})
    if extra:
        raise ValueError(f"the {view} view takes {', '.join(fields)}; not {', '.join(map(str, extra))}")
    if view not in describe(loaded, 0, "")["views"]:
        raise ValueError(f"the {view} view does not apply to {loaded.label} (a {loaded.kind} model)")
    for field in ("text", "text_b") if view == "similarity" else ("text",):
        if field not in body:
            raise ValueError(f"the {view} view needs {field}")
    for field in ("text", "text_b"):
        if body.get(field) is not None:
            text_field(body[field], field)


def answer(view: str, loaded: Loaded, body: dict) -> dict:
    """Run ``view`` on ``loaded`` with the request's fields (``body`` minus ``model``), after
    :func:`check_request`."""
    check_request(view, loaded, body)
    fn, fields = VIEWS[view]
    return fn(loaded, **{f: body[f] for f in fields if f in body})
