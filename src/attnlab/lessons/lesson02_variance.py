"""Lesson 02 (notes section 5.2): the variance of a dot product grows like d_k; 1/sqrt(d_k) undoes it."""

from __future__ import annotations

from attnlab.lessons.base import Lesson


def dot_product_variance() -> list[str]:
    import numpy as np

    from attnlab import ref

    rng = np.random.default_rng(42)
    lines, worst = [], 0.0
    for d in (4, 16, 64, 256):
        q = rng.normal(size=(20000, d))
        k = rng.normal(size=(20000, d))
        dot_notes = np.sum(q*k, axis=1)  # the notes' line
        # attnlab: the dot score s^T h of each pair, as 20,000 one-query/one-key attentions
        scores, _, _ = ref.luong_attention(q[:, None, :], k[:, None, :], "dot")  # [20000, 1, 1]
        dot = scores[:, 0, 0]  # [20000]
        worst = max(worst, float(np.max(np.abs(dot - dot_notes))))
        lines.append(f"d_k={d:3d} Var(q.k)={np.var(dot):8.2f} target={d:3d} scaled_var={np.var(dot/np.sqrt(d)):.3f}")
    lines.append("attnlab check: q.k above is the 'dot' score of attnlab.ref.luong_attention")
    lines.append(f"attnlab check: max |attnlab.ref q.k - notes' np.sum(q*k)|={worst:.2e}")
    return lines


LESSON = Lesson(
    number="02",
    title="Dot Product Variance",
    concept="Independent random coordinates test the variance argument.",
    interpretation=(
        "The unscaled empirical variance increases with width; the scaled estimates remain close to one "
        "for this seeded sample. (Var(q.k) = d_k when the coordinates are independent with mean 0 and "
        "variance 1; trained projections need not satisfy that, so scaling limits but does not rule out "
        "softmax saturation.)"
    ),
    func=dot_product_variance,
)
