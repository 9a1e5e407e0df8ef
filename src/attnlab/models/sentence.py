"""Sentence embeddings from an encoder: pooling over tokens and :func:`embed`.

:func:`embed` turns sentences into sentence embeddings the way the checkpoint's own
``1_Pooling`` / ``modules.json`` say (MiniLM: mean over real tokens, then L2 normalisation),
sorting by length so that batches carry almost no padding, and running each batch through
:func:`encode_packed` (no padding token in any projection or FFN).
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Sequence
from itertools import chain

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer as Backend
from torch import Tensor

from attnlab.models.bert import BertEncoder, check_id_tensor
from attnlab.models.capabilities import require_encoder
from attnlab.models.int8 import int8_kernel
from attnlab.models.load import load
from attnlab.models.precision import PackedLayer, check_dtype, prepare_layers, warn_if_slow
from attnlab.tasks.tokenize import HFTokenizer


class TruncationWarning(UserWarning):
    """A sentence was longer than the encoder's sentence-embedding limit and was cut to it."""


# Packed rows are padded to a multiple of ROWS: oneDNN builds (and caches, up to 1,024 entries) one
# kernel per matmul shape, and a file of 100,000 sentences meets hundreds of token counts; measured:
# RSS grew ~30 MB per 4,096 sentences without it. At most ROWS - 1 spare rows per batch.
ROWS = 32


def encode_packed(
    model: BertEncoder,
    ids: Tensor,
    lengths: Sequence[int],
    token_type_ids: Tensor | None = None,
    layers: list[PackedLayer] | None = None,
) -> Tensor:
    """The encoder on packed sentences, with no padding token between them (at most ``ROWS - 1``
    zero rows at the end, so that matmul shapes repeat).

    ``ids [N_tok]`` holds the sentences one after another (``lengths``, longest first or in
    any order). Every position-wise part (embeddings, Q/K/V and output projections, FFN,
    LayerNorm: ~95% of the FLOPs) runs on the ``N_tok`` real tokens only. The attention runs once
    per run of equal consecutive lengths (:func:`embed` sorts by token count, so a batch holds a
    few such runs): ``g`` sentences of ``L`` tokens are a view ``[g, h, L, d_k]`` of the packed
    projections, so the fused SDPA kernel needs no padding, no mask and no scatter or gather (the
    grid-and-mask version cost ~8% of the time in copies). The same layers
    and the same post-norm equations as :meth:`BertEncoder.forward` (inference only: no dropout).

    Args:
        ids: ``[N_tok]`` token ids; lengths: tokens per sentence (sum = N_tok);
        token_type_ids: ``[N_tok]`` or None (segment 0); layers: the layers' weights in the number
            format to run (:func:`attnlab.models.precision.prepare_layers`; float32 when None).
    Returns:
        ``[N_tok, d_model]``, the last hidden state of every real token, packed like ``ids``.
    """
    c = model.config
    if not len(lengths):
        raise ValueError("lengths is empty: no sentence to encode")
    T, n = max(lengths), int(sum(lengths))
    if T > c.max_len:
        raise ValueError(f"a sentence has T={T} tokens but the model has max_len={c.max_len} positions")
    if ids.shape != (n,):
        raise ValueError(f"ids has shape {list(ids.shape)} but lengths sum to {n}")
    if min(lengths) <= 0:
        raise ValueError(f"every sentence needs at least one token, got lengths {list(lengths)}")
    check_id_tensor("ids", ids[None], None, c.vocab_size)
    dev = ids.device
    lens = torch.tensor(list(lengths), device=dev)  # [b]
    starts = torch.cumsum(lens, 0) - lens  # [b]
    pos = torch.arange(n, device=dev) - torch.repeat_interleave(starts, lens)  # [N_tok] in-sentence
    x = model.word_embeddings(ids) + model.positions.weight[pos]  # [N_tok, d]
    if token_type_ids is None:
        x = x + model.token_type_embeddings.weight[0]
    else:
        x = x + model.token_type_embeddings(token_type_ids)
    x = model.embed_norm(x)  # [N_tok, d]
    groups = _runs(lengths)  # (first token, sentences, length) of each run of equal lengths
    h, spare = c.num_heads, -n % ROWS
    if spare:  # zero rows up to a multiple of ROWS: each position-wise op sees few distinct shapes
        x = torch.cat([x, x.new_zeros(spare, c.d_model)])  # [N_tok + spare, d]
    if layers is None:
        layers = prepare_layers(model.layers, "float32")
    for layer in layers:
        proj = layer.qkv(x)  # [N_tok + spare, 3d] (float32, or bfloat16 on that path)
        heads = [_attend(proj[s : s + g * L], g, L, h) for s, g, L in groups]  # [g*L, d] each
        o = torch.cat([*heads, proj.new_zeros(spare, c.d_model)])  # [N_tok + spare, d]
        x = layer.norm1(layer.out(o, x))  # U = LN_1(X + MHA(X)); the sum is float32, maybe in x's memory
        x = layer.norm2(layer.ffn_out(layer.ffn_in(x), x))  # X' = LN_2(U + FFN(U))
    return x[:n]  # [N_tok, d]


def _runs(lengths: Sequence[int]) -> list[tuple[int, int, int]]:
    """Runs of equal consecutive ``lengths``: ``(first token, sentences g, length L)`` each."""
    runs: list[tuple[int, int, int]] = []
    start = 0
    for L in lengths:
        if runs and runs[-1][2] == L:
            s, g, _ = runs[-1]
            runs[-1] = (s, g + 1, L)
        else:
            runs.append((start, 1, L))
        start += L
    return runs


def _attend(proj: Tensor, g: int, L: int, h: int) -> Tensor:
    """softmax(Q K^T / sqrt(d_k)) V for ``g`` sentences of ``L`` tokens each, without padding or mask.

    ``proj [g*L, 3d]`` holds their packed W^Q|W^K|W^V projections; returns ``[g*L, d]``.
    """
    d = proj.shape[1] // 3
    q, k, v = proj.view(g, L, 3, h, d // h).permute(2, 0, 3, 1, 4)  # each [g, h, L, d_k]
    o = F.scaled_dot_product_attention(q, k, v)  # [g, h, L, d_k], stored as [g, L, h, d_k]
    return o.transpose(1, 2).reshape(g * L, d)  # [g*L, d] (a view when stored so)


def pool(hidden: Tensor, mask: Tensor | None, how: str) -> Tensor:
    """Sentence vector from token vectors ``hidden [B, T, d]`` over real tokens ``mask [B, T]``:
    mean = sum_t m_t x_t / sum_t m_t; mean_sqrt_len = sum_t m_t x_t / sqrt(sum_t m_t);
    max = max over real t; cls = x_0. Returns ``[B, d]``."""
    if how == "cls":
        return hidden[:, 0]  # [B, d]
    if mask is None:
        if how == "max":
            return hidden.amax(dim=1)
        total, count = hidden.sum(dim=1), float(hidden.shape[1])  # [B, d]
    else:
        m = mask.to(hidden.dtype).unsqueeze(-1)  # [B, T, 1]
        if how == "max":
            return hidden.masked_fill(m == 0, float("-inf")).amax(dim=1)  # [B, d]
        total, count = (hidden * m).sum(dim=1), m.sum(dim=1)  # [B, d], [B, 1]
    return total / (count if how == "mean" else count**0.5)


def pool_packed(hidden: Tensor, lengths: Sequence[int], how: str) -> Tensor:
    """:func:`pool` for packed token vectors ``hidden [N_tok, d]`` of sentences of ``lengths``: ``[b, d]``."""
    parts = hidden.split(list(lengths))  # b tensors [L_i, d]
    if how == "cls":
        return torch.stack([p[0] for p in parts])  # [b, d]
    if how == "max":
        return torch.stack([p.amax(dim=0) for p in parts])  # [b, d]
    lens = torch.tensor(list(lengths), device=hidden.device, dtype=hidden.dtype)[:, None]  # [b, 1]
    sentence = torch.repeat_interleave(torch.arange(len(parts), device=hidden.device), lens[:, 0].long())
    total = hidden.new_zeros(len(parts), hidden.shape[1]).index_add_(0, sentence, hidden)  # [b, d]
    return total / (lens if how == "mean" else lens.sqrt())


def unknown_words(tokenizer, texts: Sequence[str], encodings) -> tuple[int, list[str]]:
    """``(sentences, words)``: how many of ``texts`` hold a token the vocabulary lacks (WordPiece's
    ``[UNK]``) and the distinct pieces of text it stood for, in order of appearance (``encodings``:
    the ``tokenizers`` encodings of ``texts``; only what survived truncation is looked at)."""
    unk_token = getattr(tokenizer.model, "unk_token", None)
    unk = tokenizer.token_to_id(unk_token) if unk_token else None
    if unk is None:
        return 0, []
    count, words = 0, {}
    for text, e in zip(texts, encodings):
        if unk in e.ids:  # (a C-level search: the loop below runs only for these)
            count += 1
            words.update(dict.fromkeys(text[a:b] for i, (a, b) in zip(e.ids, e.offsets) if i == unk))
    return count, [w for w in words if w.strip()]


_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def packed_layers(model: BertEncoder, dtype: str = "float32") -> list[PackedLayer]:
    """The model's layers prepared for ``dtype`` (:func:`prepare_layers`), cached per model (and int8
    kernel) and rebuilt when any parameter is replaced or changed in place."""
    check_dtype(dtype)
    stamp = tuple((p.data_ptr(), p._version) for p in model.parameters())
    cached = _PREPARED.setdefault(model, {})
    key = (dtype, int8_kernel() if dtype == "int8" else "")
    if key not in cached or cached[key][0] != stamp:
        cached[key] = (stamp, prepare_layers(model.layers, dtype))
    return cached[key][1]


_TRUNCATING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def sentence_tokenizer(model: BertEncoder, tokenizer) -> Backend:
    """The ``tokenizers.Tokenizer`` that :func:`embed` reads sentences with: ``tokenizer`` itself when
    it is one (as :func:`load_encoder` and ``load_pretrained`` give it), or the backend of the
    :class:`~attnlab.tasks.tokenize.HFTokenizer` that :func:`attnlab.models.load` gives, cutting at
    the model's sentence-embedding length (a copy when the backend does not truncate: the
    caller's tokenizer is left as it is). Anything else is a ``ValueError``."""
    if isinstance(tokenizer, Backend):
        return tokenizer
    if not isinstance(tokenizer, HFTokenizer):
        raise ValueError(
            "tokenizer must be a tokenizers.Tokenizer or the tokenizer attnlab.models.load returns "
            f"for an encoder, got {type(tokenizer).__name__}"
        )
    backend = tokenizer.backend
    if backend.truncation is not None:
        return backend
    c = model.config
    limit = c.max_seq_length or c.max_len
    cached = _TRUNCATING.get(tokenizer)
    if cached is None or cached[0] is not backend or cached[1] != limit:
        copy = Backend.from_str(backend.to_str())
        copy.no_padding()
        copy.enable_truncation(max_length=limit)
        cached = _TRUNCATING[tokenizer] = (backend, limit, copy)
    return cached[2]


def load_encoder(source: str = "minilm", device: str | torch.device = "cpu"):
    """``(encoder, tokenizer)`` for :func:`embed`: the model ``source`` names (anything
    :func:`attnlab.models.load` reads: ``minilm``, a BERT checkpoint folder, a saved encoder with its
    ``tokenizer.json``) and its ``tokenizers`` tokenizer, cutting sentences at the checkpoint's
    sentence-embedding length. A decoder, or a model without a tokenizer, is a one-line ``ValueError``."""
    loaded = load(source, device=device)
    require_encoder(loaded.model, "embed", source)
    backend = getattr(loaded.tokenizer, "backend", None)
    if backend is None:
        raise ValueError(f"{source} has no tokenizer.json beside the model; embed reads text with it")
    c = loaded.model.config
    backend.enable_truncation(max_length=c.max_seq_length or c.max_len)
    return loaded.model, backend


def _read(tokenizer: Backend, sentences: list[str], c, stats: dict | None):
    """``(ids, types)``: each sentence's token ids and segment ids (lists, padding dropped), as
    :func:`embed` reads them; fills ``stats`` (see :func:`embed`) or, without it, warns once when a
    sentence was truncated. A sentence longer than the model's positions ``c.max_len`` is a ``ValueError``."""
    encodings = tokenizer.encode_batch(sentences)
    padded = tokenizer.padding is not None
    ids = [e.ids[: sum(e.attention_mask)] if padded else e.ids for e in encodings]
    types = [e.type_ids[: len(i)] for e, i in zip(encodings, ids)]
    truncated = sum(1 for e in encodings if e.overflowing)
    if stats is not None:
        stats["tokens"] = sum(len(i) for i in ids)
        stats["truncated"] = truncated
        stats["unknown"], stats["unknown_words"] = unknown_words(tokenizer, sentences, encodings)
    elif truncated:
        cut = tokenizer.truncation["max_length"]
        warnings.warn(
            f"{truncated} of {len(sentences)} sentences were longer than {cut} tokens and were truncated "
            f"to {cut} (the model's sentence-embedding limit); pass stats={{}} to get the count instead",
            TruncationWarning,
            stacklevel=3,
        )
    longest = max(range(len(ids)), key=lambda i: len(ids[i]))
    if len(ids[longest]) > c.max_len:
        raise ValueError(
            f"sentence {longest} has {len(ids[longest])} tokens, more than the model's "
            f"{c.max_len} positions; enable truncation to {c.max_seq_length or c.max_len} on the tokenizer"
        )
    return ids, types


def embed(
    model: BertEncoder,
    tokenizer,
    sentences: Sequence[str],
    batch_size: int = 32,
    dtype: str = "float32",
    stats: dict | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> Tensor:
    """Sentence embeddings ``[N, d_model]`` (float32, on the model's device), row i for sentence i.

    Tokenise all sentences (Rust, in parallel), sort them by token count (longest first), and run
    each batch of ``batch_size`` sentences packed (:func:`encode_packed`): no padding token goes
    through a projection or the FFN, and the sorting keeps the attention's padded grid nearly
    full. Under ``torch.inference_mode``, the fused SDPA kernel gets a key-padding mask only when
    a batch has padding. Pool as the checkpoint says (``model.config.pooling``; MiniLM: the mean
    over real tokens), L2-normalise if ``model.config.normalize``, and put every row back in the
    caller's order.

    ``dtype``: ``"float32"`` (default), ``"bfloat16"`` or ``"int8"`` — the number format of the
    matmuls (:mod:`attnlab.models.precision`; pooling and the result are float32 either way).
    ``stats``: a dict to fill with ``sentences``, ``tokens`` (after truncation), ``truncated``
    (how many sentences the tokenizer cut at its ``max_length``), ``unknown`` (how many hold a token
    the vocabulary lacks) and ``unknown_words`` (what those tokens stood for: :func:`unknown_words`).
    ``on_batch(b)``: called after each batch of ``b`` sentences (progress within a long list).
    Truncated sentences get one :class:`TruncationWarning` unless ``stats`` is given (the caller then
    has the count, and reports it: ``attnlab embed`` does).

    ``tokenizer``: a ``tokenizers.Tokenizer`` or the tokenizer :func:`attnlab.models.load` returns
    (:func:`sentence_tokenizer`).
    """
    if isinstance(sentences, str):
        raise ValueError("sentences must be a list of strings, not one string")
    sentences = list(sentences)
    if not all(isinstance(s, str) for s in sentences):
        raise ValueError("sentences must all be strings")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    require_encoder(model, "embed")
    tokenizer = sentence_tokenizer(model, tokenizer)
    check_dtype(dtype)
    warn_if_slow(dtype)
    c = model.config
    device = next(model.parameters()).device
    out = torch.empty(len(sentences), c.d_model, device=device)  # [N, d]
    if stats is not None:
        stats.update(sentences=len(sentences), tokens=0, truncated=0, unknown=0, unknown_words=[])
    if not sentences:
        return out
    ids, types = _read(tokenizer, sentences, c, stats)  # [N] lists of token and segment ids
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # longest first
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            layers = packed_layers(model, dtype)
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                lengths = [len(ids[i]) for i in rows]
                flat = torch.tensor(list(chain.from_iterable(ids[i] for i in rows)), device=device)  # [N_tok]
                segs = None
                if any(any(types[i]) for i in rows):
                    segs = torch.tensor(list(chain.from_iterable(types[i] for i in rows)), device=device)
                hidden = encode_packed(model, flat, lengths, segs, layers)  # [N_tok, d]
                vec = pool_packed(hidden, lengths, c.pooling)  # [b, d]
                if c.normalize:
                    vec = F.normalize(vec, p=2.0, dim=-1)
                out[torch.tensor(rows, device=device)] = vec.float()
                if on_batch is not None:
                    on_batch(len(rows))
    finally:
        model.train(was_training)
    return out
