"""Interop with PyTorch's own modules: copy weights from and to ``nn.MultiheadAttention``,
``nn.TransformerEncoderLayer``, ``nn.TransformerDecoderLayer`` and ``nn.Transformer``.

Both sides store ``nn.Linear`` weights as ``[d_out, d_in]``; PyTorch packs W^Q, W^K, W^V into one
``in_proj_weight [3 d, d]`` (rows ``0:d`` are W^Q). Modules made by ``*_to_torch`` are
``batch_first=True`` like attnlab. Note PyTorch's boolean masks mean the opposite of ours
(True = *not* allowed): pass ``~mask`` to the torch module.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.nn.config import BlockConfig
from attnlab.nn.layers import DecoderLayer, EncoderDecoder, EncoderLayer
from attnlab.nn.multihead import MultiHeadAttention


def _copy(dst: torch.Tensor | None, src: torch.Tensor | None, name: str) -> None:
    if (dst is None) != (src is None):
        raise ValueError(f"{name}: one side has a bias and the other has none")
    if dst is None:
        return
    if dst.shape != src.shape:
        raise ValueError(f"{name}: shape {list(src.shape)} does not fit {list(dst.shape)}")
    with torch.no_grad():
        dst.copy_(src)


# ------------------------------------------------------------------------------------------- MHA
def _load_mha(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    d = theirs.embed_dim
    if theirs.bias_k is not None:
        raise ValueError("nn.MultiheadAttention with add_bias_kv=True has no attnlab equivalent")
    if theirs._qkv_same_embed_dim:
        w = theirs.in_proj_weight  # [3d, d]
        w_q, w_k, w_v = w[:d], w[d : 2 * d], w[2 * d :]
    else:
        w_q, w_k, w_v = theirs.q_proj_weight, theirs.k_proj_weight, theirs.v_proj_weight
    _copy(ours.q_proj.weight, w_q, "q_proj.weight")
    _copy(ours.k_proj.weight, w_k, "k_proj.weight")
    _copy(ours.v_proj.weight, w_v, "v_proj.weight")
    b = theirs.in_proj_bias  # [3d] or None
    _copy(ours.q_proj.bias, None if b is None else b[:d], "q_proj.bias")
    _copy(ours.k_proj.bias, None if b is None else b[d : 2 * d], "k_proj.bias")
    _copy(ours.v_proj.bias, None if b is None else b[2 * d :], "v_proj.bias")
    _copy(ours.out_proj.weight, theirs.out_proj.weight, "out_proj.weight")
    _copy(ours.out_proj.bias, theirs.out_proj.bias, "out_proj.bias")


def _store_mha(theirs: nn.MultiheadAttention, ours: MultiHeadAttention) -> None:
    if ours.num_kv_heads != ours.num_heads or ours.positions is not None:
        raise ValueError(
            "nn.MultiheadAttention has no GQA and no RoPE/ALiBi: cannot export "
            f"num_kv_heads={ours.num_kv_heads}, positions={ours.positions!r}"
        )
    with torch.no_grad():
        w = torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])  # [3d, d]
        if theirs._qkv_same_embed_dim:
            theirs.in_proj_weight.copy_(w)
        else:
            theirs.q_proj_weight.copy_(ours.q_proj.weight)
            theirs.k_proj_weight.copy_(ours.k_proj.weight)
            theirs.v_proj_weight.copy_(ours.v_proj.weight)
        if theirs.in_proj_bias is not None:
            theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
    _copy(theirs.out_proj.weight, ours.out_proj.weight, "out_proj.weight")
    _copy(theirs.out_proj.bias, ours.out_proj.bias, "out_proj.bias")


def mha_from_torch(theirs: nn.MultiheadAttention) -> MultiHeadAttention:
    """A :class:`MultiHeadAttention` with the weights of ``theirs`` (same outputs)."""
    kdim = theirs.kdim
    # these add a learned (or zero) key/value row to every sequence: attnlab has no such row, and
    # copying the rest would give different outputs without a word
    if theirs.add_zero_attn or theirs.bias_k is not None:
        which = "add_zero_attn=True" if theirs.add_zero_attn else "add_bias_kv=True"
        raise ValueError(
            f"cannot reproduce an nn.MultiheadAttention built with {which} (an extra key/value row)"
        )
    if theirs.vdim != kdim:
        raise ValueError(f"attnlab needs kdim == vdim, got kdim={kdim}, vdim={theirs.vdim}")
    bias = theirs.in_proj_bias is not None
    config = BlockConfig(
        theirs.embed_dim, theirs.num_heads, qkv_bias=bias, out_bias=bias, dropout=theirs.dropout
    )
    ours = MultiHeadAttention(config, cross_attention=kdim != theirs.embed_dim, kv_dim=kdim)
    _load_mha(ours, theirs)
    return ours


def mha_to_torch(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    """An ``nn.MultiheadAttention(batch_first=True)`` with the weights of ``ours``."""
    if (ours.q_proj.bias is None) != (ours.out_proj.bias is None) or ours.window is not None:
        raise ValueError(
            "nn.MultiheadAttention has one bias switch and no window: cannot export "
            f"qkv_bias={ours.config.qkv_bias}, out_bias={ours.config.out_bias}, window={ours.window}"
        )
    theirs = nn.MultiheadAttention(
        ours.d_model,
        ours.num_heads,
        dropout=ours.dropout,
        bias=ours.q_proj.bias is not None,
        kdim=ours.kv_dim,
        vdim=ours.kv_dim,
        batch_first=True,
    )
    _store_mha(theirs, ours)
    return theirs


# ------------------------------------------------------------------------------------------- layers
def _activation_name(layer) -> str:
    act = layer.activation
    if act is F.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu:
        return "gelu"
    if act is F.silu or isinstance(act, nn.SiLU):
        return "silu"
    if isinstance(act, nn.GELU):
        return "gelu_tanh" if act.approximate == "tanh" else "gelu"
    raise ValueError(f"activation {act!r} has no attnlab equivalent (relu, gelu, gelu_tanh, silu)")


def _block_config(layer) -> BlockConfig:
    """The :class:`BlockConfig` of a ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer``."""
    bias = layer.linear1.bias is not None
    return BlockConfig(
        layer.self_attn.embed_dim,
        layer.self_attn.num_heads,
        layer.linear1.out_features,
        norm_eps=layer.norm1.eps,
        norm_place="pre" if layer.norm_first else "post",
        activation=_activation_name(layer),
        qkv_bias=bias,
        out_bias=bias,
        ffn_bias=bias,
        dropout=layer.dropout.p,
    )


def _load_ffn_norms(ours, theirs, norms: tuple[tuple[str, str], ...]) -> None:
    for a, b in (("ffn.linear1", "linear1"), ("ffn.linear2", "linear2"), *norms):
        dst, src = ours.get_submodule(a), theirs.get_submodule(b)
        _copy(dst.weight, src.weight, f"{a}.weight")
        _copy(dst.bias, src.bias, f"{a}.bias")


_ENC_NORMS = (("norm1", "norm1"), ("norm2", "norm2"))
_DEC_NORMS = (("norm1", "norm1"), ("norm2", "norm2"), ("norm3", "norm3"))


def encoder_layer_from_torch(theirs: nn.TransformerEncoderLayer) -> EncoderLayer:
    """An :class:`EncoderLayer` with the weights and options of ``theirs``."""
    ours = EncoderLayer(_block_config(theirs))
    _load_mha(ours.self_attn, theirs.self_attn)
    _load_ffn_norms(ours, theirs, _ENC_NORMS)
    return ours


def encoder_layer_to_torch(ours: EncoderLayer) -> nn.TransformerEncoderLayer:
    """An ``nn.TransformerEncoderLayer(batch_first=True)`` with the weights and options of ``ours``."""
    theirs = _torch_layer(nn.TransformerEncoderLayer, ours)
    _store_mha(theirs.self_attn, ours.self_attn)
    _store_ffn_norms(theirs, ours, _ENC_NORMS)
    return theirs


def decoder_layer_from_torch(theirs: nn.TransformerDecoderLayer) -> DecoderLayer:
    """A :class:`DecoderLayer` with the weights and options of ``theirs``."""
    ours = DecoderLayer(_block_config(theirs))
    _load_mha(ours.self_attn, theirs.self_attn)
    _load_mha(ours.cross_attn, theirs.multihead_attn)
    _load_ffn_norms(ours, theirs, _DEC_NORMS)
    return ours


def decoder_layer_to_torch(ours: DecoderLayer) -> nn.TransformerDecoderLayer:
    """An ``nn.TransformerDecoderLayer(batch_first=True)`` with the weights and options of ``ours``."""
    if ours.cross_attn is None:
        raise ValueError("nn.TransformerDecoderLayer always has cross-attention; this layer has none")
    theirs = _torch_layer(nn.TransformerDecoderLayer, ours)
    _store_mha(theirs.self_attn, ours.self_attn)
    _store_mha(theirs.multihead_attn, ours.cross_attn)
    _store_ffn_norms(theirs, ours, _DEC_NORMS)
    return theirs


def _torch_config(ours) -> BlockConfig:
    """``ours.config``, if ``nn.Transformer*Layer`` can express it (LayerNorm, MLP, one bias switch)."""
    c = ours.config
    checks = (
        ("norm", c.norm, c.norm == "layer"),
        ("ffn", c.ffn, c.ffn == "mlp"),
        ("biases", (c.qkv_bias, c.out_bias, c.ffn_bias), c.qkv_bias == c.out_bias == c.ffn_bias),
        ("positions", c.positions, c.positions not in ("rope", "alibi")),
        ("window", c.window, c.window is None),
    )
    bad = ", ".join(f"{name}={value!r}" for name, value, ok in checks if not ok)
    if bad:
        raise ValueError(
            "nn.TransformerEncoderLayer/DecoderLayer have LayerNorm, an MLP, one bias switch and no "
            f"RoPE/ALiBi/window: cannot export {bad}"
        )
    return c


def _torch_layer(torch_class, ours):
    """``torch_class(batch_first=True)`` (``nn.TransformerEncoderLayer`` or ``nn.TransformerDecoderLayer``)
    with the sizes and options of ``ours``; its weights are still torch's fresh ones."""
    c = _torch_config(ours)
    return torch_class(
        c.d_model,
        c.num_heads,
        c.d_ff,
        dropout=c.dropout,
        activation=_torch_activation(c.activation),
        layer_norm_eps=c.norm_eps,
        batch_first=True,
        norm_first=c.norm_place == "pre",
        bias=c.qkv_bias,
    )


def _torch_activation(name: str):
    return {"relu": "relu", "gelu": "gelu", "gelu_tanh": nn.GELU(approximate="tanh"), "silu": F.silu}[name]


def _store_ffn_norms(theirs, ours, norms) -> None:
    for b, a in (("ffn.linear1", "linear1"), ("ffn.linear2", "linear2"), *norms):
        src, dst = ours.get_submodule(b), theirs.get_submodule(a)
        _copy(dst.weight, src.weight, f"{a}.weight")
        _copy(dst.bias, src.bias, f"{a}.bias")


# ------------------------------------------------------------------------------------------- whole stack
def _copy_norm(dst: nn.LayerNorm | None, src: nn.LayerNorm | None, name: str) -> None:
    if (dst is None) != (src is None):
        raise ValueError(f"{name}: one side has a final LayerNorm and the other has none")
    if dst is not None:
        _copy(dst.weight, src.weight, f"{name}.weight")
        _copy(dst.bias, src.bias, f"{name}.bias")


def transformer_from_torch(theirs: nn.Transformer) -> EncoderDecoder:
    """An :class:`EncoderDecoder` (encoder + decoder stacks, final norms) with the weights of ``theirs``."""
    enc0, dec0 = theirs.encoder.layers[0], theirs.decoder.layers[0]
    config = _block_config(enc0)
    ours = EncoderDecoder(config, len(theirs.encoder.layers), len(theirs.decoder.layers), final_norm=True)
    if _block_config(dec0) != config:
        raise ValueError("encoder and decoder layers of this nn.Transformer differ in their options")
    ours.encoder.layers = nn.ModuleList(encoder_layer_from_torch(layer) for layer in theirs.encoder.layers)
    ours.decoder.layers = nn.ModuleList(decoder_layer_from_torch(layer) for layer in theirs.decoder.layers)
    _copy_norm(ours.encoder.norm, theirs.encoder.norm, "encoder.norm")
    _copy_norm(ours.decoder.norm, theirs.decoder.norm, "decoder.norm")
    return ours


def transformer_to_torch(ours: EncoderDecoder) -> nn.Transformer:
    """An ``nn.Transformer(batch_first=True)`` with the weights of ``ours`` (which needs final norms,
    as ``nn.Transformer`` always has them)."""
    c = _torch_config(ours.encoder.layers[0])
    theirs = nn.Transformer(
        c.d_model,
        c.num_heads,
        len(ours.encoder.layers),
        len(ours.decoder.layers),
        c.d_ff,
        c.dropout,
        activation=_torch_activation(c.activation),
        layer_norm_eps=c.norm_eps,
        batch_first=True,
        norm_first=c.norm_place == "pre",
        bias=c.qkv_bias,
    )
    theirs.encoder.layers = nn.ModuleList(encoder_layer_to_torch(layer) for layer in ours.encoder.layers)
    theirs.decoder.layers = nn.ModuleList(decoder_layer_to_torch(layer) for layer in ours.decoder.layers)
    _copy_norm(theirs.encoder.norm, ours.encoder.norm, "encoder.norm")
    _copy_norm(theirs.decoder.norm, ours.decoder.norm, "decoder.norm")
    return theirs


def from_torch(theirs: nn.Module) -> nn.Module:
    """The attnlab module equivalent to a PyTorch attention module (dispatch on its type)."""
    for cls, fn in (
        (nn.MultiheadAttention, mha_from_torch),
        (nn.TransformerEncoderLayer, encoder_layer_from_torch),
        (nn.TransformerDecoderLayer, decoder_layer_from_torch),
        (nn.Transformer, transformer_from_torch),
    ):
        if isinstance(theirs, cls):
            return fn(theirs)
    raise ValueError(
        f"from_torch reads nn.MultiheadAttention, nn.TransformerEncoderLayer, "
        f"nn.TransformerDecoderLayer or nn.Transformer, got {type(theirs).__name__}"
    )


def to_torch(ours: nn.Module) -> nn.Module:
    """The PyTorch module equivalent to an attnlab module (dispatch on its type)."""
    for cls, fn in (
        (MultiHeadAttention, mha_to_torch),
        (EncoderLayer, encoder_layer_to_torch),
        (DecoderLayer, decoder_layer_to_torch),
        (EncoderDecoder, transformer_to_torch),
    ):
        if isinstance(ours, cls):
            return fn(ours)
    raise ValueError(
        f"to_torch writes MultiHeadAttention, EncoderLayer, DecoderLayer or EncoderDecoder, "
        f"got {type(ours).__name__}"
    )
