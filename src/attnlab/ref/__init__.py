"""The NumPy reference: pure functions, forward only, float64 by default (float32 accepted).

Every function cites the equation it implements and the shape of every argument; bad input is a
``ValueError`` that names the argument and the shapes involved.
"""

from attnlab.ref.attention import (
    additive_attention,
    luong_attention,
    masked_softmax,
    scaled_dot_product_attention,
)
from attnlab.ref.convert import params_from_attnlab, params_from_torch
from attnlab.ref.flash import flash_attention as flash_attention  # re-export (issue 7)
from attnlab.ref.layers import decoder_layer, encoder_layer, feed_forward, gelu, layer_norm, relu, rms_norm
from attnlab.ref.linear import elu_feature_map, linear_attention, selective_scan
from attnlab.ref.masks import (
    causal_mask,
    longformer_mask,
    padding_mask,
    sliding_window_mask,
    sparse_pattern_mask,
    strided_mask,
)
from attnlab.ref.multihead import merge_heads, multi_head_attention, split_heads
from attnlab.ref.positions import alibi_bias, alibi_slopes, apply_rope, sinusoidal_positions
from attnlab.ref.rope_scaling import rope_frequencies
from attnlab.ref.softmax import log_softmax, online_softmax, softmax

__all__ = [
    "elu_feature_map",
    "linear_attention",
    "longformer_mask",
    "selective_scan",
    "sparse_pattern_mask",
    "strided_mask",
    "additive_attention",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "causal_mask",
    "decoder_layer",
    "encoder_layer",
    "feed_forward",
    "gelu",
    "layer_norm",
    "log_softmax",
    "luong_attention",
    "masked_softmax",
    "merge_heads",
    "multi_head_attention",
    "online_softmax",
    "padding_mask",
    "params_from_attnlab",
    "params_from_torch",
    "relu",
    "rms_norm",
    "rope_frequencies",
    "scaled_dot_product_attention",
    "sinusoidal_positions",
    "sliding_window_mask",
    "softmax",
    "split_heads",
]
