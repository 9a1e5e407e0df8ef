"""Build the attnlab module an audit describes, and sort its parameters into the audit's groups.

"encoder-layer" is ``L`` independent :class:`attnlab.nn.EncoderLayer` s in a :class:`LayerStack`,
"decoder-layer" likewise with :class:`attnlab.nn.DecoderLayer`; "transformer", "gpt" and "bert"
are :mod:`attnlab.models`' ``Transformer``, ``GPT`` and ``BertEncoder`` with configs sized by the
audit. Building on the ``meta`` device allocates no memory, so counting a large model is instant.
"""

from __future__ import annotations

import dataclasses
import inspect

import torch
from torch import nn

from attnlab.audit.config import ModelSpec
from attnlab.nn.config import BlockConfig


class LayerStack(nn.Module):
    """``L`` separately parameterised layers applied in turn: ``x -> layer_L(...layer_1(x))``."""

    def __init__(self, layers: list[nn.Module]):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        """``x [B, T, d_model] -> [B, T, d_model]``; extra arguments go to every layer."""
        for layer in self.layers:
            x = layer(x, *args, **kwargs)
        return x


def build(a: ModelSpec, device: str | torch.device | None = None) -> nn.Module:
    """The attnlab module for ``a`` (on ``device``; ``"meta"`` for shapes-only), in eval mode."""
    with torch.device(device or "cpu"):
        module = _build(a)
    return module.eval()


def _takes_config(cls) -> bool:
    """Whether a layer class is constructed from a BlockConfig (``cls(config)``)."""
    return next(iter(inspect.signature(cls).parameters), None) == "config"


def _flags(a: ModelSpec, what: str) -> dict:
    """A constructor that takes flags, not a BlockConfig, builds only the blocks its flags express."""
    b = a.block
    plain = BlockConfig(b.d_model, b.num_heads, b.d_ff, b.num_kv_heads)
    wanted = {"norm": b.norm, "ffn": b.ffn, "qkv_bias": b.qkv_bias, "out_bias": b.out_bias}
    expressible = {"norm": plain.norm, "ffn": plain.ffn, "qkv_bias": b.ffn_bias, "out_bias": b.ffn_bias}
    differ = {k: v for k, v in wanted.items() if v != expressible[k]}
    if differ:
        raise ValueError(
            f"{what} cannot build a block with {differ} (no such option); "
            f"audit_params(..., build_module=False) still counts it"
        )
    activation = "gelu" if b.activation == "gelu_tanh" else b.activation  # same parameters
    return {"norm": b.norm_place, "activation": activation, "bias": b.ffn_bias}


def _layer(cls, a: ModelSpec, **structural) -> nn.Module:
    block = a.block.replace(dropout=0.0)
    if _takes_config(cls):
        return cls(block, **structural)
    f = _flags(a, cls.__name__)
    return cls(
        block.d_model,
        block.num_heads,
        block.d_ff,
        norm=f["norm"],
        activation=f["activation"],
        dropout=0.0,
        bias=f["bias"],
        num_kv_heads=block.num_kv_heads,
    )


def _model_config(cls, a: ModelSpec, **fields):
    """``cls(**fields)``, with the block when the config takes one (else only what its fields say)."""
    names = {f.name for f in dataclasses.fields(cls)}
    if "block" in names:
        fields["block"] = a.block.replace(dropout=0.0)
    else:
        f = _flags(a, cls.__name__)
        fields.update({k: f[k] for k in ("norm", "activation") if k in names})
        if not f["bias"]:
            raise ValueError(f"{cls.__name__} has biases in every linear layer; bias=False does not apply")
        if a.model == "gpt" and a.norm != "pre":
            raise ValueError("attnlab.models.GPT is pre-norm; norm='post' does not apply")
        if a.model == "gpt" and a.activation not in ("gelu", "gelu_tanh"):
            raise ValueError(f"attnlab.models.GPT uses GELU; activation={a.activation!r} does not apply")
        if a.model != "gpt" and a.h_kv != a.heads:
            raise ValueError(f"{cls.__name__} has standard multi-head attention; kv_heads does not apply")
    return cls(**{k: v for k, v in fields.items() if k in names})


def _build(a: ModelSpec) -> nn.Module:
    if a.model in ("encoder-layer", "decoder-layer"):
        from attnlab.nn import DecoderLayer, EncoderLayer

        layer = EncoderLayer if a.model == "encoder-layer" else DecoderLayer
        return LayerStack([_layer(layer, a) for _ in range(a.layers)])
    if a.model == "transformer":
        from attnlab.models import Transformer, TransformerConfig

        return Transformer(
            _model_config(
                TransformerConfig,
                a,
                src_vocab=a.vocab,
                tgt_vocab=a.vocab,
                d_model=a.d_model,
                num_heads=a.heads,
                d_ff=a.d_ff,
                num_encoder_layers=a.layers,
                num_decoder_layers=a.layers,
                max_len=a.max_len,
                dropout=0.0,
                share_embeddings=a.share_embeddings,
            )
        )
    if a.model == "gpt":
        from attnlab.models import GPT, GPTConfig

        if a.block.positions not in ("learned", "rope"):
            raise ValueError(f"attnlab.models.GPT has learned or rope positions, not {a.block.positions!r}")
        return GPT(
            _model_config(
                GPTConfig,
                a,
                vocab_size=a.vocab,
                d_model=a.d_model,
                num_heads=a.heads,
                num_layers=a.layers,
                d_ff=a.d_ff,
                max_len=a.max_len,
                positions=a.block.positions,
                num_kv_heads=a.kv_heads,
                tie_weights=a.tie_head,
                dropout=0.0,
            )
        )
    from attnlab.models.bert import BertConfig, BertEncoder

    return BertEncoder(
        _model_config(
            BertConfig,
            a,
            vocab_size=a.vocab,
            d_model=a.d_model,
            num_heads=a.heads,
            num_layers=a.layers,
            d_ff=a.d_ff,
            max_len=a.max_len,
            type_vocab_size=a.type_vocab,
            eps=a.block.norm_eps,
            pooler=a.pooler,
        )
    )


# parameter-name fragments -> audit group, first match wins
_GROUP_KEYS = (
    ("cross_attn", "cross_attention"),
    ("attn", "attention"),
    ("attention", "attention"),
    ("ffn", "ffn"),
    ("mlp", "ffn"),
    ("intermediate", "ffn"),
    ("norm", "norms"),
    ("ln", "norms"),
    ("pos", "positions"),
    ("emb", "embeddings"),
    ("token_type", "embeddings"),
    ("head", "head"),
    ("generator", "head"),
    ("pooler", "head"),
    ("out", "head"),
)


def group_of(name: str) -> str:
    """The audit group of parameter ``name`` (e.g. ``layers.0.self_attn.q_proj.weight -> attention``)."""
    lowered = name.lower()
    for key, group in _GROUP_KEYS:
        if key in lowered:
            return group
    return "other"


def count_by_group(module: nn.Module) -> dict[str, int]:
    """``{group: parameters}`` of ``module``, shared (tied) tensors counted once."""
    counts: dict[str, int] = {}
    for name, p in module.named_parameters():  # named_parameters() yields a shared tensor once
        g = group_of(name)
        counts[g] = counts.get(g, 0) + p.numel()
    return counts
