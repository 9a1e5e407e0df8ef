"""attnlab.nn.MultiHeadAttention (fast path) vs torch.nn.MultiheadAttention, same weights."""

from __future__ import annotations

import torch
from _layers import compare

NAME = "mha"
TITLE = "MultiHeadAttention vs torch.nn.MultiheadAttention"


def run(ctx: dict) -> dict:
    from attnlab.nn import BlockConfig, MultiHeadAttention, mha_to_torch

    torch.manual_seed(0)
    d, h, b, t = 512, 8, 8, 128
    ours = MultiHeadAttention(BlockConfig(d, h))
    theirs = mha_to_torch(ours)
    x = torch.randn(b, t, d)
    res = compare(
        "MultiHeadAttention",
        ours,
        theirs,
        lambda: ours(x)[0],
        lambda: theirs(x, x, x, need_weights=False)[0],
        goal=1.05,
        what=f"self-attention d={d}, h={h}, B={b}, T={t}, float32",
        repeats=8 if ctx.get("quick") else 30,
    )
    diff = res["raw"]["max_abs_diff_eval_output"]
    return {
        "name": NAME,
        "title": TITLE,
        **res,
        "notes": [
            f"Same weights (attnlab.nn.mha_to_torch); outputs agree to {diff:.1e}. nn.MultiheadAttention is "
            "called with need_weights=False (its default, True, computes and averages the weights outside "
            "the "
            "fused kernel); both then reach F.scaled_dot_product_attention.",
        ],
    }
