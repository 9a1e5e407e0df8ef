"""Interop with PyTorch's modules, both directions: outputs equal within 1e-5 (float32).

PyTorch's boolean masks mean "not allowed" where ours mean "may attend", hence the ``~``.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnlab.nn import (
    BlockConfig,
    DecoderLayer,
    EncoderDecoder,
    EncoderLayer,
    MultiHeadAttention,
    causal_mask,
    from_torch,
    to_torch,
)

TOL = dict(rtol=0, atol=1e-5)
PAD = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])  # torch key_padding_mask: True = padding


def _perturb(module: nn.Module, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            if p.ndim == 1:
                p.add_(torch.randn_like(p) * 0.2)
    return module.eval()


@pytest.mark.parametrize("bias", [True, False])
def test_multihead_attention_from_torch(bias):
    torch.manual_seed(0)
    theirs = _perturb(nn.MultiheadAttention(16, 4, bias=bias, batch_first=True), 1)
    ours = from_torch(theirs).eval()
    assert isinstance(ours, MultiHeadAttention)
    q, kv = torch.randn(2, 5, 16), torch.randn(2, 6, 16)
    want, want_w = theirs(q, kv, kv, key_padding_mask=PAD, average_attn_weights=False)
    got, w = ours(q, kv, mask=~PAD[:, None, :], need_weights=True)
    fast, _ = ours(q, kv, mask=~PAD[:, None, :])
    torch.testing.assert_close(got, want, **TOL)
    torch.testing.assert_close(fast, want, **TOL)
    torch.testing.assert_close(w, want_w, **TOL)


def test_multihead_attention_to_torch_with_causal_mask():
    torch.manual_seed(2)
    ours = _perturb(MultiHeadAttention(BlockConfig(12, 3)), 3)
    theirs = to_torch(ours).eval()
    assert isinstance(theirs, nn.MultiheadAttention) and theirs.batch_first
    x = torch.randn(3, 7, 12)
    want, _ = theirs(x, x, x, attn_mask=~causal_mask(7), need_weights=False)
    torch.testing.assert_close(ours(x, is_causal=True)[0], want, **TOL)
    with pytest.raises(ValueError, match="no GQA"):
        to_torch(MultiHeadAttention(BlockConfig(12, 4, num_kv_heads=2)))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_both_directions(norm_first, activation):
    torch.manual_seed(4)
    theirs = _perturb(
        nn.TransformerEncoderLayer(
            16, 4, 48, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
        ),
        5,
    )
    ours = from_torch(theirs).eval()
    assert isinstance(ours, EncoderLayer) and ours.config.norm_place == ("pre" if norm_first else "post")
    x = torch.randn(2, 6, 16)
    want = theirs(x, src_key_padding_mask=PAD)
    got = ours(x, ~PAD[:, None, :])
    real = ~PAD  # PyTorch's inference fast path may zero padded positions; compare the real ones
    torch.testing.assert_close(got[real], want[real], **TOL)
    back = to_torch(ours).eval()
    torch.testing.assert_close(back(x), theirs(x), **TOL)
    torch.testing.assert_close(ours(x), theirs(x), **TOL)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_both_directions(norm_first):
    torch.manual_seed(6)
    theirs = _perturb(
        nn.TransformerDecoderLayer(16, 2, 32, dropout=0.0, batch_first=True, norm_first=norm_first), 7
    )
    ours = from_torch(theirs).eval()
    assert isinstance(ours, DecoderLayer)
    y, mem = torch.randn(2, 5, 16), torch.randn(2, 6, 16)
    want = theirs(y, mem, tgt_mask=~causal_mask(5), memory_key_padding_mask=PAD)
    got = ours(y, mem, is_causal=True, memory_mask=~PAD[:, None, :])
    torch.testing.assert_close(got, want, **TOL)
    back = to_torch(ours).eval()
    torch.testing.assert_close(
        back(y, mem, tgt_mask=~causal_mask(5), memory_key_padding_mask=PAD), want, **TOL
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_whole_transformer_both_directions(norm_first):
    torch.manual_seed(8)
    theirs = _perturb(
        nn.Transformer(16, 4, 2, 2, 32, dropout=0.0, batch_first=True, norm_first=norm_first), 9
    )
    ours = from_torch(theirs).eval()
    assert isinstance(ours, EncoderDecoder) and len(ours.decoder.layers) == 2
    src, tgt = torch.randn(2, 6, 16), torch.randn(2, 5, 16)
    want = theirs(src, tgt, tgt_mask=~causal_mask(5), src_key_padding_mask=PAD, memory_key_padding_mask=PAD)
    got = ours(src, tgt, src_mask=~PAD[:, None, :], memory_mask=~PAD[:, None, :], tgt_is_causal=True)
    torch.testing.assert_close(got, want, **TOL)
    back = to_torch(ours).eval()
    torch.testing.assert_close(
        back(src, tgt, tgt_mask=~causal_mask(5)), theirs(src, tgt, tgt_mask=~causal_mask(5)), **TOL
    )


def test_unknown_modules_are_refused():
    with pytest.raises(ValueError, match="from_torch reads"):
        from_torch(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="to_torch writes"):
        to_torch(nn.Linear(2, 2))
