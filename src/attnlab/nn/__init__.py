"""The engine: PyTorch building blocks that mirror :mod:`attnlab.ref` file by file.

Where a file of both implements the same thing it has the same name in both (``causal_mask``,
``sinusoidal_positions``, ``split_heads``, ``apply_rope``, ``flash_attention``, ...; see
``tests/test_mirror.py``); :func:`attnlab.ref.params_from_attnlab` reads these modules back into
the reference's parameter dicts.
"""

from attnlab.nn.attention import AdditiveAttention, LuongAttention
from attnlab.nn.config import BlockConfig
from attnlab.nn.convert import (
    decoder_layer_from_torch,
    decoder_layer_to_torch,
    encoder_layer_from_torch,
    encoder_layer_to_torch,
    from_torch,
    mha_from_torch,
    mha_to_torch,
    to_torch,
    transformer_from_torch,
    transformer_to_torch,
)
from attnlab.nn.flash import flash_attention
from attnlab.nn.hooks import HookPoints, capture, patch
from attnlab.nn.layers import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderDecoder,
    EncoderLayer,
    FeedForward,
    LayerNorm,
    RMSNorm,
    make_cache,
    make_mixer,
    make_norm,
)
from attnlab.nn.linear import (
    LinearAttentionState,
    elu_feature_map,
    linear_attention,
    linear_attention_step,
    selective_scan,
    selective_scan_step,
)
from attnlab.nn.masks import (
    causal_mask,
    padding_mask,
    padding_mask_from_ids,
    sliding_window_mask,
    sparse_pattern_mask,
)
from attnlab.nn.multihead import KVCache, MultiHeadAttention, merge_heads, split_heads
from attnlab.nn.nonfinite import NonFiniteError, detect_nonfinite
from attnlab.nn.positions import (
    LearnedPositions,
    SinusoidalPositions,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    rope_cos_sin,
    sinusoidal_positions,
)
from attnlab.nn.rolling_cache import RollingKVCache
from attnlab.nn.rope_scaling import rope_frequencies
from attnlab.nn.sparse import block_sparse_attention
from attnlab.nn.state_space import SelectiveSSM, SSMState

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
