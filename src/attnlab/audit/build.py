"""Build the attnlab module an audit describes, and sort its parameters into the audit's groups.

"encoder-layer" is ``L`` independent :class:`attnlab.nn.EncoderLayer` s in a :class:`LayerStack`,
"decoder-layer" likewise with :class:`attnlab.nn.DecoderLayer`; a whole model is the family of that
name in :mod:`attnlab.models.registry` (its ``AUDITED``: transformer, gpt, bert), its config sized
as the family says (``from_audit``). Building on the ``meta`` device allocates no memory, so
counting a large model is instant.
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab.audit.config import ModelSpec
from attnlab.models.registry import model_class
from attnlab.nn import DecoderLayer, EncoderLayer


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


def _layer(cls, a: ModelSpec, **structural) -> nn.Module:
    """One ``EncoderLayer`` / ``DecoderLayer`` of the spec's block (dropout off: only shapes and counts)."""
    return cls(a.block.replace(dropout=0.0), **structural)


def _model_config(cls, a: ModelSpec, **fields):
    """``cls(**fields)``, whose ``block`` must then be the spec's, else the model cannot build what the
    audit counts (a ``ValueError`` naming the fields that differ)."""
    config = cls(**fields)
    want = a.block.replace(dropout=0.0).to_dict()
    got = config.block.replace(dropout=0.0).to_dict()
    differ = {k: v for k, v in want.items() if got[k] != v}
    if differ:
        raise ValueError(
            f"attnlab.models cannot build this {a.model} block: {cls.__name__} has no option for {differ}; "
            f"audit_params(..., build_module=False) still counts it"
        )
    return config


def _build(a: ModelSpec) -> nn.Module:
    if a.model in ("encoder-layer", "decoder-layer"):
        layer = EncoderLayer if a.model == "encoder-layer" else DecoderLayer
        return LayerStack([_layer(layer, a) for _ in range(a.layers)])
    family = model_class(a.model)  # the registry's family, sized as it says (from_audit)
    return family(_model_config(family.config_class, a, **family.from_audit(a)))


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
