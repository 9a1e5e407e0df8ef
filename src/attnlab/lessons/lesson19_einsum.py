"""Week 19 code block 2 (the Week 19 course page's einsum form of attention), run through attnlab."""

from __future__ import annotations

from attnlab.lessons.base import Lesson


def week19_einsum() -> list[str]:
    import math

    import numpy as np
    import torch
    import torch.nn.functional as F

    from attnlab import ref

    torch.manual_seed(0)
    B, h, T, d = 2, 4, 5, 8  # d is the per-head width d_k here: the page's formula divides by sqrt(d_k)
    Q, K, V = (torch.randn(B, h, T, d, dtype=torch.float64) for _ in range(3))  # [B, h, T, d_k]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)  # M: -inf above the diagonal

    # the page's three lines
    scores = torch.einsum('bhqd,bhkd->bhqk', Q, K) / math.sqrt(d)
    weights = torch.softmax(scores + mask, dim=-1)
    out = torch.einsum('bhqk,bhkd->bhqd', weights, V)

    sdpa = F.scaled_dot_product_attention(Q, K, V, is_causal=True)  # [B, h, T, d_k]
    y, a = ref.scaled_dot_product_attention(Q.numpy(), K.numpy(), V.numpy(), ref.causal_mask(T))
    sums = weights.sum(-1)
    return [
        "(the page's lines print nothing; attnlab runs them on Q, K, V [B, h, T, d_k] = [2, 4, 5, 8])",
        f"scores={list(scores.shape)}; weights={list(weights.shape)}; out={list(out.shape)}",
        f"row-sum range={sums.min():.6f}..{sums.max():.6f}; weight above the diagonal={weights.triu(1).abs().max():.1f}",
        f"attnlab check: max |einsum - torch SDPA (is_causal)|={(out - sdpa).abs().max():.8f}",
        f"attnlab check: max |attnlab.ref - einsum| output={np.abs(y - out.numpy()).max():.8f}, "
        f"weights={np.abs(a - weights.numpy()).max():.8f}",
    ]


LESSON = Lesson(
    number="w19-2",
    title="Attention in einsum",
    concept=(
        "Write attention once with einsum to fix the shapes: scores [B, h, T_q, T_k] from Q and K "
        "[B, h, T, d_k], weights = softmax(scores + mask), out [B, h, T_q, d_k] from weights and V."
    ),
    interpretation=(
        "The page's lines are a sketch and print nothing, so attnlab prints the shapes they give and "
        "checks them. Two things are filled in: the page's sqrt(d) is the per-head width d_k "
        "(sqrt(d_k) in the page's formula; the heads here are 8 wide), and its mask is the causal "
        "M, -inf above the diagonal, so each row's weight on future keys is 0. The result equals "
        "PyTorch's fused attention with is_causal and attnlab.ref.scaled_dot_product_attention (its "
        "matmul form) to float64 rounding."
    ),
    func=week19_einsum,
)
