"""The Week 19 course page's ``class Block`` code block, run as written, against attnlab's block.

The page shows a pre-norm decoder-only block in PyTorch and leaves ``CausalSelfAttention``
undefined. attnlab supplies it (:class:`CausalSelfAttention`: attnlab's
:class:`~attnlab.nn.MultiHeadAttention` with the causal mask, ``x [B, T, d] -> [B, T, d]``), runs the
page's code unchanged (:data:`BLOCK_CODE`, :func:`page_block_class`) and compares it with attnlab's
own pre-norm block, the block of :class:`attnlab.models.GPT` (:class:`attnlab.nn.DecoderLayer`
without cross-attention), on the same weights (:func:`compare`):

    x = x + MHA(LN_1(x));  x = x + W_2 GELU(W_1 LN_2(x))     (the page's "communicate", "compute")
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab.nn.config import BlockConfig
from attnlab.nn.layers import DecoderLayer
from attnlab.nn.multihead import MultiHeadAttention

# The course page's code block, verbatim (the page imports torch.nn as nn and defines no
# CausalSelfAttention; both are supplied when it runs).
BLOCK_CODE = """\
class Block(nn.Module):
    def __init__(self, d, n_heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, n_heads)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
    def forward(self, x):
        x = x + self.attn(self.ln1(x))   # communicate
        x = x + self.mlp(self.ln2(x))    # compute
        return x
"""


class CausalSelfAttention(nn.Module):
    """What the page's block calls: ``CausalSelfAttention(d, n_heads)``, ``x [B, T, d] -> [B, T, d]``,
    MultiHead(X) = Concat(H_1..H_h) W^O with H_i = softmax(Q_i K_i^T / sqrt(d_k) + M) V_i, M the causal
    mask. It is attnlab's :class:`~attnlab.nn.MultiHeadAttention` (``self.attn``), with biases."""

    def __init__(self, d: int, n_heads: int) -> None:
        super().__init__()
        self.attn = MultiHeadAttention(BlockConfig(d, n_heads))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, is_causal=True)[0]  # [B, T, d]


def page_block_class() -> type:
    """The page's ``Block`` class, made by running :data:`BLOCK_CODE` as written."""
    namespace = {"nn": nn, "CausalSelfAttention": CausalSelfAttention}
    exec(compile(BLOCK_CODE, "<Week 19 course page: class Block>", "exec"), namespace)
    return namespace["Block"]


def attnlab_block(d: int, n_heads: int) -> DecoderLayer:
    """attnlab's pre-norm block as a GPT builds it: LayerNorm, biases, a GELU MLP of width 4d."""
    config = BlockConfig(d, n_heads, d_ff=4 * d, norm_place="pre", activation="gelu")
    return DecoderLayer(config, cross_attention=False)


def copy_weights(page_block: nn.Module, layer: DecoderLayer) -> None:
    """Give ``layer`` the page block's weights: ln1 -> norm1, attn -> self_attn, ln2 -> norm3 (the
    FFN's norm), mlp[0] -> ffn.linear1, mlp[2] -> ffn.linear2."""
    with torch.no_grad():
        layer.norm1.load_state_dict(page_block.ln1.state_dict())
        layer.self_attn.load_state_dict(page_block.attn.attn.state_dict())
        layer.norm3.load_state_dict(page_block.ln2.state_dict())
        layer.ffn.linear1.load_state_dict(page_block.mlp[0].state_dict())
        layer.ffn.linear2.load_state_dict(page_block.mlp[2].state_dict())


def compare(d: int = 32, n_heads: int = 4, batch: int = 2, length: int = 7, seed: int = 0) -> dict:
    """Run the page's block and attnlab's on the same weights and input ``x [batch, length, d]``
    (float64); returns the max absolute difference and both parameter counts."""
    torch.manual_seed(seed)
    page = page_block_class()(d, n_heads).double().eval()
    for p in page.parameters():  # away from the zero biases and unit scales of a fresh init
        p.data.add_(0.1 * torch.randn_like(p))
    ours = attnlab_block(d, n_heads).double().eval()
    copy_weights(page, ours)
    x = torch.randn(batch, length, d, dtype=torch.float64)
    with torch.no_grad():
        diff = (page(x) - ours(x, is_causal=True)).abs().max().item()
    count = lambda m: sum(p.numel() for p in m.parameters())
    return {"max_abs_difference": diff, "page_params": count(page), "attnlab_params": count(ours)}
