"""Week 19 code block 1 (the Week 19 course page's ``class Block``), run as written through attnlab."""

from __future__ import annotations

from attnlab.lessons.base import Lesson


def week19_block() -> list[str]:
    import torch
    from torch import nn

    from attnlab.lessons.week19_block import CausalSelfAttention, attnlab_block, copy_weights

    # the course page's code, as written (the page leaves CausalSelfAttention undefined: attnlab's)
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

    torch.manual_seed(0)
    d, n_heads = 32, 4
    block = Block(d, n_heads).double().eval()
    for p in block.parameters():  # away from a fresh init's zero biases and unit norm scales
        p.data.add_(0.1 * torch.randn_like(p))
    x = torch.randn(2, 7, d, dtype=torch.float64)  # [B, T, d]
    with torch.no_grad():
        y = block(x)  # [B, T, d]
        ours = attnlab_block(d, n_heads).double().eval()  # attnlab's GPT block: DecoderLayer, pre-norm
        copy_weights(block, ours)
        diff = (y - ours(x, is_causal=True)).abs().max().item()
        x2 = x.clone()
        x2[:, -1] += 1.0  # change the last token only
        causal = torch.equal(block(x2)[:, :-1], y[:, :-1])
    count = lambda m: sum(p.numel() for p in m.parameters())
    attn, mlp, norms = count(block.attn), count(block.mlp), count(block.ln1) + count(block.ln2)
    return [
        "(the page's code prints nothing: it defines Block; attnlab runs it on x [B, T, d] = [2, 7, 32])",
        f"Block(d={d}, n_heads={n_heads}): x {list(x.shape)} -> {list(y.shape)}",
        f"parameters: attention={attn:,} (4d^2+4d); MLP={mlp:,} (8d^2+5d); two LayerNorms={norms:,} (4d); "
        f"total={count(block):,}; MLP share={mlp / count(block):.2f}",
        f"attnlab check: max |page Block - attnlab's pre-norm block (GPT's DecoderLayer)|={diff:.8f} "
        f"on the same weights; parameters equal={count(ours) == count(block)}",
        f"attnlab check: a change to the last token leaves every earlier output unchanged: {causal}",
    ]


LESSON = Lesson(
    number="w19-1",
    title="The Transformer Block",
    concept=(
        "A pre-norm, decoder-only block: x = x + MultiHeadAttention(LayerNorm(x)), then "
        "x = x + MLP(LayerNorm(x)); attention communicates between positions, the MLP computes "
        "at each position."
    ),
    interpretation=(
        "The page shows the code and no output, so attnlab prints what running it gives. It runs the "
        "page's class unchanged, with the CausalSelfAttention the page leaves undefined supplied by "
        "attnlab (its MultiHeadAttention with the causal mask). The output keeps the input's shape "
        "[B, T, d], as the residual additions need. The MLP holds 8d^2 + 5d of the 12d^2 + 13d "
        "parameters (0.66: the page's 'about two-thirds'). On the same weights the page's block "
        "equals the block attnlab's GPT is built from, and the causal mask keeps a later token out "
        "of every earlier output."
    ),
    func=week19_block,
)
