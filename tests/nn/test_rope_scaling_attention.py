"""MultiHeadAttention with a RoPE scaling: the engine equals the reference (float64) for every
scaling and both layouts, on the fast and explicit paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab import ref
from attnlab.nn import BlockConfig, MultiHeadAttention

SCALINGS = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4, "beta_fast": 8.0},
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "original_max_position_embeddings": 16,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
    },
}


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("kind", SCALINGS)
def test_scaled_rope_attention_matches_reference(ref_mha_params, kind, layout):
    torch.manual_seed(0)
    config = BlockConfig(
        32, 2, positions="rope", rope_layout=layout, rope_base=100.0, rope_scaling=SCALINGS[kind]
    )
    m = MultiHeadAttention(config).double().eval()
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    want, want_w = ref.multi_head_attention(
        x.numpy(),
        None,
        ref_mha_params(m),
        2,
        mask=ref.causal_mask(9),
        positions="rope",
        rope_base=100.0,
        rope_layout=layout,
        rope_scaling=SCALINGS[kind],
    )
    fast, _ = m(x, is_causal=True)
    slow, w = m(x, is_causal=True, need_weights=True)
    np.testing.assert_allclose(fast.detach().numpy(), want, rtol=0, atol=1e-10)
    np.testing.assert_allclose(w.detach().numpy(), want_w, rtol=0, atol=1e-10)
    plain, _ = ref.multi_head_attention(
        x.numpy(),
        None,
        ref_mha_params(m),
        2,
        mask=ref.causal_mask(9),
        positions="rope",
        rope_base=100.0,
        rope_layout=layout,
    )
    assert np.abs(plain - want).max() > 1e-3  # the scaling changed the output
