"""The Week 19 course page's `class Block` runs as written, with attnlab's CausalSelfAttention, and
equals attnlab's pre-norm block (the GPT block) on the same weights; a changed weight is noticed."""

from __future__ import annotations

import torch

from attnlab.lessons.week19_block import (
    BLOCK_CODE,
    CausalSelfAttention,
    attnlab_block,
    compare,
    copy_weights,
    page_block_class,
)


def test_the_page_block_equals_attnlabs_pre_norm_block():
    for d, heads, length in ((32, 4, 7), (48, 6, 1), (16, 1, 5)):
        r = compare(d, heads, length=length)
        assert r["max_abs_difference"] < 1e-12
        assert r["page_params"] == r["attnlab_params"] == 12 * d * d + 13 * d  # 4d²+4d, 8d²+5d, 4d


def test_the_comparison_sees_a_changed_weight():
    torch.manual_seed(1)
    page = page_block_class()(16, 2).double().eval()
    ours = attnlab_block(16, 2).double().eval()
    copy_weights(page, ours)
    with torch.no_grad():
        ours.ffn.linear2.bias[0] += 1e-3
    x = torch.randn(1, 4, 16, dtype=torch.float64)
    assert (page(x) - ours(x, is_causal=True)).abs().max() > 1e-4


def test_the_code_is_the_pages_and_causal():
    assert BLOCK_CODE.startswith("class Block(nn.Module):\n    def __init__(self, d, n_heads):")
    assert "x = x + self.attn(self.ln1(x))   # communicate" in BLOCK_CODE
    attn = CausalSelfAttention(8, 2).double()
    x = torch.randn(1, 6, 8, dtype=torch.float64)
    y = attn(x)
    x2 = x.clone()
    x2[0, -1] += 1.0  # a later token cannot change an earlier output
    assert torch.equal(attn(x2)[0, :-1], y[0, :-1])
