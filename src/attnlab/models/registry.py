"""Every model family attnlab saves, loads and trains, in one place.

Each class registers itself under its ``kind`` when it is defined (:class:`SavableModel`), and
names its config class and, if ``attnlab train`` trains it, its training options and how they map
onto that config (``OPTIONS``, ``from_options``). This module imports every family, so that any
``config.json`` can be read back, and answers "which class is kind K". A new family is its own
file (the class and its config, declaring what callers ask of it: :mod:`attnlab.models.capabilities`)
and one entry of :data:`FAMILIES`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnlab import names
from attnlab._runs import checkpoint_dir, is_run, verify
from attnlab.models.base import ModelConfig, SavableModel, read_config
from attnlab.models.bert import BertEncoder
from attnlab.models.gpt import GPT
from attnlab.models.pretrained import PRETRAINED
from attnlab.models.rnn import AttentionRNN, Seq2SeqRNN
from attnlab.models.transformer import Transformer
from attnlab.names import attention_choices as attention_choices  # (train --attention)

FAMILIES: tuple[type[SavableModel], ...] = (Seq2SeqRNN, AttentionRNN, Transformer, GPT, BertEncoder)
TRAINABLE: tuple[str, ...] = tuple(cls.kind for cls in FAMILIES if cls.OPTIONS is not None)
if TRAINABLE != names.TRAINABLE:  # the list --help shows without importing the models
    raise ImportError(f"attnlab.names.TRAINABLE must be {TRAINABLE}, the families with OPTIONS")
# the families the audits describe: those that say, in their own class, how an audit's ModelSpec
# sizes them (from_audit; a subclass does not inherit it: the audits' arithmetic names each family)
AUDITED: tuple[str, ...] = tuple(cls.kind for cls in FAMILIES if "from_audit" in vars(cls))
if AUDITED != names.AUDITED:  # the list audit --help shows without importing the models
    raise ImportError(f"attnlab.names.AUDITED must be {AUDITED}, the families with from_audit")


def decoders() -> tuple[str, ...]:
    """The families that read one causal sequence (``DECODER_ONLY``: :mod:`attnlab.models.capabilities`)."""
    return tuple(cls.kind for cls in FAMILIES if cls.DECODER_ONLY)


def encoders() -> tuple[str, ...]:
    """The families that read one bidirectional sequence (``ENCODER_ONLY``)."""
    return tuple(cls.kind for cls in FAMILIES if cls.ENCODER_ONLY)


def model_class(kind: str) -> type[SavableModel]:
    """The class saved and loaded as ``kind`` (``"gpt"``, ``"transformer"``, ...)."""
    for cls in FAMILIES:
        if cls.kind == kind:
            return cls
    raise ValueError(f"unknown model {kind!r}; choose from {[cls.kind for cls in FAMILIES]}")


def build_model(kind: str, vocab_size: int, options: dict[str, Any]) -> SavableModel:
    """A freshly initialised trainable model of ``kind`` from its training ``options``
    (:meth:`SavableModel.build`)."""
    return model_class(kind).build(vocab_size, options)


def load_model(directory: str | Path, map_location: str = "cpu") -> SavableModel:
    """Load any saved attnlab model (the class is named in ``config.json``). A run folder of
    ``attnlab train`` gives its newest checkpoint, verified, never the top-level copy (which a kill
    while it was being replaced could have left stale); nothing is written. A pretrained model's
    name (``"minilm"``) or a Hugging Face folder is a ``ValueError`` pointing to
    :func:`attnlab.models.load`, which reads those."""
    if str(directory) in PRETRAINED:
        raise ValueError(
            f"{str(directory)!r} is a pretrained model, not a folder saved by attnlab: "
            f"load it with attnlab.models.load({str(directory)!r})"
        )
    if is_run(directory):
        path = checkpoint_dir(directory)
        verify(path)
        directory = path
    return SavableModel.load(directory, map_location)


def read_model_config(directory: str | Path) -> ModelConfig:
    """The config of the model saved in ``directory`` (its ``config.json``), without its weights."""
    kind, config = read_config(directory)
    return model_class(kind).config_class.from_dict(config)
