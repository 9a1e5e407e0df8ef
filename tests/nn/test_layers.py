"""FeedForward, EncoderLayer, DecoderLayer and the stacks against the NumPy reference (float64, <= 1e-10)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab import ref
from attnlab.nn import (
    BlockConfig,
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    FeedForward,
    KVCache,
    capture,
)

TOL64 = 1e-10


def _randomise(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    module = module.double().eval()
    with torch.no_grad():
        for p in module.parameters():
            if p.ndim == 1:  # biases and LayerNorm gains/shifts away from their initial 0 / 1
                p.add_(torch.randn_like(p) * 0.3)
    return module


def _x(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh"])
def test_feed_forward_matches_reference(activation):
    ffn = _randomise(FeedForward(BlockConfig(6, 2, 20, activation=activation)), 0)
    x = _x(1, 2, 3, 6)
    params = {
        "W_1": ffn.linear1.weight.detach().numpy().T,
        "b_1": ffn.linear1.bias.detach().numpy(),
        "W_2": ffn.linear2.weight.detach().numpy().T,
        "b_2": ffn.linear2.bias.detach().numpy(),
    }
    want = ref.feed_forward(x.numpy(), params, activation)
    np.testing.assert_allclose(ffn(x).detach().numpy(), want, rtol=0, atol=TOL64)


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("num_kv_heads", [None, 2])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_reference(ref_layer_params, norm, num_kv_heads, activation):
    layer = _randomise(
        EncoderLayer(
            BlockConfig(16, 4, 40, norm_place=norm, activation=activation, num_kv_heads=num_kv_heads)
        ),
        2,
    )
    x = _x(3, 2, 5, 16)
    mask = torch.tensor([[True] * 5, [True] * 2 + [False] * 3])[:, None, :]  # padding [B, 1, T]
    want = ref.encoder_layer(
        x.numpy(),
        ref_layer_params(layer),
        4,
        norm=norm,
        activation=activation,
        mask=mask.numpy(),
        num_kv_heads=num_kv_heads,
    )
    got = layer(x, mask)
    with capture(layer, ["self_attn.weights"]) as cache:  # the weights: the explicit path
        got_w = layer(x, mask)
    w = cache["self_attn.weights"]
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=0, atol=TOL64)
    np.testing.assert_allclose(got_w.detach().numpy(), want, rtol=0, atol=TOL64)
    assert w.shape == (2, 4, 5, 5) and bool((w[1, :, :, 2:] == 0).all())


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("num_kv_heads", [None, 1])
def test_decoder_layer_matches_reference(ref_layer_params, norm, num_kv_heads):
    layer = _randomise(DecoderLayer(BlockConfig(12, 2, 30, norm_place=norm, num_kv_heads=num_kv_heads)), 4)
    y, mem = _x(5, 2, 4, 12), _x(6, 2, 6, 12)
    mem_mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, :]  # [B, 1, S]
    want = ref.decoder_layer(
        y.numpy(),
        mem.numpy(),
        ref_layer_params(layer),
        2,
        norm=norm,
        self_mask=ref.causal_mask(4),
        memory_mask=mem_mask.numpy(),
        num_kv_heads=num_kv_heads,
    )
    got = layer(y, mem, memory_mask=mem_mask, is_causal=True)
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=0, atol=TOL64)
    with capture(layer, ["*.weights"]) as cache:
        z = layer(y, mem, memory_mask=mem_mask, is_causal=True)
    sw, cw = cache["self_attn.weights"], cache["cross_attn.weights"]
    np.testing.assert_allclose(z.detach().numpy(), want, rtol=0, atol=TOL64)
    assert sw.shape == (2, 2, 4, 4) and cw.shape == (2, 2, 4, 6)
    assert bool((sw.triu(1) == 0).all()) and bool((cw[1, ..., 4:] == 0).all())


def test_decoder_layer_steps_with_caches_equal_full_pass():
    layer = _randomise(
        DecoderLayer(BlockConfig(16, 4, 24, norm_place="pre", num_kv_heads=2, positions="rope")), 7
    )
    y, mem = _x(8, 2, 5, 16), _x(9, 2, 3, 16)
    full = layer(y, mem, is_causal=True)
    cache, mcache = KVCache(), KVCache(static=True)
    steps = [
        layer(y[:, t : t + 1], mem if t == 0 else None, is_causal=True, cache=cache, memory_cache=mcache)
        for t in range(5)
    ]
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=0, atol=1e-12)


def test_decoder_layer_without_cross_attention_is_a_gpt_block():
    """x = x + MHA(LN(x)); x = x + MLP(LN(x)) written out by hand from the layer's own parts."""
    block = BlockConfig(8, 2, 32, norm_place="pre", activation="gelu")
    layer = _randomise(DecoderLayer(block, cross_attention=False), 10)
    assert layer.cross_attn is None and layer.norm2 is None
    x = _x(11, 1, 4, 8)
    a = x + layer.self_attn(layer.norm1(x), is_causal=True)[0]
    want = a + layer.ffn.linear2(torch.nn.functional.gelu(layer.ffn.linear1(layer.norm3(a))))
    torch.testing.assert_close(layer(x, is_causal=True), want, rtol=0, atol=1e-12)


def test_stacks_compose_layers_and_final_norm(ref_layer_params):
    pre = BlockConfig(8, 2, 16, norm_place="pre")
    enc = _randomise(Encoder(2, pre), 12)
    dec = _randomise(Decoder(2, pre), 13)
    post = pre.replace(norm_place="post")
    assert enc.norm is not None and Encoder(1, post).norm is None  # post-norm stacks need no final norm
    x, y = _x(14, 1, 3, 8), _x(15, 1, 2, 8)
    h = x.numpy()
    for layer in enc.layers:
        h = ref.encoder_layer(h, ref_layer_params(layer), 2, norm="pre")
    h = ref.layer_norm(h, enc.norm.weight.detach().numpy(), enc.norm.bias.detach().numpy())
    with capture(enc, ["layers.*.self_attn.weights"]) as ws:
        mem = enc(x)
    np.testing.assert_allclose(mem.detach().numpy(), h, rtol=0, atol=TOL64)
    assert sorted(ws) == ["layers.0.self_attn.weights", "layers.1.self_attn.weights"]
    z = y.numpy()
    for layer in dec.layers:
        z = ref.decoder_layer(z, h, ref_layer_params(layer), 2, norm="pre", self_mask=ref.causal_mask(2))
    z = ref.layer_norm(z, dec.norm.weight.detach().numpy(), dec.norm.bias.detach().numpy())
    np.testing.assert_allclose(dec(y, mem, is_causal=True).detach().numpy(), z, rtol=0, atol=TOL64)


def test_bad_layer_options():
    with pytest.raises(ValueError, match=r"^BlockConfig\.norm_place\b.*'pre'.*, got 'sandwich'"):
        BlockConfig(8, 2, 16, norm_place="sandwich")
    with pytest.raises(ValueError, match=r"^BlockConfig\.activation\b.*'gelu'.*, got 'swish'"):
        BlockConfig(8, 2, 16, activation="swish")
    with pytest.raises(ValueError, match=r"^EncoderLayer\b.*\bBlockConfig\b.*\bint$"):
        EncoderLayer(8)
    with pytest.raises(ValueError, match="pass memory"):
        DecoderLayer(BlockConfig(8, 2, 16))(torch.randn(1, 2, 8))
    with pytest.raises(ValueError, match=r"^x\b.*\bd_model=8\b.*\[1, 2, 7\]"):
        FeedForward(BlockConfig(8, 2, 16))(
            torch.randn(1, 2, 7)
        )  # was torch's "mat1 and mat2 shapes cannot be multiplied"


@pytest.mark.parametrize("scale", [1.0, 1e30, 3e38 / 16, 1e-30])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_norms_of_huge_inputs_are_the_reference_to_rounding(scale, dtype):
    """nn.RMSNorm gave zeros at 1e30 (mean(x^2) overflowed float32); both norms now match
    ref.rms_norm / ref.layer_norm (which scale each row by a power of two) at every scale."""
    from attnlab.nn import LayerNorm, RMSNorm

    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 5, 16, generator=g, dtype=torch.float64) * scale).to(dtype)
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    rms, ln = RMSNorm(16).to(dtype), LayerNorm(16).to(dtype)
    with torch.no_grad():
        for m in (rms, ln):
            m.weight.copy_(torch.randn(16, generator=g, dtype=dtype))
        ln.bias.copy_(torch.randn(16, generator=g, dtype=dtype))
        got_rms, got_ln = rms(x).double().numpy(), ln(x).double().numpy()
    xs = x.double().numpy()
    w, b = rms.weight.double().detach().numpy(), ln.bias.double().detach().numpy()
    want_rms = ref.rms_norm(xs, w, rms.eps)
    want_ln = ref.layer_norm(xs, ln.weight.double().detach().numpy(), b, ln.eps)
    assert abs(got_rms - want_rms).max() < tol * max(1.0, abs(want_rms).max())
    assert abs(got_ln - want_ln).max() < tol * max(1.0, abs(want_ln).max())
    assert scale < 1 or abs(got_rms).max() > 0.1  # not the zeros the overflow gave


@pytest.mark.parametrize("eps", [-1, 0, float("nan"), float("inf"), "1e-5"])
def test_norm_eps_must_be_a_finite_positive_number(eps):
    from attnlab.nn import LayerNorm, RMSNorm

    for cls in (RMSNorm, LayerNorm):
        with pytest.raises(ValueError) as exc:
            cls(8, eps=eps)
        assert str(exc.value) == f"{cls.__name__}.eps must be a finite number > 0, got {eps!r}"


def test_norms_choose_their_scaling_per_row_on_the_device():
    """No aminmax read back: ordinary rows are the fused kernel's bit for bit, rows beyond 2^32 in
    the same batch are rescaled exactly (the reference's numbers), a huge constant row is beta, and
    a huge row with a relative spread of 1e-12 (float64) is normalised, not swamped by eps."""
    import torch.nn.functional as F

    from attnlab.nn import LayerNorm, RMSNorm

    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 8, generator=g, dtype=torch.float64) * 10
    x[1] *= 1e30
    x[2] = 1e200 * (1 + 1e-12 * torch.arange(8, dtype=torch.float64))
    x[3] = 7e300
    ln, rms = LayerNorm(8).double(), RMSNorm(8).double()
    with torch.no_grad():
        ln.bias.copy_(torch.linspace(-1, 1, 8, dtype=torch.float64))
        got_ln, got_rms = ln(x), rms(x)
        assert torch.equal(got_ln[0], F.layer_norm(x[:1], (8,), ln.weight, ln.bias, ln.eps)[0])
        assert torch.equal(got_rms[0], F.rms_norm(x[:1], (8,), rms.weight, rms.eps)[0])
    xs = x.numpy()
    want_ln = ref.layer_norm(xs, np.ones(8), ln.bias.detach().numpy(), ln.eps)
    want_rms = ref.rms_norm(xs, np.ones(8), rms.eps)
    rows = [0, 1, 3]  # row 2's spread is 1e4 ulps: the mean's rounding shows at 1e-6 in either formula
    np.testing.assert_allclose(got_ln.detach().numpy()[rows], want_ln[rows], atol=1e-9)
    np.testing.assert_allclose(got_ln.detach().numpy()[2], want_ln[2], rtol=1e-4)
    np.testing.assert_allclose(got_rms.detach().numpy(), want_rms, rtol=1e-12)
    assert torch.equal(got_ln[3], ln.bias)
    assert abs(got_ln[2, 0] - ln.bias[0]).item() > 1.5  # -1.53: the spread normalised to unit variance
