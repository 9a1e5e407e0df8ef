"""Read the parameters of PyTorch's own modules, and of attnlab's, into the reference's parameter dicts.

PyTorch stores ``nn.Linear`` weights as ``[d_out, d_in]`` and applies ``x W^T``; the notes (and
attnlab) write ``x W`` with ``W [d_in, d_out]``, so every weight is transposed on the way in.
``nn.MultiheadAttention`` packs W^Q, W^K, W^V into one ``in_proj_weight [3d, d]``.

attnlab's own modules (:class:`attnlab.nn.MultiHeadAttention`, ``EncoderLayer``, ``DecoderLayer``)
keep W^Q, W^K, W^V, W^O in four ``nn.Linear`` (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``) and
the FFN in ``ffn.linear1``/``ffn.linear2`` (+ ``ffn.linear3``, the up projection of a GLU); they are
read by attribute, so this module imports torch lazily: ``attnlab.ref`` itself needs NumPy only.
"""

from __future__ import annotations

import numpy as np


def _np(t, dtype) -> np.ndarray | None:
    return None if t is None else t.detach().cpu().numpy().astype(dtype)


def _mha(m, dtype) -> dict:
    d = m.embed_dim
    if m._qkv_same_embed_dim:
        w = _np(m.in_proj_weight, dtype)  # [3d, d]
        W_q, W_k, W_v = w[:d].T, w[d : 2 * d].T, w[2 * d :].T  # each [d, d]
    else:
        W_q, W_k, W_v = (
            _np(m.q_proj_weight, dtype).T,
            _np(m.k_proj_weight, dtype).T,
            _np(m.v_proj_weight, dtype).T,
        )
    b = _np(m.in_proj_bias, dtype)  # [3d] or None
    out = {"W_q": W_q, "W_k": W_k, "W_v": W_v, "W_o": _np(m.out_proj.weight, dtype).T}
    if b is not None:
        out.update(b_q=b[:d], b_k=b[d : 2 * d], b_v=b[2 * d :])
    if m.out_proj.bias is not None:
        out["b_o"] = _np(m.out_proj.bias, dtype)
    if getattr(m, "bias_k", None) is not None:
        raise ValueError("nn.MultiheadAttention with add_bias_kv=True has no reference equivalent")
    return out


def _norm(m, dtype) -> dict:
    # LayerNorm(bias=False) still centres: beta = 0 (a missing beta would mean RMSNorm in ref.layers)
    beta = _np(m.bias, dtype) if m.bias is not None else np.zeros(m.weight.shape, dtype=dtype)
    return {"gamma": _np(m.weight, dtype), "beta": beta}


def _ffn(layer, dtype) -> dict:
    return {
        "W_1": _np(layer.linear1.weight, dtype).T,
        "b_1": _np(layer.linear1.bias, dtype),
        "W_2": _np(layer.linear2.weight, dtype).T,
        "b_2": _np(layer.linear2.bias, dtype),
    }


def _attnlab_mha(m, dtype) -> dict:
    """W^Q [d, h·d_k], W^K and W^V [d_kv, h_kv·d_k], W^O [h·d_k, d] (+ the biases present)."""
    out = {}
    for w, b, lin in (("W_q", "b_q", m.q_proj), ("W_k", "b_k", m.k_proj), ("W_v", "b_v", m.v_proj)):
        out[w] = _np(lin.weight, dtype).T  # [d_out, d_in] -> [d_in, d_out]
        if lin.bias is not None:
            out[b] = _np(lin.bias, dtype)
    out["W_o"] = _np(m.out_proj.weight, dtype).T
    if m.out_proj.bias is not None:
        out["b_o"] = _np(m.out_proj.bias, dtype)
    return out


def _attnlab_norm(m, dtype) -> dict:
    """LayerNorm ``{"gamma", "beta"}`` (beta = 0 without a bias); RMSNorm ``{"gamma"}``."""
    if "rms" in type(m).__name__.lower():
        return {"gamma": _np(m.weight, dtype)}
    return _norm(m, dtype)


def _attnlab_ffn(ffn, dtype) -> dict:
    out = {"W_1": _np(ffn.linear1.weight, dtype).T, "W_2": _np(ffn.linear2.weight, dtype).T}
    for key, lin in (("b_1", ffn.linear1), ("b_2", ffn.linear2)):
        if lin.bias is not None:
            out[key] = _np(lin.bias, dtype)
    up = getattr(ffn, "linear3", None)  # a GLU's up projection W_3 [d, f]
    if up is not None:
        out["W_3"] = _np(up.weight, dtype).T
        if up.bias is not None:
            out["b_3"] = _np(up.bias, dtype)
    return out


def params_from_attnlab(module, dtype=np.float64) -> dict:
    """Parameters of an :mod:`attnlab.nn` ``MultiHeadAttention``, ``EncoderLayer`` or ``DecoderLayer``
    as a reference parameter dict (weights ``[d_in, d_out]``), the inverse of building the module.

    Returns the dicts :func:`params_from_torch` returns; a decoder layer needs its cross-attention
    (the reference decoder layer always has one).
    """
    name = type(module).__name__
    if name == "MultiHeadAttention":
        return _attnlab_mha(module, dtype)
    if name not in ("EncoderLayer", "DecoderLayer"):
        raise ValueError(
            f"params_from_attnlab reads attnlab.nn MultiHeadAttention, EncoderLayer or DecoderLayer, "
            f"got {name}"
        )
    ffn, norm = _attnlab_ffn(module.ffn, dtype), lambda n: _attnlab_norm(n, dtype)
    if name == "EncoderLayer":
        return {
            "attn": _attnlab_mha(module.self_attn, dtype),
            "ffn": ffn,
            "norm1": norm(module.norm1),
            "norm2": norm(module.norm2),
        }
    if getattr(module, "cross_attn", None) is None:
        raise ValueError("reference decoder layers always have cross-attention; this DecoderLayer has none")
    return {
        "self_attn": _attnlab_mha(module.self_attn, dtype),
        "cross_attn": _attnlab_mha(module.cross_attn, dtype),
        "ffn": ffn,
        "norm1": norm(module.norm1),
        "norm2": norm(module.norm2),
        "norm3": norm(module.norm3),
    }


def params_from_torch(module, dtype=np.float64) -> dict:
    """Parameters of ``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` or
    ``nn.TransformerDecoderLayer`` as a reference parameter dict (weights ``[d_in, d_out]``).
    attnlab's own modules go to :func:`params_from_attnlab`.

    Returns:
        MHA: ``{"W_q","W_k","W_v","W_o","b_q","b_k","b_v","b_o"}``; encoder layer:
        ``{"attn","ffn","norm1","norm2"}``; decoder layer:
        ``{"self_attn","cross_attn","ffn","norm1","norm2","norm3"}``.
    """
    from torch import nn

    if type(module).__module__.startswith("attnlab."):
        return params_from_attnlab(module, dtype)
    if isinstance(module, nn.MultiheadAttention):
        return _mha(module, dtype)
    if isinstance(module, nn.TransformerEncoderLayer):
        return {
            "attn": _mha(module.self_attn, dtype),
            "ffn": _ffn(module, dtype),
            "norm1": _norm(module.norm1, dtype),
            "norm2": _norm(module.norm2, dtype),
        }
    if isinstance(module, nn.TransformerDecoderLayer):
        return {
            "self_attn": _mha(module.self_attn, dtype),
            "cross_attn": _mha(module.multihead_attn, dtype),
            "ffn": _ffn(module, dtype),
            "norm1": _norm(module.norm1, dtype),
            "norm2": _norm(module.norm2, dtype),
            "norm3": _norm(module.norm3, dtype),
        }
    raise ValueError(
        f"params_from_torch reads nn.MultiheadAttention, nn.TransformerEncoderLayer or "
        f"nn.TransformerDecoderLayer, got {type(module).__name__}"
    )
