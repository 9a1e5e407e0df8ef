"""One frozen description of a Transformer block: :class:`BlockConfig`.

Everything that makes one block differ from another is a field here, so a new architecture is a
configuration, not a new class or another constructor flag:

==============  =========================================================================
GPT-2           norm="layer", norm_place="pre", ffn="mlp", activation="gelu_tanh",
                biases everywhere, positions="learned" (added to the embeddings)
Llama 2/3       norm="rms", norm_place="pre", ffn="glu", activation="silu" (SwiGLU),
                no biases, positions="rope", rope_layout="half", num_kv_heads for GQA
Qwen2           as Llama, with qkv_bias=True
Mistral         as Llama, with window=W (sliding-window attention)
BERT / paper    norm="layer", norm_place="post", ffn="mlp", activation="gelu" / "relu"
==============  =========================================================================

The registries below (``NORMS``, ``FFNS``, ...) are the choices: help texts and CLI options read
them, never a hand-written list.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from attnlab._checks import (
    choice,
    optional_positive_int,
    positive_float,
    positive_int,
    probability,
)
from attnlab._rope_config import check_head_dim, check_rope_scaling

NORMS = ("layer", "rms")
NORM_PLACES = ("post", "pre")
FFNS = ("mlp", "glu", "none")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
POSITIONS = ("none", "sinusoidal", "learned", "rope", "alibi")
ROPE_LAYOUTS = ("interleaved", "half")
ATTENTION_KINDS = ("sdpa", "explicit", "flash", "block_sparse", "linear", "ssm")
# Kinds that compute something other than softmax attention over every key (issue 15):
# block_sparse needs a window; linear and ssm have no softmax, so no window, bias or weights.
SUBQUADRATIC_KINDS = ("block_sparse", "linear", "ssm")


@dataclasses.dataclass(frozen=True)
class BlockConfig:
    """Everything one Transformer block is.

    Sizes: ``d_model``, ``num_heads`` (``h``; ``d_k = d_model / h``), ``num_kv_heads`` (GQA/MQA;
    ``None`` = ``num_heads``), ``d_ff`` (the FFN's hidden width, default ``4 d_model``; for
    ``ffn="glu"`` the width of each of the gate and up projections). Norm: ``norm`` (``layer`` |
    ``rms``), ``norm_eps``, ``norm_place`` (``post``: the paper's ``LN(x + f(x))``; ``pre``:
    ``x + f(LN(x))``). FFN: ``ffn`` (``mlp``: ``act(x W_1) W_2``; ``glu``: ``(act(x W_1) * x W_3) W_2``;
    ``none``: attention only)
    and ``activation``. Biases: ``qkv_bias``, ``out_bias`` (W^O), ``ffn_bias``. Positions:
    ``positions``; for RoPE ``rope_layout`` (``interleaved``: pairs (0,1), (2,3), ... as in RoFormer;
    ``half``: pairs (i, i + d/2), the rotate-half layout of Hugging Face Llama), ``rope_base`` and
    ``rope_scaling`` (a Hugging Face ``rope_scaling`` dict, or ``None``). ``window``: sliding-window
    width W (a query sees itself and the W - 1 keys before it), ``None`` for full attention.
    ``attention``: the kernel (``sdpa`` fused, ``explicit`` step by step with weights, ``flash``
    tiled online softmax), or what replaces quadratic attention: ``block_sparse`` (the sliding
    window of ``window`` keys through :func:`attnlab.nn.block_sparse_attention`, which skips the
    tiles the window leaves empty; needs ``window``), ``linear`` (causal linear attention,
    phi = elu + 1, Katharopoulos et al. 2020; a ``d_k x d_k`` state per head when generating) or
    ``ssm`` (a selective state-space layer in place of attention, :class:`attnlab.nn.SelectiveSSM`,
    state width ``state_size`` n per channel). ``dropout``: on attention weights, residual branches
    and inside the FFN.
    """

    d_model: int
    num_heads: int
    d_ff: int | None = None
    num_kv_heads: int | None = None
    norm: str = "layer"
    norm_eps: float = 1e-5
    norm_place: str = "post"
    ffn: str = "mlp"
    activation: str = "relu"
    qkv_bias: bool = True
    out_bias: bool = True
    ffn_bias: bool = True
    positions: str = "none"
    rope_layout: str = "interleaved"
    rope_base: float = 10000.0
    rope_scaling: dict | None = dataclasses.field(default=None, hash=False)
    window: int | None = None
    attention: str = "sdpa"
    dropout: float = 0.0
    state_size: int = 16

    def __post_init__(self) -> None:
        n = "BlockConfig"
        positive_int(f"{n}.d_model", self.d_model)
        positive_int(f"{n}.num_heads", self.num_heads)
        if self.d_ff is None:  # the usual 4 d_model (GPT-2's n_inner=None does the same)
            object.__setattr__(self, "d_ff", 4 * self.d_model)
        positive_int(f"{n}.d_ff", self.d_ff)
        optional_positive_int(f"{n}.num_kv_heads", self.num_kv_heads)
        if self.d_model % self.num_heads:
            raise ValueError(f"{n}.d_model={self.d_model} is not divisible by num_heads={self.num_heads}")
        if self.num_heads % self.kv_heads:
            raise ValueError(
                f"{n}.num_heads={self.num_heads} is not divisible by num_kv_heads={self.num_kv_heads}"
            )
        choice(f"{n}.norm", self.norm, NORMS)
        positive_float(f"{n}.norm_eps", self.norm_eps)
        choice(f"{n}.norm_place", self.norm_place, NORM_PLACES)
        choice(f"{n}.ffn", self.ffn, FFNS)
        choice(f"{n}.activation", self.activation, ACTIVATIONS)
        for flag in ("qkv_bias", "out_bias", "ffn_bias"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{n}.{flag} must be true or false, got {getattr(self, flag)!r}")
        choice(f"{n}.positions", self.positions, POSITIONS)
        choice(f"{n}.rope_layout", self.rope_layout, ROPE_LAYOUTS)
        positive_float(f"{n}.rope_base", self.rope_base)
        if self.positions == "rope" and self.head_dim % 2:
            raise ValueError(f"{n}: RoPE needs an even head width, got d_model/num_heads = {self.head_dim}")
        cfg = check_rope_scaling(self.rope_scaling, f"{n}.rope_scaling")
        if self.positions == "rope" and cfg is not None:
            check_head_dim(self.head_dim, cfg)
        optional_positive_int(f"{n}.window", self.window)
        choice(f"{n}.attention", self.attention, ATTENTION_KINDS)
        if self.attention == "flash" and self.positions == "alibi":
            raise ValueError(
                f"{n}: attention='flash' does not take an additive bias; use positions='rope' or 'none'"
            )
        probability(f"{n}.dropout", self.dropout)
        positive_int(f"{n}.state_size", self.state_size)
        self._check_subquadratic(n)

    def _check_subquadratic(self, n: str) -> None:
        """The settings the block-sparse, linear and SSM kinds cannot honour: one-line errors."""
        kind = self.attention
        if kind == "block_sparse" and self.window is None:
            raise ValueError(
                f"{n}: attention='block_sparse' needs window=W (it skips the tiles a sliding window "
                "leaves empty); for full attention use 'sdpa'"
            )
        if kind in ("block_sparse", "linear", "ssm") and self.positions == "alibi":
            raise ValueError(
                f"{n}: attention='{kind}' does not take ALiBi's additive bias; use positions='rope' or 'none'"
            )
        if kind in ("linear", "ssm") and self.window is not None:
            raise ValueError(
                f"{n}: attention='{kind}' has no window (its state already summarises every earlier "
                f"token), got window={self.window}; use attention='block_sparse' for a sliding window"
            )
        if kind == "ssm":
            if self.positions == "rope":
                raise ValueError(
                    f"{n}: attention='ssm' has no queries or keys for RoPE to rotate; "
                    "use positions='none' or 'learned'"
                )
            if self.num_kv_heads is not None:
                raise ValueError(
                    f"{n}: attention='ssm' has no key/value heads, got num_kv_heads={self.num_kv_heads}"
                )

    @property
    def head_dim(self) -> int:
        """``d_k = d_model / num_heads``."""
        return self.d_model // self.num_heads

    @property
    def kv_heads(self) -> int:
        """Number of key/value heads (``num_kv_heads``, or ``num_heads`` when that is ``None``)."""
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

    @classmethod
    def pick(cls, source: Any, **fixed) -> BlockConfig:
        """The block a model config describes: every field of ``source`` named like a BlockConfig
        field, then ``fixed``. Errors name ``source``'s class (``"GPTConfig.norm must be ..."``)."""
        names = [f.name for f in dataclasses.fields(cls)]
        values = {n: getattr(source, n) for n in names if hasattr(source, n)}
        try:
            return cls(**{**values, **fixed})
        except ValueError as exc:
            raise ValueError(str(exc).replace("BlockConfig", type(source).__name__, 1)) from None

    def replace(self, **changes) -> BlockConfig:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (every field)."""
        d = dataclasses.asdict(self)
        if d["rope_scaling"] is not None:
            d["rope_scaling"] = dict(d["rope_scaling"])
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BlockConfig:
        """Inverse of :meth:`to_dict`; unknown or missing fields are a ``ValueError`` naming them."""
        if not isinstance(data, dict):
            raise ValueError(f"BlockConfig must be a JSON object, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"BlockConfig has no field(s) {unknown}; fields are {sorted(names)}")
        missing = sorted({"d_model", "num_heads"} - set(data))
        if missing:
            raise ValueError(f"BlockConfig is missing required field(s) {missing}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> BlockConfig:
        return cls.from_dict(json.loads(text))
