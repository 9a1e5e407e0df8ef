"""BERT: the encoder-only Transformer (the model only).

    X_0 = LN(E_tok[x] + P[0:T] + E_type[s])                          (embeddings, post-normed)
    U   = LN_1(X + MHA(X)),   X' = LN_2(U + FFN_GELU(U))               (each of L post-norm layers)
    pooled = tanh(W_p X_L[CLS] + b_p)                                 (BERT's pooler)

The layers are :class:`attnlab.nn.EncoderLayer` (``norm="post"``, ``activation="gelu"``). The
Hugging Face checkpoint mapping lives in :mod:`attnlab.models.hf.bert` (``attnlab.models.load(DIR)``
reads a BERT checkpoint folder through it), the named pretrained models in
:mod:`attnlab.models.pretrained`, and sentence embeddings (pooling, :func:`embed`, the packed
fast path) in :mod:`attnlab.models.sentence`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor, nn

from attnlab._checks import debug_checks, positive_float
from attnlab.models.base import (
    ModelConfig,
    SavableModel,
    check_choice,
    check_positive,
    check_probability,
    padding_keep,
)
from attnlab.models.transformer import bad_ids_named
from attnlab.nn.config import BlockConfig
from attnlab.nn.hooks import HookPoints
from attnlab.nn.layers import EncoderLayer, LayerNorm
from attnlab.nn.positions import LearnedPositions

POOLINGS = ("mean", "cls", "max", "mean_sqrt_len")


@dataclasses.dataclass(frozen=True)
class BertConfig(ModelConfig):
    """Config of :class:`BertEncoder` (defaults: BERT-base). The last three fields say how
    :func:`embed` makes a sentence embedding: ``pooling`` over tokens, ``normalize`` (L2) and
    ``max_seq_length`` (tokens kept per sentence; None = ``max_len``)."""

    vocab_size: int
    d_model: int = 768
    num_heads: int = 12
    num_layers: int = 12
    d_ff: int = 3072
    max_len: int = 512
    type_vocab_size: int = 2
    norm_eps: float = 1e-12
    activation: str = "gelu"
    dropout: float = 0.0
    pad_id: int = 0
    pooler: bool = True
    pooling: str = "mean"
    normalize: bool = True
    max_seq_length: int | None = None

    def __post_init__(self) -> None:
        check_positive(
            self, "vocab_size", "d_model", "num_heads", "num_layers", "d_ff", "max_len", "type_vocab_size"
        )
        if self.d_model % self.num_heads:
            raise ValueError(
                f"BertConfig.d_model={self.d_model} is not divisible by num_heads={self.num_heads}"
            )
        check_choice(self, "activation", ("gelu", "gelu_tanh", "relu"))
        check_choice(self, "pooling", POOLINGS)
        positive_float("BertConfig.norm_eps", self.norm_eps)
        check_probability(self, "dropout")
        if not (isinstance(self.pad_id, int) and 0 <= self.pad_id < self.vocab_size):
            raise ValueError(f"BertConfig.pad_id must be in [0, {self.vocab_size}), got {self.pad_id!r}")
        if self.max_seq_length is not None:
            check_positive(self, "max_seq_length")
            if self.max_seq_length > self.max_len:
                raise ValueError(
                    f"BertConfig.max_seq_length={self.max_seq_length} exceeds max_len={self.max_len}"
                )

    def audit_fields(self) -> dict[str, Any]:
        return {
            "model": "bert",
            "block": self.block,
            "layers": self.num_layers,
            "vocab": self.vocab_size,
            "max_len": self.max_len,
            "type_vocab": self.type_vocab_size,
            "pooler": bool(self.pooler),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BertConfig:
        """Inverse of ``to_dict``; ``eps`` (the name before it was ``norm_eps``) is read as it."""
        if isinstance(data, dict) and "eps" in data and "norm_eps" not in data:
            data = {("norm_eps" if k == "eps" else k): v for k, v in data.items()}
        return super().from_dict(data)

    @property
    def block(self) -> BlockConfig:
        """The :class:`~attnlab.nn.BlockConfig` of every layer: post-norm LayerNorm with ``norm_eps``."""
        return BlockConfig(
            self.d_model,
            self.num_heads,
            self.d_ff,
            norm_eps=self.norm_eps,
            activation=self.activation,
            dropout=self.dropout,
            positions="learned",
        )


@dataclasses.dataclass
class BertOutput:
    """What :meth:`BertEncoder.forward` returns: ``last_hidden_state [B, T, d_model]`` (X_L) and
    ``pooler_output [B, d_model]`` (tanh(W_p X_L[CLS] + b_p); None without a pooler), read as
    attributes, as ``transformers``' output is. Everything else is a hook point."""

    last_hidden_state: Tensor
    pooler_output: Tensor | None = None


def check_id_tensor(
    name: str, x: Tensor, shape: tuple[int, ...] | None, bound: int, *, values: bool = True
) -> None:
    """Raise ``ValueError`` unless ``x`` is an integer tensor ``[B, T]`` (of ``shape`` if given) of ids in
    ``[0, bound)``; the range (one host read) only when ``values`` or ``ATTNLAB_DEBUG_CHECKS=1``."""
    if not isinstance(x, Tensor) or x.dtype not in (torch.int64, torch.int32) or x.dim() != 2:
        raise ValueError(
            f"{name} must be an integer tensor [B, T], got "
            f"{list(x.shape) if isinstance(x, Tensor) else type(x).__name__}"
        )
    if shape is not None and tuple(x.shape) != shape:
        raise ValueError(f"{name} has shape {list(x.shape)} but input_ids has shape {list(shape)}")
    if (values or debug_checks()) and x.numel():
        lo, hi = torch.stack([x.min(), x.max()]).tolist()
        if lo < 0 or hi >= bound:
            raise ValueError(f"{name} holds ids outside [0, {bound}): min {lo}, max {hi}")


class BertEncoder(HookPoints, SavableModel):
    """Encoder-only Transformer with learned and token-type positions (kind ``"bert"``).

    Submodules: ``word_embeddings``, ``positions`` (:class:`attnlab.nn.LearnedPositions`),
    ``token_type_embeddings``, ``embed_norm``, ``layers`` (post-norm :class:`attnlab.nn.EncoderLayer`),
    ``pooler`` (``nn.Linear`` or None). Hook points (``forward`` and ``encode``; the packed path
    has none): ``embed`` and ``layers.{i}.*``.
    """

    POINTS = {"embed": "[B, T, d_model]"}  # X_0, the normed embeddings

    kind = "bert"
    config_class = BertConfig
    ENCODER_ONLY = True
    STACK = "layers"
    TOKEN_TEXT = "pieces"  # WordPiece: ids shown as their pieces (##ing)

    @classmethod
    def from_audit(cls, a) -> dict[str, Any]:
        return {
            "vocab_size": a.vocab,
            "d_model": a.d_model,
            "num_heads": a.heads,
            "num_layers": a.layers,
            "d_ff": a.d_ff,
            "max_len": a.max_len,
            "type_vocab_size": a.type_vocab,
            "norm_eps": a.block.norm_eps,
            "activation": a.block.activation,
            "pooler": a.pooler,
        }

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        if not isinstance(config, BertConfig):
            raise ValueError(f"BertEncoder needs a BertConfig, got {type(config).__name__}")
        self.config = c = config
        self.word_embeddings = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.positions = LearnedPositions(c.max_len, c.d_model)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.d_model)
        self.embed_norm = LayerNorm(c.d_model, eps=c.norm_eps)
        self.drop = nn.Dropout(c.dropout)
        self.layers = nn.ModuleList(EncoderLayer(c.block) for _ in range(c.num_layers))
        self.pooler = nn.Linear(c.d_model, c.d_model) if c.pooler else None

    # -- the forward pass ---------------------------------------------------------------------
    def _inputs(
        self, input_ids: Tensor, attention_mask: Tensor | None, token_type_ids: Tensor | None
    ) -> Tensor | None:
        """Check the inputs (shapes; the ids' range is read only where an embedding refuses one, see
        :meth:`encode`); return the key mask ``[B, 1, T]`` (None without an attention mask)."""
        c = self.config
        check_id_tensor("input_ids", input_ids, None, c.vocab_size, values=False)
        B, T = input_ids.shape
        if T == 0:
            raise ValueError(f"input_ids is empty (shape {[B, T]}): give at least one token per row")
        if T > c.max_len:
            raise ValueError(f"input_ids has T={T} tokens but the model has max_len={c.max_len} positions")
        if token_type_ids is not None:
            check_id_tensor("token_type_ids", token_type_ids, (B, T), c.type_vocab_size, values=False)
        if attention_mask is None:
            return None
        keep = padding_keep(attention_mask, (B, T), "input_ids")  # [B, T]: a real token in every row
        return keep[:, None, :]  # [B, 1, T]: every query sees the real keys

    def embed_tokens(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """X_0 = LN(E_tok[x] + P[0:T] + E_type[s]): ``input_ids [B, T] -> [B, T, d_model]``."""
        x = self.word_embeddings(input_ids)  # [B, T, d]
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]  # every token of segment 0
        else:
            x = x + self.token_type_embeddings(token_type_ids)  # [B, T, d]
        x = self.positions(x)  # + P[0:T]
        return self._at("embed", self.drop(self.embed_norm(x)))  # [B, T, d]

    def _hook_children(self) -> dict:
        return {f"layers.{i}": layer for i, layer in enumerate(self.layers)}

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> BertOutput:
        """Run the encoder and the pooler.

        Args:
            input_ids: token ids ``[B, T]``; attention_mask: ``[B, T]`` 1/True = real token (keys at
                0 are masked for every query); token_type_ids: segment ids ``[B, T]`` (default 0).
        Returns:
            :class:`BertOutput`: ``last_hidden_state [B, T, d_model]`` and ``pooler_output [B, d_model]``
            (None without a pooler). Each layer's output and attention weights are the hook points
            ``layers.{i}.resid_post`` and ``layers.{i}.self_attn.weights`` (:func:`attnlab.nn.capture`).
        """
        x = self.encode(input_ids, attention_mask, token_type_ids)  # [B, T, d]
        pooled = torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else None  # [B, d]
        return BertOutput(x, pooled)

    def encode(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        """The last hidden state only: ``[B, T] -> [B, T, d_model]`` (for sentence embeddings see
        :func:`attnlab.models.sentence.encode_packed`, which skips padding)."""
        c = self.config
        mask = self._inputs(input_ids, attention_mask, token_type_ids)
        checks = [lambda: check_id_tensor("input_ids", input_ids, None, c.vocab_size)]
        if token_type_ids is not None:
            checks.append(lambda: check_id_tensor("token_type_ids", token_type_ids, None, c.type_vocab_size))
        with bad_ids_named(*checks):  # an id out of range is named when the embedding refuses it
            x = self.embed_tokens(input_ids, token_type_ids)  # [B, T, d]
        for layer in self.layers:  # empty_rows="zero": padding_keep left every row a real key
            x = layer(x, mask, empty_rows="zero")  # [B, T, d]
        return x
