"""A decoder-only Transformer (GPT), built from :mod:`attnlab.nn`.

  h_0 = Emb(ids) (+ P[0:T] with learned positions; RoPE rotates Q and K inside attention instead)
  h_l = h_{l-1} + MHA(LN_1(h_{l-1}))  then  h_l = h_l + MLP(LN_2(h_l))     (pre-norm blocks, causal)
  logits = LN_f(h_L) W_E^T                                                 (tied output weights)

The MLP is Linear -> GELU -> Linear; ``num_kv_heads`` gives grouped-query attention. The block is
:class:`attnlab.nn.DecoderLayer` without cross-attention (its ``norm3`` is the MLP's LayerNorm).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from attnlab.models.base import ModelConfig, SavableModel, check_choice, check_positive
from attnlab.models.transformer import check_dropout, check_ids
from attnlab.nn.layers import DecoderLayer
from attnlab.nn.multihead import KVCache
from attnlab.nn.positions import LearnedPositions


@dataclasses.dataclass(frozen=True)
class GPTConfig(ModelConfig):
    """Sizes of a GPT. ``positions``: ``"learned"`` or ``"rope"``; ``num_kv_heads``: GQA (None = h)."""

    vocab_size: int
    d_model: int = 128
    num_heads: int = 4
    num_layers: int = 4
    d_ff: int = 512
    max_len: int = 256
    positions: str = "learned"
    num_kv_heads: int | None = None
    tie_weights: bool = True
    dropout: float = 0.0
    pad_id: int = 0

    def __post_init__(self) -> None:
        check_positive(self, "vocab_size", "d_model", "num_heads", "num_layers", "d_ff", "max_len")
        if self.d_model % self.num_heads:
            raise ValueError(
                f"GPTConfig.d_model={self.d_model} is not divisible by num_heads={self.num_heads}"
            )
        if self.num_kv_heads is not None:
            check_positive(self, "num_kv_heads")
            if self.num_heads % self.num_kv_heads:
                raise ValueError(
                    f"GPTConfig.num_heads={self.num_heads} is not divisible by "
                    f"num_kv_heads={self.num_kv_heads}"
                )
        check_choice(self, "positions", ("learned", "rope"))
        if self.positions == "rope" and (self.d_model // self.num_heads) % 2:
            raise ValueError(
                f"GPTConfig: RoPE needs an even head width, got d_model/num_heads = "
                f"{self.d_model // self.num_heads}"
            )
        check_dropout(self)
        if not isinstance(self.pad_id, int) or not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"GPTConfig.pad_id={self.pad_id!r} must lie in 0..{self.vocab_size - 1}")


@dataclasses.dataclass
class GPTState:
    """Incremental-decoding state: one KV cache per block, the number of positions consumed and
    the logits of the last one, ``last_logits [B, V]`` (the prediction of the next token)."""

    caches: list[KVCache]
    length: int
    last_logits: torch.Tensor


class GPT(SavableModel):
    """Decoder-only Transformer: ``forward(ids [B, T]) -> logits [B, T, V]`` (causal)."""

    kind = "gpt"
    config_class = GPTConfig

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = c = config
        self.tok_embed = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_embed = LearnedPositions(c.max_len, c.d_model) if c.positions == "learned" else None
        self.dropout = nn.Dropout(c.dropout)
        rope = "rope" if c.positions == "rope" else None
        self.blocks = nn.ModuleList(
            DecoderLayer(
                c.d_model,
                c.num_heads,
                c.d_ff,
                norm="pre",
                activation="gelu",
                dropout=c.dropout,
                num_kv_heads=c.num_kv_heads,
                cross_attention=False,
                positions=rope,
            )
            for _ in range(c.num_layers)
        )
        self.norm = nn.LayerNorm(c.d_model)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.apply(self._init)  # GPT-2: N(0, 0.02) weights, zero biases
        if c.tie_weights:
            self.lm_head.weight = self.tok_embed.weight  # [V, d]

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, 0.0, 0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def _hidden_in(self, ids: torch.Tensor, offset: int) -> torch.Tensor:
        x = self.tok_embed(ids)  # [B, T, d]
        if self.pos_embed is not None:
            x = self.pos_embed(x, offset)  # [B, T, d]
        return self.dropout(x)

    def forward(self, ids: torch.Tensor, return_attention: bool = False):
        """``ids [B, T]`` -> ``logits [B, T, V]``; logits at t depend on ``ids[:, :t+1]`` only.

        With ``return_attention`` also a list of the blocks' weights ``[B, h, T, T]``.
        """
        c = self.config
        check_ids("ids", ids, c.vocab_size, c.max_len)
        x = self._hidden_in(ids, 0)  # [B, T, d]
        weights = []
        for block in self.blocks:
            if return_attention:
                x, w, _ = block(x, is_causal=True, need_weights=True)
                weights.append(w)
            else:
                x = block(x, is_causal=True)
        logits = self.lm_head(self.norm(x))  # [B, T, V]
        return (logits, weights) if return_attention else logits

    # ------------------------------------------------------------------------------ decoding protocol
    def _run(self, ids: torch.Tensor, state: GPTState) -> torch.Tensor:
        x = self._hidden_in(ids, state.length)  # [B, T_new, d]
        for block, cache in zip(self.blocks, state.caches):
            x = block(x, is_causal=True, cache=cache)  # lower-right causal over the cache
        state.length += ids.shape[1]
        return self.lm_head(self.norm(x[:, -1]))  # [B, V]

    def start(self, prompt: torch.Tensor) -> GPTState:
        """Consume ``prompt [B, P]`` into fresh KV caches; ``state.last_logits [B, V]`` predicts token P."""
        c = self.config
        check_ids("prompt", prompt, c.vocab_size, c.max_len)
        state = GPTState([KVCache() for _ in self.blocks], 0, None)
        state.last_logits = self._run(prompt, state)
        return state

    def step(self, tokens: torch.Tensor, state: GPTState) -> tuple[torch.Tensor, GPTState]:
        """Feed ``tokens [B]`` at position ``state.length`` -> ``(logits [B, V], state)``."""
        c = self.config
        check_ids("tokens", tokens, c.vocab_size, c.max_len, ndim=1)
        if state.length >= c.max_len:
            raise ValueError(
                f"cannot feed position {state.length}: the sequence would exceed max_len={c.max_len}"
            )
        state.last_logits = self._run(tokens[:, None], state)
        return state.last_logits, state

    def reorder(self, state: GPTState, index: torch.Tensor) -> GPTState:
        """Keep batch rows ``index [B']`` of the state (beam search)."""
        for cache in state.caches:
            cache.reorder(index)
        state.last_logits = state.last_logits.index_select(0, index)
        return state
