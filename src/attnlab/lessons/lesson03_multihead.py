"""Lesson 03 (notes section 5.3): split heads, attend, concatenate, apply W^O; check against
torch.nn.MultiheadAttention."""

from __future__ import annotations

from attnlab.lessons.base import Lesson


def multihead_shape_check() -> list[str]:
    import numpy as np
    import torch
    import torch.nn as nn

    from attnlab import ref

    torch.manual_seed(42)
    B, T, D, H = 2, 5, 16, 4
    x = torch.randn(B, T, D)
    layer = nn.MultiheadAttention(D, H, dropout=0.0, batch_first=True)
    y_torch, _ = layer(x, x, x, need_weights=False)

    # the notes' manual torch lines
    q, k, v = [x @ layer.in_proj_weight[i*D:(i+1)*D].T + layer.in_proj_bias[i*D:(i+1)*D] for i in range(3)]
    dh = D // H
    split = lambda a: a.reshape(B, T, H, dh).transpose(1, 2)
    qh, kh, vh = map(split, (q, k, v))
    weights = torch.softmax(qh @ kh.transpose(-2, -1) / dh**0.5, dim=-1)
    heads_notes = (weights @ vh).transpose(1, 2).reshape(B, T, D)
    y_notes = heads_notes @ layer.out_proj.weight.T + layer.out_proj.bias

    # attnlab, step by step: the same layer's weights as [d_in, d_out] matrices, applied on the right
    params = ref.params_from_torch(layer, dtype=np.float32)
    xn = x.numpy()  # [B, T, D]
    q_heads, k_heads, v_heads = (ref.split_heads(xn @ params[f"W_{n}"] + params[f"b_{n}"], H)
                                 for n in "qkv")  # [B, H, T, D/H] each
    z, _ = ref.scaled_dot_product_attention(q_heads, k_heads, v_heads)  # H_i: [B, H, T, D/H]
    concat = ref.merge_heads(z)  # Concat(H_1, ..., H_h): [B, T, D]
    y = concat @ params["W_o"] + params["b_o"]  # W^O on the right: [B, T, D]
    # ... and in one call
    out, _ = ref.multi_head_attention(xn, xn, params, H)  # [B, T, D]

    y_t = y_torch.detach().numpy()
    return [
        f"input [B,T,d_model]=[{B},{T},{D}]",
        f"heads [B,h,T,d_k]=[{','.join(str(n) for n in z.shape)}]; concat={list(concat.shape)}",
        f"max |manual - torch.nn.MultiheadAttention|={np.max(np.abs(y - y_t)):.8f}",
        "attnlab check: manual above is attnlab.ref split_heads -> scaled_dot_product_attention -> merge_heads -> W^O",
        f"attnlab check: max |attnlab.ref.multi_head_attention - torch.nn.MultiheadAttention|={np.max(np.abs(out - y_t)):.8f}",
        f"attnlab check: max |notes' manual torch - torch.nn.MultiheadAttention|="
        f"{(y_notes - y_torch).abs().max().item():.8f}",
    ]


LESSON = Lesson(
    number="03",
    title="Multihead Shape Check",
    concept="Head splitting and output projection are checked against a standard module.",
    interpretation=(
        "Four heads of width four concatenate to width sixteen; the reported discrepancy is a "
        "floating-point comparison, not an exact symbolic identity. attnlab reads the module's packed "
        "in_proj_weight [3d, d] as W^Q, W^K, W^V of shape [d_model, d_model] (transposed: the notes "
        "write x W) and applies W^O on the right of the concatenated heads."
    ),
    func=multihead_shape_check,
)
