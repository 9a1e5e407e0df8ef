"""Lesson 01 (notes section 5.1): attention from scratch, checked against torch's SDPA."""

from __future__ import annotations

from attnlab.lessons.base import Lesson


def attention_from_scratch() -> list[str]:
    import numpy as np
    import torch
    import torch.nn.functional as F

    from attnlab import ref

    rng = np.random.default_rng(42)
    torch.manual_seed(42)
    q = rng.normal(size=(1, 2, 3, 4)).astype(np.float32)  # [B, h, T_q, d_k]
    k = rng.normal(size=(1, 2, 5, 4)).astype(np.float32)  # [B, h, T_k, d_k]
    v = rng.normal(size=(1, 2, 5, 4)).astype(np.float32)  # [B, h, T_k, d_v]

    # the notes' NumPy lines
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    z = scores - scores.max(axis=-1, keepdims=True)
    a_notes = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    y_notes = a_notes @ v

    # attnlab: softmax(Q K^T / sqrt(d_k)) V, weights [1, 2, 3, 5], output [1, 2, 3, 4]
    y, a = ref.scaled_dot_product_attention(q, k, v)
    yt = F.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v))

    return [
        f"attention shape={y.shape}; row-sum range={a.sum(-1).min():.6f}..{a.sum(-1).max():.6f}",
        f"max |NumPy - torch SDPA|={np.max(np.abs(y - yt.numpy())):.8f}",
        f"attnlab check: NumPy above is attnlab.ref.scaled_dot_product_attention (float32 in, {y.dtype} out)",
        f"attnlab check: max |attnlab.ref - notes' NumPy| output={np.max(np.abs(y - y_notes)):.8f}, "
        f"weights={np.max(np.abs(a - a_notes)):.8f}",
    ]


LESSON = Lesson(
    number="01",
    title="Attention From Scratch",
    concept="Scaled attention computes normalized rows and a value mixture.",
    interpretation=(
        "The row sums are one to the shown precision and the NumPy result agrees with PyTorch SDPA to "
        "the reported floating-point tolerance. Here the NumPy result is attnlab's reference "
        "(attnlab.ref.scaled_dot_product_attention); the notes' own five NumPy lines run beside it and "
        "agree with it to float32 rounding."
    ),
    func=attention_from_scratch,
)
