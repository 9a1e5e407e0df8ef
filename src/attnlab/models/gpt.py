"""A decoder-only Transformer (GPT-2, Llama, Qwen2, Mistral, ... as configs), built from :mod:`attnlab.nn`.

  h_0 = Emb(ids) (+ P[0:T] with learned or sinusoidal positions; RoPE and ALiBi act inside attention)
  h_l = h_{l-1} + MHA(N_1(h_{l-1}))  then  h_l = h_l + FFN(N_2(h_l))      (pre-norm blocks, causal)
  logits = N_f(h_L) W_out                                                  (W_out = W_E^T when tied)

Each block is :class:`attnlab.nn.DecoderLayer` without cross-attention (its ``norm3`` is the FFN's
norm), described by :attr:`GPTConfig.block`, a :class:`~attnlab.nn.BlockConfig`, so one class is
every family:

============  =================================================================================
GPT-2         positions="learned", norm="layer", activation="gelu_tanh" (the defaults otherwise)
Llama 2/3     positions="rope", rope_layout="half", rope_base=theta, norm="rms", norm_eps=1e-5/1e-6,
              ffn="glu", activation="silu", qkv_bias=out_bias=ffn_bias=False, num_kv_heads (GQA),
              tie_weights=False (Llama 3.2 1B/3B tie)
Qwen2         as Llama with qkv_bias=True;  Mistral: as Llama with window=W
NoPE / paper  positions="none" / "sinusoidal" / "alibi"; ffn="none" for attention-only models
============  =================================================================================

The defaults are those of attnlab's GPT before the block config existed (learned positions,
LayerNorm, exact GELU), so every ``config.json`` saved then (its block fields flat) loads as the
same model.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from attnlab.models.base import ModelConfig, SavableModel, check_positive, padding_keep
from attnlab.models.gpt_decode import DecodeEngine, unsupported
from attnlab.models.transformer import bad_ids_named, check_id_range, check_ids
from attnlab.nn.config import BlockConfig
from attnlab.nn.hooks import HookPoints
from attnlab.nn.layers import DecoderLayer, make_cache, make_norm
from attnlab.nn.multihead import KVCache
from attnlab.nn.positions import LearnedPositions, SinusoidalPositions
from attnlab.nn.static_cache import StaticKVCache

# positions a StaticKVCache allocates beyond the prompt when the caller does not say how many
SPARE_POSITIONS = 64

# A GPT's block unless told otherwise: the block attnlab's GPT had before BlockConfig existed
# (learned positions, LayerNorm, exact GELU), so every config.json saved then loads as the same model.
GPT_BLOCK = BlockConfig(
    d_model=128, num_heads=4, d_ff=512, norm_place="pre", activation="gelu", positions="learned"
)
_BLOCK_NAMES = frozenset(f.name for f in dataclasses.fields(BlockConfig)) | {"head_dim", "kv_heads"}


@dataclasses.dataclass(frozen=True, init=False)
class GPTConfig(ModelConfig):
    """A GPT: sizes (``vocab_size``, ``num_layers``, ``max_len``), the head (``tie_weights``),
    ``pad_id``, and ``block``, the :class:`~attnlab.nn.BlockConfig` of every block (its
    ``norm_place`` is always ``"pre"``; default :data:`GPT_BLOCK`).

    Block fields may also be given by name, over ``block`` (``GPTConfig(11, d_model=16,
    num_heads=2)``), and are read through the config (``config.d_model`` is ``config.block.d_model``).
    """

    vocab_size: int
    num_layers: int = 4
    max_len: int = 256
    tie_weights: bool = True
    pad_id: int = 0
    block: BlockConfig = GPT_BLOCK

    def __init__(
        self,
        vocab_size: int,
        num_layers: int = 4,
        max_len: int = 256,
        tie_weights: bool = True,
        pad_id: int = 0,
        block: BlockConfig | dict | None = None,
        **block_fields,
    ) -> None:
        base = BlockConfig.from_dict(block) if isinstance(block, dict) else block or GPT_BLOCK
        if not isinstance(base, BlockConfig):
            raise ValueError(f"GPTConfig.block must be a BlockConfig, got {type(base).__name__}")
        unknown = sorted(set(block_fields) - _BLOCK_NAMES)
        if unknown:
            raise ValueError(f"GPTConfig has no field(s) {unknown}")
        try:
            base = base.replace(**block_fields, norm_place="pre")
        except ValueError as exc:
            raise ValueError(str(exc).replace("BlockConfig", "GPTConfig", 1)) from None
        for name, value in zip(
            ("vocab_size", "num_layers", "max_len", "tie_weights", "pad_id", "block"),
            (vocab_size, num_layers, max_len, tie_weights, pad_id, base),
        ):
            object.__setattr__(self, name, value)
        self.__post_init__()

    def __post_init__(self) -> None:
        check_positive(self, "vocab_size", "num_layers", "max_len")
        if not isinstance(self.pad_id, int) or not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"GPTConfig.pad_id={self.pad_id!r} must lie in 0..{self.vocab_size - 1}")

    def __getattr__(self, name: str):
        # only reached when normal lookup fails: the block's fields, read through the config
        if name in _BLOCK_NAMES:
            return getattr(object.__getattribute__(self, "block"), name)
        raise AttributeError(f"GPTConfig has no attribute {name!r}")

    def audit_fields(self) -> dict:
        return {
            "model": "gpt",
            "block": self.block,
            "layers": self.num_layers,
            "vocab": self.vocab_size,
            "max_len": self.max_len,
            "tie_head": bool(self.tie_weights),
        }

    @classmethod
    def from_dict(cls, data: dict) -> GPTConfig:
        """Inverse of ``to_dict`` (``block`` nested); a ``config.json`` written before the config held
        a block (its fields flat) reads as the same model."""
        if not isinstance(data, dict):
            raise ValueError(f"GPTConfig: the config must be a JSON object, got {type(data).__name__}")
        if "vocab_size" not in data:
            raise ValueError("GPTConfig is missing required field(s) ['vocab_size']")
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**fields)


def _padding_mask(attention_mask: torch.Tensor | None, ids: torch.Tensor) -> torch.Tensor | None:
    """``attention_mask [B, T]`` (1 = real token) -> ``[B, T, T]``, True where query i may read key j:
    j is a real token, or j = i (so that a query at a padding position is never left with no key)."""
    if attention_mask is None:
        return None
    keep = padding_keep(attention_mask, tuple(ids.shape))  # [B, T]: bool or 0/1 only, checked
    eye = torch.eye(ids.shape[1], dtype=torch.bool, device=ids.device)  # [T, T]
    return keep[:, None, :] | eye  # [B, T, T]


@dataclasses.dataclass
class GPTState:
    """Incremental-decoding state: one KV cache per block, the number of positions consumed, the
    logits of the last one, ``last_logits [B, V]`` (the prediction of the next token), and the
    :class:`~attnlab.models.gpt_decode.DecodeEngine` that runs the steps (None: the layers' own
    ``forward``)."""

    caches: list[KVCache]
    length: int
    last_logits: torch.Tensor
    engine: DecodeEngine | None = None


def _check_state(state) -> None:
    """A ``ValueError`` unless ``state`` is what :meth:`GPT.start` returned."""
    if not isinstance(state, GPTState):
        raise ValueError(
            f"state must be the GPTState that model.start(prompt) returned, got {type(state).__name__}"
        )


class GPT(HookPoints, SavableModel):
    """Decoder-only Transformer: ``forward(ids [B, T]) -> logits [B, T, V]`` (causal).

    Hook points: ``embed``, ``blocks.{i}.*`` (each :class:`~attnlab.nn.DecoderLayer`'s, e.g.
    ``blocks.0.self_attn.weights``, ``blocks.0.ffn.hidden``, ``blocks.0.resid_post``) and ``final_norm``.
    """

    POINTS = {
        "tok_embed": "[B, T, d_model]",  # the token embeddings alone, before positions are added
        "embed": "[B, T, d_model]",  # h_0: token embeddings plus learned/sinusoidal positions
        "final_norm": "[B, T, d_model]",  # N_f(h_L), what W_out reads
    }

    kind = "gpt"
    config_class = GPTConfig
    DECODER_ONLY = True
    STACK = "blocks"
    # attnlab train's options: ``attention`` a block kind (linear and ssm need nothing else),
    # ``window`` a sliding window of W tokens (block_sparse needs one), ``d_ff`` None: 4 d_model
    OPTIONS = {
        "d_model": 64,
        "heads": 4,
        "d_ff": None,
        "layers": 2,
        "attention": "sdpa",
        "window": None,
        "dropout": 0.0,
        "max_len": 256,
    }

    @classmethod
    def from_options(cls, vocab_size: int, **o) -> GPTConfig:
        return GPTConfig(
            vocab_size,
            num_layers=o["layers"],
            max_len=o["max_len"],
            d_model=o["d_model"],
            num_heads=o["heads"],
            d_ff=o["d_ff"] or 4 * o["d_model"],
            attention=o["attention"],
            window=o["window"],
            dropout=o["dropout"],
        )

    @classmethod
    def from_audit(cls, a) -> dict:
        return {
            "vocab_size": a.vocab,
            "num_layers": a.layers,
            "max_len": a.max_len,
            "tie_weights": a.tie_head,
            "block": a.block.replace(dropout=0.0),
        }

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = c = config
        block = c.block
        self.tok_embed = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_embed = None  # learned/sinusoidal positions are added to the embeddings
        if c.positions == "learned":
            self.pos_embed = LearnedPositions(c.max_len, c.d_model)
        elif c.positions == "sinusoidal":
            self.pos_embed = SinusoidalPositions(c.max_len, c.d_model)
        self.dropout = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(DecoderLayer(block, cross_attention=False) for _ in range(c.num_layers))
        self.norm = make_norm(block)
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
        x = self._at("tok_embed", self.tok_embed(ids))  # [B, T, d]
        if self.pos_embed is not None:
            x = self.pos_embed(x, offset)  # [B, T, d]
        return self._at("embed", self.dropout(x))

    def _hook_children(self) -> dict:
        # the final norm's own point (its 1/sigma or 1/RMS) is final_norm.scale, beside final_norm
        return {**{f"blocks.{i}": block for i, block in enumerate(self.blocks)}, "final_norm": self.norm}

    def forward(self, ids: torch.Tensor, *, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``ids [B, T]`` -> ``logits [B, T, V]``; logits at t depend on ``ids[:, :t+1]`` only.

        ``attention_mask [B, T]`` (True or 1 = a real token, False or 0 = padding, as Hugging Face
        passes it): no query attends to a padding key. Positions count from column 0 whatever the
        padding (as ``transformers``' forward does); logits at padding positions mean nothing.
        The attention weights, the residual stream and every head's output are hook points
        (``blocks.{i}.self_attn.weights``, ``embed``, ``blocks.{i}.resid_post``, ``blocks.{i}.self_attn.z``):
        read them with :func:`attnlab.nn.capture`.
        """
        c = self.config
        check_ids("ids", ids, c.vocab_size, c.max_len)  # shapes; an id out of range named below
        mask = _padding_mask(attention_mask, ids)  # [B, T, T] or None; no row left empty
        with bad_ids_named(lambda: check_id_range("ids", ids, c.vocab_size)):
            x = self._hidden_in(ids, 0)  # [B, T, d]
        for block in self.blocks:  # empty_rows="zero": the padding mask leaves every row a key
            x = block(x, self_mask=mask, is_causal=True, empty_rows="zero")  # [B, T, d]
        return self.lm_head(self._at("final_norm", self.norm(x)))  # [B, T, V]

    # ------------------------------------------------------------------------------ decoding protocol
    def _run(self, ids: torch.Tensor, state: GPTState) -> torch.Tensor:
        engine = state.engine
        if engine is not None and (ids.shape[1] == 1 or state.length == 0) and not engine.hooked():
            return engine.run(ids, state)  # [B, V]; a hook added since start() takes the path below
        x = self._hidden_in(ids, state.length)  # [B, T_new, d]
        for block, cache in zip(self.blocks, state.caches):
            x = block(x, is_causal=True, cache=cache)  # lower-right causal over the cache
        state.length += ids.shape[1]
        return self.lm_head(self._at("final_norm", self.norm(x[:, -1:]))[:, -1])  # [B, V]: the last position

    def _caches(self, prompt_len: int, capacity: int | None) -> list:
        """One cache per block: the block kind's own (:func:`attnlab.nn.make_cache`: rolling window,
        recurrent state) or, for full attention, a :class:`~attnlab.nn.StaticKVCache` of
        ``capacity`` positions (default: the prompt + :data:`SPARE_POSITIONS`; 0: the
        concatenating :class:`~attnlab.nn.KVCache`)."""
        c = self.config
        block = c.block
        if capacity == 0 or block.window is not None or block.attention in ("linear", "ssm"):
            return [make_cache(block) for _ in self.blocks]
        capacity = min(c.max_len, prompt_len + SPARE_POSITIONS if capacity is None else capacity)
        return [StaticKVCache(max(capacity, prompt_len), limit=c.max_len) for _ in self.blocks]

    def decode_engine(self) -> DecodeEngine:
        """The model's default :class:`~attnlab.models.gpt_decode.DecodeEngine` (float32, weights
        laid out for the batch size), made on first use and kept with the model."""
        engine = self.__dict__.get("_decode_engine")
        if engine is None:
            engine = self.__dict__["_decode_engine"] = DecodeEngine(self)
        return engine

    def start(
        self, prompt: torch.Tensor, capacity: int | None = None, engine: str | DecodeEngine = "auto"
    ) -> GPTState:
        """Consume ``prompt [B, P]`` into fresh KV caches; ``state.last_logits [B, V]`` predicts token P.

        ``capacity``: positions each layer's KV cache allocates at once (the prompt plus the tokens
        to generate; default the prompt + 64, growing by doubling; 0 for the concatenating cache).
        ``engine``: ``"auto"`` (:meth:`decode_engine` where it supports the model, see
        :func:`~attnlab.models.gpt_decode.unsupported`, else the layers' own ``forward``),
        ``"reference"`` (always the layers' ``forward``), or a
        :class:`~attnlab.models.gpt_decode.DecodeEngine` (bfloat16 weights, ``torch.compile``).
        """
        c = self.config
        check_ids("prompt", prompt, c.vocab_size, c.max_len)
        if capacity is not None and (not isinstance(capacity, int) or capacity < 0):
            raise ValueError(f"capacity must be a non-negative int or None, got {capacity!r}")
        if isinstance(engine, DecodeEngine):
            if engine.gpt is not self:
                raise ValueError("engine was made for another model")
            why = unsupported(self)
            if why is not None:
                raise ValueError(f"the decode engine cannot run this model: {why}")
        elif engine == "auto":
            engine = self.decode_engine() if unsupported(self) is None else None
        elif engine == "reference":
            engine = None
        else:
            raise ValueError(f"engine must be 'auto', 'reference' or a DecodeEngine, got {engine!r}")
        # a sliding-window model keeps only the last W positions' keys and values per layer;
        # linear attention and the SSM a recurrent state of fixed size
        state = GPTState(self._caches(prompt.shape[1], capacity), 0, None, engine)
        with bad_ids_named(lambda: check_id_range("prompt", prompt, c.vocab_size)):
            state.last_logits = self._run(prompt, state)
        return state

    def step(self, tokens: torch.Tensor, state: GPTState) -> tuple[torch.Tensor, GPTState]:
        """Feed ``tokens [B]`` at position ``state.length`` -> ``(logits [B, V], state)``."""
        c = self.config
        _check_state(state)
        check_ids("tokens", tokens, c.vocab_size, c.max_len, ndim=1)
        if state.length >= c.max_len:
            raise ValueError(
                f"cannot feed position {state.length}: the sequence would exceed max_len={c.max_len}"
            )
        with bad_ids_named(lambda: check_id_range("tokens", tokens, c.vocab_size)):
            state.last_logits = self._run(tokens[:, None], state)
        return state.last_logits, state

    def reorder(self, state: GPTState, index: torch.Tensor) -> GPTState:
        """Keep batch rows ``index [B']`` of the state (beam search): ids in ``0..B-1`` (checked when
        ``index`` is on the CPU, as beam search builds it; on an accelerator that would cost a sync)."""
        _check_state(state)
        batch = state.last_logits.shape[0]
        if not torch.is_tensor(index) or index.ndim != 1 or index.dtype not in (torch.int64, torch.int32):
            got = f"{index.dtype} {list(index.shape)}" if torch.is_tensor(index) else type(index).__name__
            raise ValueError(f"index must be an integer tensor [B'] of batch rows, got {got}")
        if (
            index.device.type == "cpu"
            and index.numel()
            and not 0 <= int(index.min()) <= int(index.max()) < batch
        ):
            raise ValueError(
                f"index holds rows {index.tolist()[:8]} but the state holds a batch of {batch} "
                f"(rows 0..{batch - 1})"
            )
        for cache in state.caches:
            cache.reorder(index)
        state.last_logits = state.last_logits.index_select(0, index)
        return state
