"""attnlab.nn.EncoderLayer vs torch.nn.TransformerEncoderLayer, same weights and options."""

from __future__ import annotations

import torch
from _layers import compare

NAME = "encoder_layer"
TITLE = "EncoderLayer vs torch.nn.TransformerEncoderLayer"


def run(ctx: dict) -> dict:
    from attnlab.nn import BlockConfig, EncoderLayer, encoder_layer_to_torch

    torch.manual_seed(0)
    d, h, f, b, t = 512, 8, 2048, 8, 128
    ours = EncoderLayer(BlockConfig(d, h, f, dropout=0.0))
    theirs = encoder_layer_to_torch(ours)
    x = torch.randn(b, t, d)
    res = compare(
        "EncoderLayer",
        ours,
        theirs,
        lambda: ours(x),
        lambda: theirs(x),
        goal=1.1,
        what=f"post-norm ReLU layer d={d}, h={h}, d_ff={f}, B={b}, T={t}, dropout 0, float32",
        repeats=6 if ctx.get("quick") else 20,
    )
    diff = res["raw"]["max_abs_diff_eval_output"]
    return {
        "name": NAME,
        "title": TITLE,
        **res,
        "notes": [
            f"Same weights and options (attnlab.nn.encoder_layer_to_torch); outputs agree to {diff:.1e}.",
            "Dropout is 0 in both (torch's default is 0.1; dropout > 0 would send both to "
            "SDPA's math kernel).",
            "In inference (eval, no_grad) torch's layer takes its fused 'fast path' "
            "(torch._transformer_encoder_layer_fwd); attnlab has no such path, hence the inference row.",
        ],
    }
