"""Logit lens: the last layer reproduces the model's logits exactly; the residual stream's writes
add up to each layer's output; the eventual token's rank is 0 at the last layer."""

from __future__ import annotations

import pytest
import torch

from attnlab.interp.lens import eventual_token_by_layer, logit_lens, residual_stream
from attnlab.models.gpt import GPT, GPTConfig


@pytest.fixture
def gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=19, d_model=16, num_heads=2, num_layers=3, d_ff=32, max_len=20)).eval()


def test_last_layer_of_the_lens_is_the_models_logits(gpt):
    ids = torch.randint(0, 19, (2, 9), generator=torch.Generator().manual_seed(0))
    lens = logit_lens(gpt, ids)  # [4, 2, 9, 19]
    assert lens.shape == (4, 2, 9, 19)
    with torch.no_grad():
        logits = gpt(ids)
    assert torch.equal(lens[-1], logits)
    # layer 0: the final norm recomputed from the embeddings, not the last layer's statistics
    with torch.no_grad():
        emb = gpt.tok_embed(ids) + gpt.pos_embed.weight[:9]
        torch.testing.assert_close(
            lens[0],
            gpt.lm_head(
                torch.nn.functional.layer_norm(emb, (16,), gpt.norm.weight, gpt.norm.bias, gpt.norm.eps)
            ),
            rtol=0,
            atol=1e-6,
        )
    by_layer = eventual_token_by_layer(lens)
    assert bool((by_layer["rank"][-1] == 0).all())
    assert by_layer["prob"].shape == (4, 9) and bool((by_layer["prob"] <= 1).all())


def test_residual_writes_add_up(gpt):
    ids = torch.randint(0, 19, (3, 7), generator=torch.Generator().manual_seed(1))
    s = residual_stream(gpt, ids)
    for layer, block in enumerate(gpt.blocks):
        with torch.no_grad():
            a, _ = block.self_attn(block.norm1(s.resid[layer]), is_causal=True)  # the attention write
        torch.testing.assert_close(s.attn[layer], a, rtol=0, atol=1e-6)
        torch.testing.assert_close(s.resid[layer + 1], s.resid[layer] + s.attn[layer] + s.mlp[layer])
    norms = s.norms()
    assert norms["resid"].shape == (4, 7) and norms["attn"].shape == (3, 7)


def test_needs_eval_mode_and_a_gpt(gpt):
    with pytest.raises(ValueError, match="eval mode"):
        residual_stream(gpt.train(), torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"^the residual stream view\b.*\bdecoder-only\b.*\bLinear$"):
        residual_stream(torch.nn.Linear(2, 2), torch.zeros(1, 3, dtype=torch.long))


def test_figures_draw(gpt, tmp_path):
    from attnlab.viz import logit_lens_figure, residual_norms_figure

    ids = torch.randint(0, 19, (2, 9), generator=torch.Generator().manual_seed(2))
    stream = residual_stream(gpt, ids)
    by_layer = eventual_token_by_layer(logit_lens(gpt, ids, stream))
    a = logit_lens_figure(by_layer, [str(i) for i in ids[0].tolist()], tmp_path / "lens.png")
    b = residual_norms_figure(stream.norms(), tmp_path / "norms.png")
    assert a.stat().st_size > 5_000 and b.stat().st_size > 5_000


@pytest.mark.parametrize("kw", [{}, {"ffn": "none"}, {"attention": "ssm", "positions": "none"}])
def test_stream_equals_running_the_blocks_one_by_one(kw):
    """The captured stream equals what the former reader computed by running each block by hand from
    the embeddings (h_l exactly; m_l = h_l - h_{l-1} - a_l to rounding; 0 without an FFN), for
    attention, attention-only and state-space blocks alike."""
    torch.manual_seed(1)
    cfg = GPTConfig(vocab_size=19, d_model=16, num_heads=2, num_layers=3, d_ff=32, max_len=20, **kw)
    gpt = GPT(cfg).eval()
    ids = torch.randint(0, 19, (2, 7), generator=torch.Generator().manual_seed(4))
    s = residual_stream(gpt, ids)
    with torch.no_grad():
        x = gpt.tok_embed(ids)
        x = x if gpt.pos_embed is None else gpt.pos_embed(x, 0)  # h_0 [B, T, d]
        assert torch.equal(s.resid[0], x)
        for layer, block in enumerate(gpt.blocks):
            y = block(x, is_causal=True)  # h_l
            assert torch.equal(s.resid[layer + 1], y)
            torch.testing.assert_close(s.mlp[layer], y - x - s.attn[layer], rtol=0, atol=1e-5)
            x = y
    if cfg.ffn == "none":
        assert all(float(m.abs().max()) == 0.0 for m in s.mlp)
