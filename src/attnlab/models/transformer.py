"""The original encoder-decoder Transformer (Vaswani et al. 2017), built from :mod:`attnlab.nn`.

  memory = Encoder(Emb_src(src) sqrt(d_model) + PE)
  logits = Decoder(Emb_tgt(tgt_in) sqrt(d_model) + PE, memory) W_out + b_out

Post-norm by default (pre-norm by option, which adds a final LayerNorm to each stack), sinusoidal
positions, PAD source keys masked, causal decoder self-attention. With
``share_embeddings`` the source embedding, target embedding and output projection share one
matrix (the paper's choice; needs one vocabulary). Incremental decoding (``start``/``step``/
``reorder``) keeps a KV cache per decoder layer and the projected memory per cross-attention.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from attnlab._checks import debug_checks
from attnlab.models.base import ModelConfig, SavableModel, check_choice, check_positive, check_probability
from attnlab.nn.config import ACTIVATIONS, NORM_PLACES, BlockConfig
from attnlab.nn.hooks import HookPoints
from attnlab.nn.layers import Decoder, Encoder
from attnlab.nn.multihead import KVCache
from attnlab.nn.positions import SinusoidalPositions


def check_ids(name: str, ids: torch.Tensor, vocab: int, max_len: int, ndim: int = 2) -> None:
    """Raise ``ValueError`` unless ``ids`` is an integer tensor of rank ``ndim`` with (for rank 2) a
    length of 1 to ``max_len``: shapes only, no host sync. The ids' range (``0..vocab-1``,
    :func:`check_id_range`) is read under ``ATTNLAB_DEBUG_CHECKS=1``; otherwise :func:`bad_ids_named`
    names an id the embedding refuses."""
    if not torch.is_tensor(ids) or ids.dtype.is_floating_point or ids.dtype == torch.bool or ids.is_complex():
        raise ValueError(
            f"{name} must be an integer tensor of token ids, got "
            f"{type(ids).__name__} {getattr(ids, 'dtype', '')}".rstrip()
        )
    if ids.ndim != ndim:
        raise ValueError(
            f"{name} must have rank {ndim} ({'[B, T]' if ndim == 2 else '[B]'}), got shape {list(ids.shape)}"
        )
    if ndim == 2 and ids.shape[1] > max_len:
        raise ValueError(f"{name} has length {ids.shape[1]}, longer than max_len={max_len}")
    if ndim == 2 and ids.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {list(ids.shape)})")
    if debug_checks():
        check_id_range(name, ids, vocab)


def check_id_range(name: str, ids: torch.Tensor, vocab: int) -> None:
    """A ``ValueError`` naming ``name`` and the first bad id unless every id of ``ids`` lies in
    ``0..vocab-1``. One host read: for the edges (a prompt, a CLI's input) and the error path."""
    if ids.numel():
        lo, hi = (int(v) for v in torch.aminmax(ids))  # the read-back
        if lo < 0 or hi >= vocab:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"{name} has token id {bad} outside the vocabulary 0..{vocab - 1} (size {vocab})"
            )


@contextlib.contextmanager
def bad_ids_named(*checks: Callable[[], None]):
    """Run the body (a forward, a decode step); when an embedding refuses an id (``IndexError``, as
    on the CPU) run ``checks`` (:func:`check_id_range` of each input), which raise the ``ValueError``
    naming the argument and the id. The values are read only on the way to the error."""
    try:
        yield
    except IndexError:
        for check in checks:
            check()
        raise


@dataclasses.dataclass(frozen=True)
class TransformerConfig(ModelConfig):
    """Sizes of an encoder-decoder Transformer (defaults: the paper's base model). ``norm_place`` is
    the norm's place (``post`` | ``pre``, :class:`~attnlab.nn.BlockConfig`'s name; a ``config.json``
    that calls it ``norm`` still loads); :attr:`block` is the layers' BlockConfig."""

    src_vocab: int
    tgt_vocab: int
    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    max_len: int = 512
    norm_place: str = "post"
    activation: str = "relu"
    dropout: float = 0.1
    share_embeddings: bool = False
    pad_id: int = 0

    def __post_init__(self) -> None:
        check_positive(
            self,
            "src_vocab",
            "tgt_vocab",
            "d_model",
            "num_heads",
            "d_ff",
            "num_encoder_layers",
            "num_decoder_layers",
            "max_len",
        )
        if self.d_model % self.num_heads:
            raise ValueError(
                f"TransformerConfig.d_model={self.d_model} is not divisible by num_heads={self.num_heads}"
            )
        check_choice(self, "norm_place", NORM_PLACES)
        check_choice(self, "activation", ACTIVATIONS)
        check_probability(self, "dropout")
        if self.share_embeddings and self.src_vocab != self.tgt_vocab:
            raise ValueError(
                f"TransformerConfig.share_embeddings needs src_vocab == tgt_vocab, got "
                f"{self.src_vocab} and {self.tgt_vocab}"
            )
        if not isinstance(self.pad_id, int) or not 0 <= self.pad_id < min(self.src_vocab, self.tgt_vocab):
            raise ValueError(f"TransformerConfig.pad_id={self.pad_id!r} must be an id of both vocabularies")

    def audit_fields(self) -> dict[str, Any]:
        if self.num_encoder_layers != self.num_decoder_layers:
            raise ValueError(
                f"the audit's transformer has L encoder and L decoder layers; this config has "
                f"{self.num_encoder_layers} and {self.num_decoder_layers}"
            )
        if self.src_vocab != self.tgt_vocab:
            raise ValueError(
                f"the audit's transformer has one vocabulary V; this config has src_vocab={self.src_vocab} "
                f"and tgt_vocab={self.tgt_vocab}"
            )
        return {
            "model": "transformer",
            "block": self.block,
            "layers": self.num_encoder_layers,
            "vocab": self.src_vocab,
            "max_len": self.max_len,
            "share_embeddings": bool(self.share_embeddings),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TransformerConfig:
        """Inverse of ``to_dict``; ``norm`` (the name before it was ``norm_place``) is read as it."""
        if isinstance(data, dict) and "norm" in data and "norm_place" not in data:
            data = {("norm_place" if k == "norm" else k): v for k, v in data.items()}
        return super().from_dict(data)

    @property
    def block(self) -> BlockConfig:
        """The :class:`~attnlab.nn.BlockConfig` of every layer."""
        return BlockConfig(
            self.d_model,
            self.num_heads,
            self.d_ff,
            norm_place=self.norm_place,
            activation=self.activation,
            dropout=self.dropout,
            positions="sinusoidal",
        )


@dataclasses.dataclass
class TransformerState:
    """Incremental-decoding state: encoder memory ``[B, S, d]``, its key mask ``[B, 1, S]`` (or
    None), one self-attention cache and one static cross-attention cache per decoder layer, and
    the number of target positions consumed."""

    memory: torch.Tensor
    memory_mask: torch.Tensor | None
    caches: list[KVCache]
    memory_caches: list[KVCache]
    length: int = 0
    last_logits: torch.Tensor | None = None  # seq2seq: the first step consumes BOS, so none yet


class Transformer(HookPoints, SavableModel):
    """Encoder-decoder Transformer: ``forward(src [B, S], tgt_in [B, T]) -> logits [B, T, V_tgt]``.

    Hook points: ``src_embed``, ``tgt_embed``, ``encoder.layers.{i}.*``, ``decoder.layers.{i}.*``
    (with ``cross_attn.*`` and ``resid_cross``).
    """

    POINTS = {"src_embed": "[B, S, d_model]", "tgt_embed": "[B, T, d_model]"}

    kind = "transformer"
    config_class = TransformerConfig
    OPTIONS = {"d_model": 64, "heads": 4, "d_ff": None, "layers": 2, "dropout": 0.0, "max_len": 256}

    @classmethod
    def from_options(cls, vocab_size: int, **o) -> TransformerConfig:
        return TransformerConfig(
            vocab_size,
            vocab_size,
            d_model=o["d_model"],
            num_heads=o["heads"],
            d_ff=o["d_ff"] or 4 * o["d_model"],
            num_encoder_layers=o["layers"],
            num_decoder_layers=o["layers"],
            dropout=o["dropout"],
            max_len=o["max_len"],
        )

    @classmethod
    def from_audit(cls, a) -> dict[str, Any]:
        return {
            "src_vocab": a.vocab,
            "tgt_vocab": a.vocab,
            "d_model": a.d_model,
            "num_heads": a.heads,
            "d_ff": a.d_ff,
            "num_encoder_layers": a.layers,
            "num_decoder_layers": a.layers,
            "max_len": a.max_len,
            "norm_place": a.block.norm_place,
            "activation": a.block.activation,
            "dropout": 0.0,
            "share_embeddings": a.share_embeddings,
        }

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = c = config
        self.src_embed = nn.Embedding(c.src_vocab, c.d_model)
        self.tgt_embed = self.src_embed if c.share_embeddings else nn.Embedding(c.tgt_vocab, c.d_model)
        self.positions = SinusoidalPositions(c.max_len, c.d_model)
        self.dropout = nn.Dropout(c.dropout)
        self.encoder = Encoder(c.num_encoder_layers, c.block)
        self.decoder = Decoder(c.num_decoder_layers, c.block)
        self.generator = nn.Linear(c.d_model, c.tgt_vocab)
        for p in self.parameters():  # Glorot/Xavier for every matrix, as the Annotated Transformer does
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        if c.share_embeddings:
            self.generator.weight = self.tgt_embed.weight  # [V, d]: one matrix in three places

    def _hook_children(self) -> dict:
        return {"encoder": self.encoder, "decoder": self.decoder}

    # ------------------------------------------------------------------------------ pieces
    def _embed(self, embedding: nn.Embedding, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
        x = embedding(ids) * math.sqrt(self.config.d_model)  # [B, T, d]
        return self.dropout(self.positions(x, offset))  # [B, T, d]

    def _src_mask(self, src: torch.Tensor) -> torch.Tensor | None:
        """``src [B, S]`` -> the key mask ``[B, 1, S]`` of its real tokens (None: no padding); a row
        that is all padding is a ``ValueError`` naming it (it leaves the encoder nothing to read)."""
        pad = self.config.pad_id
        real = src != pad  # [B, S]
        if bool(real.all()):
            return None
        empty = ~real.any(dim=1)  # [B]
        if bool(empty.any()):
            raise ValueError(f"src row {int(empty.nonzero()[0, 0])} is all padding (pad_id {pad})")
        return real[:, None, :]  # [B, 1, S]

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``src [B, S]`` -> ``(memory [B, S, d], src key mask [B, 1, S] or None)``."""
        c = self.config
        check_ids("src", src, c.src_vocab, c.max_len)
        mask = self._src_mask(src)
        with bad_ids_named(lambda: check_id_range("src", src, c.src_vocab)):
            x = self._at("src_embed", self._embed(self.src_embed, src))  # [B, S, d]
        return self.encoder(x, mask), mask  # [B, S, d]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: the decoder reads the gold previous tokens ``tgt_in`` all at once.

        Args:
            src: ``[B, S]`` source ids (PAD-padded on the right). tgt_in: ``[B, T]`` decoder inputs
                (BOS y_1 .. y_{T-1}).
        Returns:
            ``logits [B, T, V_tgt]``. The attention weights are hook points: encoder self-attention
            ``encoder.layers.{i}.self_attn.weights [B, h, S, S]``, decoder self-attention
            ``decoder.layers.{i}.self_attn.weights [B, h, T, T]``, cross-attention
            ``decoder.layers.{i}.cross_attn.weights [B, h, T, S]`` (read with :func:`attnlab.nn.capture`).
        """
        c = self.config
        check_ids("tgt_in", tgt_in, c.tgt_vocab, c.max_len)
        if tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"tgt_in has batch {tgt_in.shape[0]} but src has batch {src.shape[0]}")
        memory, mem_mask = self.encode(src)
        # target PADs need no mask: they sit to the right of the real tokens, where the causal mask
        # already hides them from every real position (and the loss ignores the PAD positions)
        with bad_ids_named(lambda: check_id_range("tgt_in", tgt_in, c.tgt_vocab)):
            y = self._at("tgt_embed", self._embed(self.tgt_embed, tgt_in))  # [B, T, d]
        y = self.decoder(y, memory, memory_mask=mem_mask, is_causal=True)  # [B, T, d]
        return self.generator(y)  # [B, T, V_tgt]

    # ------------------------------------------------------------------------------ decoding protocol
    def start(self, src: torch.Tensor) -> TransformerState:
        """Encode ``src [B, S]`` once; the returned state carries the memory and empty caches."""
        memory, mask = self.encode(src)
        n = len(self.decoder.layers)
        return TransformerState(
            memory, mask, [KVCache() for _ in range(n)], [KVCache(static=True) for _ in range(n)]
        )

    def step(self, tokens: torch.Tensor, state: TransformerState) -> tuple[torch.Tensor, TransformerState]:
        """Feed one token per sequence, ``tokens [B]``, at position ``state.length``.

        Returns:
            ``(logits [B, V_tgt], state)`` with the caches extended by one position.
        """
        c = self.config
        check_ids("tokens", tokens, c.tgt_vocab, c.max_len, ndim=1)
        if tokens.shape[0] != state.memory.shape[0]:
            raise ValueError(
                f"tokens has batch {tokens.shape[0]} but the state has batch {state.memory.shape[0]}"
            )
        if state.length >= c.max_len:
            raise ValueError(f"cannot decode position {state.length}: max_len={c.max_len}")
        with bad_ids_named(lambda: check_id_range("tokens", tokens, c.tgt_vocab)):
            y = self._embed(self.tgt_embed, tokens[:, None], offset=state.length)  # [B, 1, d]
        y = self._at("tgt_embed", y)
        y = self.decoder(
            y,
            state.memory,
            memory_mask=state.memory_mask,
            is_causal=True,
            caches=state.caches,
            memory_caches=state.memory_caches,
        )  # [B, 1, d]
        state.length += 1
        logits = self.generator(y[:, 0])  # [B, V_tgt]
        state.last_logits = logits
        return logits, state

    def reorder(self, state: TransformerState, index: torch.Tensor) -> TransformerState:
        """Keep batch rows ``index [B']`` of the state (beam search)."""
        for cache in (*state.caches, *state.memory_caches):
            cache.reorder(index)
        state.memory = state.memory.index_select(0, index)
        if state.memory_mask is not None:
            state.memory_mask = state.memory_mask.index_select(0, index)
        if state.last_logits is not None:
            state.last_logits = state.last_logits.index_select(0, index)
        return state
