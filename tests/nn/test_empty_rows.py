"""One fully-masked-row policy for attnlab.ref and attnlab.nn, through the layers (the policy itself,
for MultiHeadAttention, is in test_multihead.py): a query row the mask leaves with no key is the same
ValueError naming the row in both, or, with empty_rows="zero", PyTorch's convention, equal in both
(float64, <= 1e-10). Padding masks never empty a row, so MiniLM/BERT are unaffected (test_bert.py
compares padded batches with transformers)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab import ref
from attnlab.nn import BlockConfig, DecoderLayer, EncoderLayer, capture

TOL64 = 1e-10


def _layer(cls, seed: int, **kw):
    torch.manual_seed(seed)
    return cls(BlockConfig(8, 2, 16), **kw).double().eval()


def _x(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# query row 2 of batch 1 sees no key (the error names it as (1, 0, 2): [B, h, T_q], a 3-D mask
# is shared by the heads); every other row sees at least one
MASK = torch.ones(2, 4, 4, dtype=torch.bool)
MASK[1, 2] = False
MASK[0, 0, 1:] = False


def _message(error: pytest.ExceptionInfo) -> str:
    return str(error.value)


def test_encoder_layer_refuses_an_empty_row_as_ref_does_and_zeroes_it_alike():
    layer, x = _layer(EncoderLayer, 0), _x(1, 2, 4, 8)
    params = ref.params_from_attnlab(layer)
    with pytest.raises(ValueError) as want:
        ref.encoder_layer(x.numpy(), params, 2, mask=MASK.numpy())
    for points in ([], ["self_attn.weights"]):  # the fused path, and the explicit one a reader forces
        with pytest.raises(ValueError, match=r"\brow \(1, 0, 2\)") as got, capture(layer, points):
            layer(x, MASK)
        assert _message(got) == _message(want)
    expected = ref.encoder_layer(x.numpy(), params, 2, mask=MASK.numpy(), empty_rows="zero")
    fast = layer(x, MASK, empty_rows="zero")
    with capture(layer, ["self_attn.weights"]) as cache:
        slow = layer(x, MASK, empty_rows="zero")
    w = cache["self_attn.weights"]
    np.testing.assert_allclose(fast.detach().numpy(), expected, rtol=0, atol=TOL64)
    np.testing.assert_allclose(slow.detach().numpy(), expected, rtol=0, atol=TOL64)
    assert bool((w[1, :, 2] == 0).all()) and not torch.isnan(w).any()


def test_decoder_layer_applies_the_policy_to_both_attentions():
    layer, y, memory = _layer(DecoderLayer, 2), _x(3, 2, 4, 8), _x(4, 2, 3, 8)
    params = ref.params_from_attnlab(layer)
    memory_mask = torch.ones(2, 4, 3, dtype=torch.bool)
    memory_mask[0, 3] = False  # cross-attention: query row 3 of batch 0 sees no source token
    cases = [  # (self mask, memory mask, the row the error names)
        (MASK, None, r"\(1, 0, 2\)"),
        (None, memory_mask, r"\(0, 0, 3\)"),
    ]
    for self_mask, mem_mask, row in cases:
        kw = {"self_mask": None if self_mask is None else self_mask.numpy()}
        kw["memory_mask"] = None if mem_mask is None else mem_mask.numpy()
        with pytest.raises(ValueError) as want:
            ref.decoder_layer(y.numpy(), memory.numpy(), params, 2, **kw)
        with pytest.raises(ValueError, match=rf"query row {row}") as got:
            layer(y, memory, self_mask=self_mask, memory_mask=mem_mask)
        assert _message(got) == _message(want)
        expected = ref.decoder_layer(y.numpy(), memory.numpy(), params, 2, empty_rows="zero", **kw)
        out = layer(y, memory, self_mask=self_mask, memory_mask=mem_mask, empty_rows="zero")
        np.testing.assert_allclose(out.detach().numpy(), expected, rtol=0, atol=TOL64)


def test_a_padding_mask_never_empties_a_row():
    """Padding masks keys, not queries: every query keeps the real tokens, so the default policy
    never fires on padded batches (MiniLM's and BERT's case) and the output equals ref's."""
    layer, x = _layer(EncoderLayer, 5), _x(6, 3, 5, 8)
    pad = torch.from_numpy(ref.padding_mask([5, 2, 1], 5))  # [B, 1, T_k]
    want = ref.encoder_layer(x.numpy(), ref.params_from_attnlab(layer), 2, mask=pad.numpy())
    np.testing.assert_allclose(layer(x, pad).detach().numpy(), want, rtol=0, atol=TOL64)
