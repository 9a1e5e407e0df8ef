"""What an audit is about: a validated description of the model (sizes in the notes' symbols).

Symbols: ``d = d_model``, ``h`` heads, ``h_kv`` key/value heads (GQA; ``h_kv = h`` is plain
multi-head attention, ``h_kv = 1`` is MQA), ``d_k = d_v = d / h``, ``f = d_ff``, ``L`` layers,
``V`` vocabulary, ``n_ctx = max_len``. Every audit validates its sizes here, so a bad size is a
``ValueError`` naming the argument and its value (the CLI turns it into exit status 2).
"""

from __future__ import annotations

import dataclasses
import numbers

MODELS = ("encoder-layer", "decoder-layer", "transformer", "gpt", "bert")
NORMS = ("post", "pre")
ACTIVATIONS = ("relu", "gelu")


def positive_int(name: str, value) -> int:
    """Return ``value`` as an ``int`` if it is a positive integer, else raise ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_choice(name: str, value, choices: tuple) -> str:
    """Raise ``ValueError`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class Arch:
    """The sizes every audit shares, validated on construction.

    Attributes: model (one of :data:`MODELS`), d_model ``d``, heads ``h``, d_ff ``f``, layers ``L``,
    kv_heads ``h_kv`` (``None`` means ``h``), norm "post"|"pre", bias, activation, vocab ``V``
    (``None``: no embeddings or logits, except for whole models, which need one), max_len ``n_ctx``.
    """

    model: str = "encoder-layer"
    d_model: int = 512
    heads: int = 8
    d_ff: int = 2048
    layers: int = 1
    kv_heads: int | None = None
    norm: str = "post"
    bias: bool = True
    activation: str = "relu"
    vocab: int | None = None
    max_len: int = 512

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)
        check_choice("model", self.model, MODELS)
        for name in ("d_model", "heads", "d_ff", "layers", "max_len"):
            set_(name, positive_int(name, getattr(self, name)))
        if self.kv_heads is not None:
            set_("kv_heads", positive_int("kv_heads", self.kv_heads))
        if self.vocab is not None:
            set_("vocab", positive_int("vocab", self.vocab))
        check_choice("norm", self.norm, NORMS)
        check_choice("activation", self.activation, ACTIVATIONS)
        if self.d_model % self.heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by heads={self.heads} "
                f"(each head needs d_k = d_model / heads)"
            )
        if self.heads % self.h_kv:
            raise ValueError(
                f"heads={self.heads} is not divisible by kv_heads={self.h_kv} "
                f"(each key/value head serves heads / kv_heads query heads)"
            )
        if self.model in ("transformer", "gpt", "bert") and self.vocab is None:
            raise ValueError(f"model {self.model!r} needs a vocabulary size: pass vocab (--vocab)")
        # what the engine's whole models can express
        if self.model == "gpt":  # GPT blocks are pre-norm with a GELU MLP, whatever the defaults say
            set_("norm", "pre")
            set_("activation", "gelu")
            if not self.bias:
                raise ValueError("model 'gpt' has biases in every linear layer; bias=False does not apply")
        if self.model == "transformer" and (self.h_kv != self.heads or not self.bias):
            raise ValueError(
                "model 'transformer' has standard multi-head attention with biases; "
                "kv_heads and bias=False apply to encoder-layer, decoder-layer and gpt"
            )
        if self.model == "bert" and (self.h_kv != self.heads or not self.bias):
            raise ValueError(
                "model 'bert' has standard multi-head attention with biases; "
                "kv_heads and bias=False do not apply"
            )
        if self.model == "bert" and self.norm != "post":
            raise ValueError("model 'bert' is post-norm; norm='pre' does not apply")

    @property
    def h_kv(self) -> int:
        """Key/value heads ``h_kv`` (``h`` unless GQA/MQA)."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def d_k(self) -> int:
        """Head width ``d_k = d_v = d / h``."""
        return self.d_model // self.heads
