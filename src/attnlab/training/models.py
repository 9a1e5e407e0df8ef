"""Build the four trainable model kinds from a vocabulary size and a few size options.

User-facing options (``model_params``) and their defaults:

- RNNs (``seq2seq-rnn``, ``attention-rnn``): ``emb`` 32, ``hidden`` 64, ``layers`` 1, ``cell`` "gru",
  ``attention`` "bahdanau" (attention-rnn only: bahdanau | luong-dot | luong-general | luong-concat),
  ``dropout`` 0.0.
- ``transformer``: ``d_model`` 64, ``heads`` 4, ``d_ff`` 4 * d_model, ``layers`` 2 (encoder and
  decoder each), ``dropout`` 0.0, ``max_len`` 256.
- ``gpt``: ``d_model`` 64, ``heads`` 4, ``d_ff`` 4 * d_model, ``layers`` 2, ``attention`` "sdpa"
  (a block kind, :data:`attnlab.nn.config.ATTENTION_KINDS`: linear and ssm need nothing else),
  ``window`` None (a sliding window of W tokens; block_sparse needs one), ``dropout`` 0.0,
  ``max_len`` 256.

Each option is mapped onto the model's frozen config (``attnlab.models``) by field name.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from torch import nn

DEFAULTS: dict[str, dict[str, Any]] = {
    "seq2seq-rnn": {"emb": 32, "hidden": 64, "layers": 1, "cell": "gru", "dropout": 0.0},
    "attention-rnn": {
        "emb": 32,
        "hidden": 64,
        "layers": 1,
        "cell": "gru",
        "attention": "bahdanau",
        "dropout": 0.0,
    },
    "transformer": {"d_model": 64, "heads": 4, "d_ff": None, "layers": 2, "dropout": 0.0, "max_len": 256},
    "gpt": {
        "d_model": 64,
        "heads": 4,
        "d_ff": None,
        "layers": 2,
        "attention": "sdpa",
        "window": None,
        "dropout": 0.0,
        "max_len": 256,
    },
}

# our option name -> the config field names it may go by in attnlab.models
_ALIASES: dict[str, tuple[str, ...]] = {
    "emb": ("emb", "emb_dim", "embedding_dim", "d_emb"),
    "hidden": ("hidden", "hidden_size", "d_hidden", "hidden_dim"),
    "layers": ("layers", "num_layers"),
    "cell": ("cell",),
    "attention": ("attention",),
    "window": ("window",),
    "dropout": ("dropout",),
    "d_model": ("d_model",),
    "heads": ("num_heads", "heads"),
    "d_ff": ("d_ff",),
    "max_len": ("max_len",),
}


def attention_choices() -> tuple[str, ...]:
    """What ``--attention`` takes: the attention-rnn scores, then the gpt block kinds."""
    from attnlab.models.rnn import ATTENTIONS
    from attnlab.nn.config import ATTENTION_KINDS

    return tuple(ATTENTIONS) + tuple(k for k in ATTENTION_KINDS if k not in ATTENTIONS)


def model_class(kind: str):
    """The ``attnlab.models`` class for ``kind``."""
    import importlib

    import attnlab.models as M

    names = {
        "seq2seq-rnn": "Seq2SeqRNN",
        "attention-rnn": "AttentionRNN",
        "transformer": "Transformer",
        "gpt": "GPT",
    }
    modules = {"seq2seq-rnn": "rnn", "attention-rnn": "rnn", "transformer": "transformer", "gpt": "gpt"}
    if kind not in names:
        raise ValueError(f"unknown model {kind!r}; choose from {sorted(names)}")
    cls = getattr(M, names[kind], None)
    if cls is None:  # not re-exported (yet): look in its own module
        try:
            cls = getattr(importlib.import_module(f"attnlab.models.{modules[kind]}"), names[kind], None)
        except ImportError:
            cls = None
    if cls is None:
        raise ValueError(f"attnlab.models has no {names[kind]} (model {kind!r} is not available)")
    return cls


def resolve_params(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` completed with the defaults for ``kind``; unknown options raise ``ValueError``."""
    if kind not in DEFAULTS:
        raise ValueError(f"unknown model {kind!r}; choose from {sorted(DEFAULTS)}")
    unknown = sorted(set(params) - set(DEFAULTS[kind]))
    if unknown:
        raise ValueError(f"model {kind!r} has no option(s) {unknown}; options: {sorted(DEFAULTS[kind])}")
    out = {**DEFAULTS[kind], **{k: v for k, v in params.items() if v is not None}}
    if "d_ff" in out and out["d_ff"] is None:
        out["d_ff"] = 4 * out["d_model"]
    return out


def build_config(kind: str, vocab_size: int, params: dict[str, Any]):
    """The model's frozen config for a shared source/target vocabulary of ``vocab_size`` ids."""
    cls = model_class(kind)
    p = resolve_params(kind, params)
    fields = {f.name for f in dataclasses.fields(cls.config_class)}
    kw: dict[str, Any] = {}
    for vocab_field in ("src_vocab", "tgt_vocab", "vocab_size"):
        if vocab_field in fields:
            kw[vocab_field] = vocab_size
    for opt, value in p.items():
        names = [n for n in _ALIASES[opt] if n in fields]
        if opt == "layers" and kind == "transformer":
            names = [n for n in ("num_encoder_layers", "num_decoder_layers") if n in fields]
        if opt == "cell" and kind != "gpt" and not names:
            continue  # a model without a choice of cell
        if not names:
            raise ValueError(f"{cls.config_class.__name__} has no field for option {opt!r}")
        for n in names:
            kw[n] = value
    if "pad_id" in fields:
        kw["pad_id"] = 0
    return cls.config_class(**kw)


def build_model(kind: str, vocab_size: int, params: dict[str, Any]) -> nn.Module:
    """A freshly initialised model of ``kind`` (initialisation uses torch's global RNG); checked at
    every hook point when ``ATTNLAB_DETECT_NONFINITE`` is set (:mod:`attnlab.nn.nonfinite`)."""
    from attnlab.nn.nonfinite import detect_from_env

    return detect_from_env(model_class(kind)(build_config(kind, vocab_size, params)))


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, tied tensors counted once."""
    seen, total = set(), 0
    for p in model.parameters():
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total
