"""Lesson 04 (notes section 5.4): the exact parameter count of one post-norm encoder layer."""

from __future__ import annotations

from attnlab.lessons.base import Lesson


def encoder_parameter_count() -> list[str]:
    import numpy as np
    import torch.nn as nn

    from attnlab import ref

    d, h, ff = 512, 8, 2048
    # Formula matches PyTorch's combined QKV projection, biases, output projection,
    # two FFN biases, and two affine LayerNorms (eps=1e-5, post-norm).
    mha = 4*d*d + 4*d
    ffn = 2*d*ff + ff + d
    norms = 4*d
    formula = mha + ffn + norms
    layer = nn.TransformerEncoderLayer(d_model=d, nhead=h, dim_feedforward=ff, dropout=0.0, batch_first=True,
                                       norm_first=False, bias=True)
    torch_count = sum(p.numel() for p in layer.parameters())

    # attnlab: count the numbers in the reference's parameter dict of the same layer
    params = ref.params_from_torch(layer, dtype=np.float32)  # {"attn", "ffn", "norm1", "norm2"}
    count = {group: sum(a.size for a in p.values()) for group, p in params.items()}
    ref_count = sum(count.values())

    return [
        f"MHA formula={mha:,}; FFN formula={ffn:,}; two LayerNorms={norms:,}",
        f"encoder-layer formula={formula:,}; torch count={torch_count:,}; equal={formula == torch_count}",
        "Course shorthand: about 3.15M with FFN biases; original paper's base layer count is approximate.",
        f"attnlab check: attnlab.ref params: attn={count['attn']:,}; ffn={count['ffn']:,}; "
        f"norms={count['norm1'] + count['norm2']:,}; total={ref_count:,}; equal={ref_count == formula}",
        f"attnlab check: weights only 4d^2+2df={4*d*d + 2*d*ff:,} (six layers {6 * (4*d*d + 2*d*ff):,}); "
        f"with biases and norms, six layers={6 * ref_count:,}",
    ]


LESSON = Lesson(
    number="04",
    title="Encoder Parameter Count",
    concept="An explicit formula includes attention biases and affine normalization.",
    interpretation=(
        "The formula and module counts agree under these stated implementation assumptions: "
        "4d^2 + 2df + f + 9d with every bias and both affine LayerNorms counted. Embeddings, positions "
        "and task heads are excluded."
    ),
    func=encoder_parameter_count,
)
