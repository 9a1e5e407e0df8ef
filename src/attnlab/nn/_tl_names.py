"""TransformerLens's hook names as aliases of attnlab's, for :func:`attnlab.nn.capture` and
:func:`~attnlab.nn.patch` (``blocks.0.attn.hook_pattern`` is ``blocks.0.self_attn.weights``).

An alias names the same tensor; the layout is attnlab's where the two differ (the shapes below, and
``docs/analyses.md``, which holds the table). TransformerLens writes a layer ``blocks.{l}``; a model
whose layers are ``layers.{l}`` (BERT, MiniLM) reads its aliases there. The layer may be a glob
(``blocks.*.hook_resid_post``). Names that are not here have no attnlab twin: ``hook_pos_embed``
(``embed`` - ``tok_embed``), ``attn.hook_result`` (a head's ``z`` through its slice of W^O:
:mod:`attnlab.interp.attribution`), ``ln*.hook_scale`` (TransformerLens's is sigma; attnlab's
``norm1.scale`` is 1/sigma, the factor the norm multiplies by).
"""

from __future__ import annotations

import re

# TransformerLens name after "blocks.{l}." -> (attnlab name after the layer's prefix, layout note)
BLOCK_ALIASES: dict[str, tuple[str, str]] = {
    "hook_resid_pre": ("resid_pre", "same"),
    "hook_resid_mid": ("resid_mid", "same"),
    "hook_resid_post": ("resid_post", "same"),
    "ln1.hook_normalized": ("self_attn.x_q", "same"),
    "attn.hook_q": ("self_attn.q", "[B, T, h*d_k] (TransformerLens [B, T, h, d_k])"),
    "attn.hook_k": ("self_attn.k", "[B, T, h_kv*d_k] (TransformerLens [B, T, h_kv, d_k])"),
    "attn.hook_v": ("self_attn.v", "[B, T, h_kv*d_k] (TransformerLens [B, T, h_kv, d_k])"),
    "attn.hook_rot_q": ("self_attn.q_heads", "[B, h, T, d_k] (TransformerLens [B, T, h, d_k])"),
    "attn.hook_rot_k": ("self_attn.k_heads", "[B, h_kv, T, d_k] (TransformerLens [B, T, h_kv, d_k])"),
    "attn.hook_attn_scores": ("self_attn.scores", "before the mask (TransformerLens: -inf above it)"),
    "attn.hook_pattern": ("self_attn.weights", "same"),
    "attn.hook_z": ("self_attn.z", "same"),
    "hook_attn_out": ("self_attn.out", "same"),
    "mlp.hook_post": ("ffn.hidden", "same"),
    "hook_mlp_out": ("ffn.out", "same"),
}
# model-level TransformerLens names -> attnlab names
MODEL_ALIASES: dict[str, tuple[str, str]] = {
    "hook_embed": ("tok_embed", "same (GPT)"),
    "ln_final.hook_normalized": ("final_norm", "same (GPT)"),
}

# TransformerLens names with no attnlab twin -> where the quantity is in attnlab
NO_TWIN = {
    "hook_pos_embed": "the positions are embed - tok_embed",
    "attn.hook_result": "a head's output is attnlab.interp.attribution.head_outputs",
    "hook_scale": "attnlab's norm1/norm3/final_norm .scale is 1/sigma, the reciprocal of this",
}

_BLOCK = re.compile(r"blocks\.([^.]+)\.(.+)")


def no_twin(name: str) -> str | None:
    """Where a TransformerLens quantity without an alias lives in attnlab (None if ``name`` is none)."""
    for suffix, where in NO_TWIN.items():
        if name == suffix or name.endswith("." + suffix):
            return where
    return None


def translate(name: str, layers: str = "blocks") -> str:
    """attnlab's name for ``name`` if it is a TransformerLens alias, else ``name`` unchanged;
    ``layers`` is the model's layer prefix (``blocks`` for a GPT, ``layers`` for BERT)."""
    if "hook_" not in name:
        return name  # attnlab's own names never contain 'hook_'
    if name in MODEL_ALIASES:
        return MODEL_ALIASES[name][0]
    m = _BLOCK.fullmatch(name)
    if m and m.group(2) in BLOCK_ALIASES:
        return f"{layers}.{m.group(1)}.{BLOCK_ALIASES[m.group(2)][0]}"
    return name


def layer_prefix(points) -> str:
    """``blocks`` or ``layers``: how the model behind hook point names ``points`` numbers its layers."""
    return "layers" if any(p.startswith("layers.") for p in points) else "blocks"


class Cache(dict):
    """What :func:`attnlab.nn.capture` fills: attnlab names as keys, and a TransformerLens alias
    read as the name it stands for (``cache["blocks.0.attn.hook_pattern"]``)."""

    layers = "blocks"

    def __missing__(self, key):
        name = translate(key, self.layers) if isinstance(key, str) else key
        if name == key:
            raise KeyError(key)
        return self[name]

    def __contains__(self, key) -> bool:
        name = translate(key, self.layers) if isinstance(key, str) else key
        return dict.__contains__(self, key) or dict.__contains__(self, name)
