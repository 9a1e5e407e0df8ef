"""The beyond-quadratic kinds in the block (``BlockConfig.attention`` = block_sparse | linear | ssm):
each against an independent computation (SDPA under the window mask; the reference's quadratic
linear attention; the reference's sequential selective scan), generation step by step equal to the
full forward (float64 <= 1e-10) with caches that do not grow, causality, save/load, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnlab import ref
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.nn import (
    BlockConfig,
    DecoderLayer,
    EncoderLayer,
    LinearAttentionState,
    MultiHeadAttention,
    RollingKVCache,
    SelectiveSSM,
    SSMState,
)

KINDS = {  # kind -> the GPTConfig fields that make it
    "block_sparse": {"attention": "block_sparse", "window": 5, "positions": "rope", "num_kv_heads": 1},
    "linear": {"attention": "linear", "positions": "rope", "num_kv_heads": 1},
    "ssm": {"attention": "ssm", "positions": "learned", "state_size": 8},
}


# float32 block-sparse calls use the shapes of tests/nn/test_sparse.py (B=2, h=3, T=300, d_k=16),
# so the one compiled kernel serves them all: a batch of 1 or a single tile would compile again
F32 = {"d_model": 48, "num_heads": 3}
F32_IDS = torch.randint(0, 13, (2, 300), generator=torch.Generator().manual_seed(6))


def _gpt(kind: str, seed: int = 0, d_model: int = 16, num_heads: int = 2) -> GPT:
    """A float64 GPT of the kind (``**F32`` for float32 ones)."""
    torch.manual_seed(seed)
    cfg = GPTConfig(
        vocab_size=13, d_model=d_model, num_heads=num_heads, num_layers=2, d_ff=32, max_len=300, **KINDS[kind]
    )
    return GPT(cfg).double().eval()


@pytest.mark.parametrize("kind", KINDS)
def test_generation_step_by_step_equals_the_full_forward(kind):
    model = _gpt(kind)
    ids = torch.randint(0, 13, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(ids)  # [2, 40, V]
        state = model.start(ids[:, :7])
        logits = [state.last_logits]
        sizes = []
        for t in range(7, 40):
            step, state = model.step(ids[:, t], state)
            logits.append(step)
            sizes.append(state.caches[0].nbytes)
    err = (torch.stack(logits, dim=1) - full[:, 6:]).abs().max().item()
    assert err <= 1e-10, f"{kind}: step-by-step differs from the full forward by {err:.2e}"
    cache = state.caches[0]
    if kind == "block_sparse":
        assert isinstance(cache, RollingKVCache) and cache.held == 5 and cache.length == 40
    else:
        assert isinstance(cache, LinearAttentionState if kind == "linear" else SSMState)
        assert cache.length == 40
    assert len(set(sizes)) == 1, "the cache must not grow with the sequence"


@pytest.mark.parametrize("kind", KINDS)
def test_causal_output_at_t_does_not_see_later_tokens(kind):
    model = _gpt(kind)
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 13, (2, 30), generator=g)
    changed = ids.clone()
    changed[:, 20:] = torch.randint(0, 13, (2, 10), generator=g)
    with torch.no_grad():
        a, b = model(ids), model(changed)
    assert (a[:, :20] - b[:, :20]).abs().max().item() <= 1e-12
    assert (a[:, 20:] - b[:, 20:]).abs().max().item() > 1e-3  # the later positions do change


def test_block_sparse_kind_equals_sdpa_under_the_window_forward_and_backward():
    """float32 through the compiled kernel (the shapes of tests/nn/test_sparse.py: one compiled
    kernel), T = 300 (no multiple of the 128-tile), RoPE: against the sdpa kind, <= 1e-5 relative to
    the largest entry (a weight's gradient sums 600 positions and reaches ~10)."""
    cfg = BlockConfig(48, 3, window=17, positions="rope", attention="block_sparse")
    sparse = MultiHeadAttention(cfg)
    dense = MultiHeadAttention(cfg.replace(attention="sdpa"))
    dense.load_state_dict(sparse.state_dict())
    x = torch.randn(2, 300, 48, generator=torch.Generator().manual_seed(3), requires_grad=True)
    results = []
    for layer in (sparse, dense):
        out, _ = layer(x, is_causal=True)
        loss = (out * torch.linspace(-1, 1, 48)).sum()
        grads = torch.autograd.grad(loss, [x, *layer.parameters()])
        results.append((out.detach(), *grads))
    for got, want in zip(*results):
        assert (got - want).abs().max().item() <= 1e-5 * max(1.0, want.abs().max().item())


def test_linear_kind_equals_the_reference_quadratic_form():
    torch.manual_seed(4)
    layer = MultiHeadAttention(BlockConfig(12, 3, num_kv_heads=1, attention="linear")).double()
    x = torch.randn(2, 9, 12, dtype=torch.float64)
    with torch.no_grad():
        fast, _ = layer(x, is_causal=True)  # chunked prefix sums
        explicit, weights = layer(x, is_causal=True, need_weights=True)  # quadratic, with weights
        q = layer.q_proj(x).view(2, 9, 3, 4).transpose(1, 2)  # [B, h, T, d_k]
        k = layer.k_proj(x).view(2, 9, 1, 4).transpose(1, 2)  # [B, 1, T, d_k]: shared by the heads
        v = layer.v_proj(x).view(2, 9, 1, 4).transpose(1, 2)
    z = ref.linear_attention(q.numpy(), k.numpy(), v.numpy(), causal=True)  # [B, h, T, d_k]
    want = layer.out_proj(torch.from_numpy(z).transpose(1, 2).reshape(2, 9, 12)).detach()
    assert (fast - want).abs().max().item() <= 1e-10
    assert (explicit - want).abs().max().item() <= 1e-10
    np.testing.assert_allclose(weights.sum(-1).numpy(), 1.0, atol=1e-12)
    assert weights.triu(1).abs().max().item() == 0.0


def test_ssm_kind_equals_the_reference_sequential_scan():
    torch.manual_seed(5)
    layer = SelectiveSSM(BlockConfig(6, 1, attention="ssm", state_size=3)).double()
    x = torch.randn(2, 11, 6, dtype=torch.float64)
    with torch.no_grad():
        out, weights = layer(x)
        u, gate = layer.in_proj(x).chunk(2, dim=-1)  # [B, T, d] each
        k = layer.conv_weight.shape[1]
        padded = F.pad(u, (0, 0, k - 1, 0))  # [B, K-1+T, d]
        conv = sum(layer.conv_weight[:, j] * padded[:, j : j + 11] for j in range(k)) + layer.conv_bias
        u = F.silu(conv)  # [B, T, d]
        delta = F.softplus(layer.dt_proj(u) + layer.dt_bias)
        b, c = layer.bc_proj(u).chunk(2, dim=-1)  # [B, T, n] each
        a = -torch.exp(layer.A_log)
    y = ref.selective_scan(*(t.numpy() for t in (u, delta, a, b, c, layer.D.detach())))  # [B, T, d]
    want = layer.out_proj(torch.from_numpy(y) * F.silu(gate)).detach()
    assert weights is None
    assert (out - want).abs().max().item() <= 1e-10


@pytest.mark.parametrize("kind", KINDS)
def test_saved_models_keep_their_kind(kind, tmp_path):
    model = _gpt(kind, **F32).float()
    model.save(tmp_path)
    loaded = GPT.load(tmp_path)
    assert loaded.config == model.config and loaded.config.attention == KINDS[kind]["attention"]
    with torch.no_grad():
        assert torch.equal(loaded.eval()(F32_IDS), model.eval()(F32_IDS))


@pytest.mark.parametrize("kind", KINDS)
def test_the_kinds_train(kind):
    model = _gpt(kind, **F32).float().train()
    loss = F.cross_entropy(model(F32_IDS).flatten(0, 1), F32_IDS.flatten())
    loss.backward()
    grads = [p.grad for p in model.blocks[0].self_attn.parameters()]
    assert all(g is not None and bool(torch.isfinite(g).all()) for g in grads)
    assert sum(g.abs().sum().item() for g in grads) > 0


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"attention": "block_sparse"}, "attention='block_sparse' needs window=W"),
        ({"attention": "linear", "window": 4}, "attention='linear' has no window"),
        ({"attention": "ssm", "window": 4}, "attention='ssm' has no window"),
        ({"attention": "linear", "positions": "alibi"}, "does not take ALiBi"),
        ({"attention": "block_sparse", "window": 4, "positions": "alibi"}, "does not take ALiBi"),
        ({"attention": "ssm", "positions": "rope"}, "no queries or keys for RoPE"),
        ({"attention": "ssm", "num_kv_heads": 1}, "no key/value heads"),
        ({"attention": "ssm", "state_size": 0}, "state_size must be a positive integer"),
        ({"attention": "mamba"}, "attention must be one of"),
    ],
)
def test_bad_settings_are_one_line_errors(fields, message):
    with pytest.raises(ValueError) as err:
        BlockConfig(8, 2, **fields)
    assert message in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match="GPTConfig"):
        GPTConfig(vocab_size=5, d_model=8, num_heads=2, **fields)


def test_ssm_refuses_what_it_cannot_do():
    cfg = BlockConfig(8, 2, attention="ssm")
    with pytest.raises(ValueError, match=r"^EncoderLayer: attention='ssm'.*\bencoder\b"):
        EncoderLayer(cfg)
    with pytest.raises(ValueError, match="has no cross-attention"):
        DecoderLayer(cfg)
    layer, x = SelectiveSSM(cfg), torch.randn(1, 4, 8)
    for kwargs, message in [
        ({"mask": torch.ones(4, 4, dtype=torch.bool)}, "takes no mask"),
        ({"is_causal": False}, "causal by construction"),
        ({"need_weights": True}, "no attention weights"),
        ({"x_kv": torch.randn(1, 4, 8)}, "takes no x_kv"),
        ({"cache": LinearAttentionState()}, "keeps an SSMState"),
    ]:
        with pytest.raises(ValueError, match=message):
            layer(x, **kwargs)
    model = _gpt("ssm")
    with pytest.raises(ValueError, match="takes no mask"):
        model(torch.ones(1, 4, dtype=torch.long), attention_mask=torch.tensor([[0, 1, 1, 1]]))


def test_linear_and_block_sparse_take_a_padding_mask_exactly():
    """A padding mask sends block_sparse through SDPA with the window mask and linear attention
    through its quadratic form: the same logits as the unpadded run at the real positions."""
    for kind in ("block_sparse", "linear"):
        model = _gpt(kind)
        ids = torch.randint(1, 13, (1, 12), generator=torch.Generator().manual_seed(9))
        with torch.no_grad():
            want = model(ids)
            got = model(ids, attention_mask=torch.ones(1, 12, dtype=torch.long))
        assert (got - want).abs().max().item() <= 1e-10
