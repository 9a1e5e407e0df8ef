"""The engine: PyTorch building blocks that mirror :mod:`attnlab.ref` file by file.

Where a file of both implements the same thing it has the same name in both (``causal_mask``,
``sinusoidal_positions``, ``split_heads``, ``apply_rope``, ``flash_attention``, ...; see
``tests/test_mirror.py``); :func:`attnlab.ref.params_from_attnlab` reads these modules back into
the reference's parameter dicts.

Names are imported on first use, so that :mod:`attnlab.nn.config` (the block's configuration, whose
choices ``attnlab ... --help`` lists) is read without torch.
"""

from __future__ import annotations

import importlib

_EXPORTS = {  # name -> the module defining it, imported on first use
    "AdditiveAttention": "attnlab.nn.attention",
    "LuongAttention": "attnlab.nn.attention",
    "BlockConfig": "attnlab.nn.config",
    "decoder_layer_from_torch": "attnlab.nn.convert",
    "decoder_layer_to_torch": "attnlab.nn.convert",
    "encoder_layer_from_torch": "attnlab.nn.convert",
    "encoder_layer_to_torch": "attnlab.nn.convert",
    "from_torch": "attnlab.nn.convert",
    "mha_from_torch": "attnlab.nn.convert",
    "mha_to_torch": "attnlab.nn.convert",
    "to_torch": "attnlab.nn.convert",
    "transformer_from_torch": "attnlab.nn.convert",
    "transformer_to_torch": "attnlab.nn.convert",
    "flash_attention": "attnlab.nn.flash",
    "HookPoints": "attnlab.nn.hooks",
    "capture": "attnlab.nn.hooks",
    "patch": "attnlab.nn.hooks",
    "Decoder": "attnlab.nn.layers",
    "DecoderLayer": "attnlab.nn.layers",
    "Encoder": "attnlab.nn.layers",
    "EncoderDecoder": "attnlab.nn.layers",
    "EncoderLayer": "attnlab.nn.layers",
    "FeedForward": "attnlab.nn.layers",
    "LayerNorm": "attnlab.nn.layers",
    "RMSNorm": "attnlab.nn.layers",
    "make_cache": "attnlab.nn.layers",
    "make_mixer": "attnlab.nn.layers",
    "make_norm": "attnlab.nn.layers",
    "LinearAttentionState": "attnlab.nn.linear",
    "elu_feature_map": "attnlab.nn.linear",
    "linear_attention": "attnlab.nn.linear",
    "linear_attention_step": "attnlab.nn.linear",
    "selective_scan": "attnlab.nn.linear",
    "selective_scan_step": "attnlab.nn.linear",
    "causal_mask": "attnlab.nn.masks",
    "padding_mask": "attnlab.nn.masks",
    "padding_mask_from_ids": "attnlab.nn.masks",
    "sliding_window_mask": "attnlab.nn.masks",
    "sparse_pattern_mask": "attnlab.nn.masks",
    "KVCache": "attnlab.nn.multihead",
    "MultiHeadAttention": "attnlab.nn.multihead",
    "merge_heads": "attnlab.nn.multihead",
    "split_heads": "attnlab.nn.multihead",
    "NonFiniteError": "attnlab.nn.nonfinite",
    "detect_nonfinite": "attnlab.nn.nonfinite",
    "LearnedPositions": "attnlab.nn.positions",
    "SinusoidalPositions": "attnlab.nn.positions",
    "alibi_bias": "attnlab.nn.positions",
    "alibi_slopes": "attnlab.nn.positions",
    "apply_rope": "attnlab.nn.positions",
    "rope_cos_sin": "attnlab.nn.positions",
    "sinusoidal_positions": "attnlab.nn.positions",
    "RollingKVCache": "attnlab.nn.rolling_cache",
    "rope_frequencies": "attnlab.nn.rope_scaling",
    "block_sparse_attention": "attnlab.nn.sparse",
    "SelectiveSSM": "attnlab.nn.state_space",
    "SSMState": "attnlab.nn.state_space",
}

__all__ = [
    "detect_nonfinite",
    "NonFiniteError",
    "LinearAttentionState",
    "RollingKVCache",
    "SSMState",
    "SelectiveSSM",
    "make_cache",
    "make_mixer",
    "block_sparse_attention",
    "elu_feature_map",
    "linear_attention",
    "linear_attention_step",
    "selective_scan",
    "selective_scan_step",
    "sparse_pattern_mask",
    "AdditiveAttention",
    "BlockConfig",
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderDecoder",
    "EncoderLayer",
    "FeedForward",
    "HookPoints",
    "KVCache",
    "LearnedPositions",
    "LuongAttention",
    "MultiHeadAttention",
    "LayerNorm",
    "RMSNorm",
    "SinusoidalPositions",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "capture",
    "causal_mask",
    "decoder_layer_from_torch",
    "decoder_layer_to_torch",
    "encoder_layer_from_torch",
    "encoder_layer_to_torch",
    "flash_attention",
    "from_torch",
    "make_norm",
    "mha_from_torch",
    "merge_heads",
    "mha_to_torch",
    "padding_mask",
    "patch",
    "padding_mask_from_ids",
    "rope_cos_sin",
    "rope_frequencies",
    "sinusoidal_positions",
    "sliding_window_mask",
    "split_heads",
    "to_torch",
    "transformer_from_torch",
    "transformer_to_torch",
]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'attnlab.nn' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (imported lazily) next to the module's own, so ``dir(attnlab.nn)`` lists them."""
    return sorted({*globals(), *_EXPORTS})
