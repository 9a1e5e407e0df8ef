"""The Week 19 course page's einsum form of attention equals ref's matmul form."""

from __future__ import annotations

import numpy as np

from attnlab import ref


def test_einsum_form_equals_scaled_dot_product_attention():
    rng = np.random.default_rng(5)
    for t_q, t_k, d in ((3, 3, 4), (2, 7, 8), (5, 5, 1)):
        q, k, v = (
            rng.normal(size=(2, 3, t_q, d)),
            rng.normal(size=(2, 3, t_k, d)),
            rng.normal(size=(2, 3, t_k, 6)),
        )
        mask = ref.causal_mask(t_q, t_k)
        scores = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(d)
        weights = ref.masked_softmax(scores, mask)
        out = np.einsum("bhqk,bhkd->bhqd", weights, v)
        ref_out, ref_weights = ref.scaled_dot_product_attention(q, k, v, mask)
        assert np.abs(out - ref_out).max() < 1e-12 and np.abs(weights - ref_weights).max() < 1e-12
