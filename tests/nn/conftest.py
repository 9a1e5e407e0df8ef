"""Helpers shared by the engine tests: reference parameter dicts read from attnlab modules."""

from __future__ import annotations

import numpy as np
import pytest


def _np(t):
    return None if t is None else t.detach().cpu().numpy().astype(np.float64)


def mha_params(m) -> dict:
    """Reference dict (weights [d_in, d_out]) of an attnlab MultiHeadAttention."""
    p = {
        "W_q": _np(m.q_proj.weight).T,
        "W_k": _np(m.k_proj.weight).T,
        "W_v": _np(m.v_proj.weight).T,
        "W_o": _np(m.out_proj.weight).T,
    }
    for key, lin in (("b_q", m.q_proj), ("b_k", m.k_proj), ("b_v", m.v_proj), ("b_o", m.out_proj)):
        if lin.bias is not None:
            p[key] = _np(lin.bias)
    return p


def layer_params(layer) -> dict:
    """Reference dict of an attnlab EncoderLayer or DecoderLayer."""
    ffn = {
        "W_1": _np(layer.ffn.linear1.weight).T,
        "b_1": _np(layer.ffn.linear1.bias),
        "W_2": _np(layer.ffn.linear2.weight).T,
        "b_2": _np(layer.ffn.linear2.bias),
    }

    def norm(n):
        return {"gamma": _np(n.weight), "beta": _np(n.bias)}

    if getattr(layer, "cross_attn", None) is None and hasattr(layer, "norm3"):
        raise ValueError("reference decoder layers always have cross-attention")
    if hasattr(layer, "norm3"):
        return {
            "self_attn": mha_params(layer.self_attn),
            "cross_attn": mha_params(layer.cross_attn),
            "ffn": ffn,
            "norm1": norm(layer.norm1),
            "norm2": norm(layer.norm2),
            "norm3": norm(layer.norm3),
        }
    return {
        "attn": mha_params(layer.self_attn),
        "ffn": ffn,
        "norm1": norm(layer.norm1),
        "norm2": norm(layer.norm2),
    }


@pytest.fixture
def ref_mha_params():
    return mha_params


@pytest.fixture
def ref_layer_params():
    return layer_params
