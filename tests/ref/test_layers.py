"""GELU, LayerNorm, RMSNorm, the FFN, and whole encoder/decoder layers against torch's own modules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnlab import ref

# Stated tolerances: max absolute difference from the independent implementation.
TOL = {np.float64: 1e-10, np.float32: 1e-5}
DTYPES = [np.float64, np.float32]
TORCH = {np.float64: torch.float64, np.float32: torch.float32}
SEEDS = st.integers(0, 2**32 - 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_torch(dtype, approximate):
    x = np.linspace(-8, 8, 2001).astype(dtype)
    got = ref.gelu(x, approximate=approximate)
    assert got.dtype == dtype
    assert np.max(np.abs(got - F.gelu(torch.from_numpy(x), approximate=approximate).numpy())) <= TOL[dtype]


def test_gelu_exact_values():
    # GELU(x) = x Phi(x): Phi(0) = 1/2, Phi(1) = 0.8413447460685429
    np.testing.assert_allclose(
        ref.gelu(np.array([0.0, 1.0, -1.0])), [0.0, 0.8413447460685429, -0.15865525393145707], atol=1e-15
    )
    np.testing.assert_array_equal(ref.relu(np.array([-2.0, 0.0, 3.0])), [0.0, 0.0, 3.0])


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=25, deadline=None)
@given(
    seed=SEEDS,
    shape=st.lists(st.integers(1, 5), min_size=0, max_size=2).map(tuple),
    d=st.integers(2, 16),
    eps=st.sampled_from([1e-5, 1e-6, 0.1]),
)
def test_layer_norm_and_rms_norm_match_torch(dtype, seed, shape, d, eps):
    g = np.random.default_rng(seed)
    x = (g.normal(size=shape + (d,)) * 3 + 1).astype(dtype)
    gamma, beta = g.normal(size=d).astype(dtype), g.normal(size=d).astype(dtype)
    tx, tg, tb = map(torch.from_numpy, (x, gamma, beta))
    ln = ref.layer_norm(x, gamma, beta, eps)
    assert ln.dtype == dtype
    # float32 rounding of x - mu is amplified by 1/sqrt(var + eps): a row of two nearly equal values
    # (seed 41330251: sigma 0.02 at |x| 4.2) is ill-conditioned for both implementations, so the bound
    # grows with the row's condition |x| / sqrt(var + eps) past 10 (float64 keeps 1e-10 regardless)
    var = x.astype(np.float64).var(-1)
    cond = float(np.max(np.abs(x)) / np.sqrt(var.min() + eps))
    tol = TOL[dtype] * (max(1.0, cond / 10) if dtype == np.float32 else 1.0)
    assert np.max(np.abs(ln - F.layer_norm(tx, (d,), tg, tb, eps).numpy())) <= tol
    rms = nn.RMSNorm(d, eps=eps, dtype=TORCH[dtype])
    with torch.no_grad():
        rms.weight.copy_(tg)
        expected = rms(tx).numpy()
    got = ref.rms_norm(x, gamma, eps)
    assert got.dtype == dtype
    assert np.max(np.abs(got - expected)) <= TOL[dtype]


def test_layer_norm_normalises_each_position(rng):
    x = rng.normal(size=(3, 4, 10)) * 7 + 2
    y = ref.layer_norm(x, np.ones(10), np.zeros(10), eps=0.0)
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(-1), 1.0, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh"])
def test_feed_forward_matches_torch(dtype, activation, rng):
    d, f = 6, 11
    W_1, b_1 = rng.normal(size=(d, f)).astype(dtype), rng.normal(size=f).astype(dtype)
    W_2, b_2 = rng.normal(size=(f, d)).astype(dtype), rng.normal(size=d).astype(dtype)
    x = rng.normal(size=(2, 4, d)).astype(dtype)
    got = ref.feed_forward(x, {"W_1": W_1, "b_1": b_1, "W_2": W_2, "b_2": b_2}, activation)
    tx, tW1, tb1, tW2, tb2 = map(torch.from_numpy, (x, W_1, b_1, W_2, b_2))
    act = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda z: F.gelu(z, approximate="tanh")}[activation]
    expected = F.linear(act(F.linear(tx, tW1.T, tb1)), tW2.T, tb2).numpy()
    assert got.dtype == dtype
    assert np.max(np.abs(got - expected)) <= TOL[dtype]
    # position-wise: row t of the output depends on row t of the input only
    x2 = x.copy()
    x2[:, 0] += 1.0
    got2 = ref.feed_forward(x2, {"W_1": W_1, "b_1": b_1, "W_2": W_2, "b_2": b_2}, activation)
    np.testing.assert_array_equal(got2[:, 1:], got[:, 1:])


def _seeded(module, seed):
    torch.manual_seed(seed)
    with torch.no_grad():  # randomise the norms' affine parameters and all biases too
        for name, p in module.named_parameters():
            if "norm" in name or "bias" in name:
                p.normal_()
    return module.eval()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_nn_transformer_encoder_layer(dtype, norm, activation, rng):
    d, h, f, b, t = 16, 4, 24, 3, 6
    torch.manual_seed(0)
    layer = _seeded(
        nn.TransformerEncoderLayer(
            d,
            h,
            f,
            dropout=0.0,
            activation=activation,
            batch_first=True,
            norm_first=norm == "pre",
            dtype=TORCH[dtype],
        ),
        1,
    )
    x = rng.normal(size=(b, t, d)).astype(dtype)
    lengths = np.array([6, 3, 1])
    mask = ref.padding_mask(lengths, t)
    got = ref.encoder_layer(
        x, ref.params_from_torch(layer, dtype), h, norm=norm, activation=activation, mask=mask
    )
    with torch.no_grad():
        expected = layer(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(~mask[:, 0])).numpy()
    assert got.dtype == dtype and got.shape == (b, t, d)
    assert np.max(np.abs(got - expected)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_decoder_layer_matches_nn_transformer_decoder_layer(dtype, norm, activation, rng):
    d, h, f, b, t_tgt, t_src = 12, 3, 20, 2, 5, 7
    torch.manual_seed(0)
    layer = _seeded(
        nn.TransformerDecoderLayer(
            d,
            h,
            f,
            dropout=0.0,
            activation=activation,
            batch_first=True,
            norm_first=norm == "pre",
            dtype=TORCH[dtype],
        ),
        2,
    )
    y = rng.normal(size=(b, t_tgt, d)).astype(dtype)
    memory = rng.normal(size=(b, t_src, d)).astype(dtype)
    src_mask = ref.padding_mask(np.array([7, 4]), t_src)
    params = ref.params_from_torch(layer, dtype)
    got = ref.decoder_layer(
        y,
        memory,
        params,
        h,
        norm=norm,
        activation=activation,
        self_mask=ref.causal_mask(t_tgt),
        memory_mask=src_mask,
    )
    with torch.no_grad():
        expected = layer(
            torch.from_numpy(y),
            torch.from_numpy(memory),
            tgt_mask=torch.from_numpy(~ref.causal_mask(t_tgt)),
            memory_key_padding_mask=torch.from_numpy(~src_mask[:, 0]),
        ).numpy()
    assert got.dtype == dtype and got.shape == (b, t_tgt, d)
    assert np.max(np.abs(got - expected)) <= TOL[dtype]


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_layers_without_bias_match_torch(norm, rng):
    # bias=False: no projection/FFN biases and LayerNorms without beta (still centred, not RMSNorm)
    torch.manual_seed(0)
    enc = _seeded(
        nn.TransformerEncoderLayer(
            8, 2, 16, dropout=0.0, batch_first=True, bias=False, norm_first=norm == "pre", dtype=torch.float64
        ),
        3,
    )
    dec = _seeded(
        nn.TransformerDecoderLayer(
            8, 2, 16, dropout=0.0, batch_first=True, bias=False, norm_first=norm == "pre", dtype=torch.float64
        ),
        4,
    )
    x, memory = rng.normal(size=(2, 4, 8)) * 3 + 1, rng.normal(size=(2, 6, 8))
    p_enc, p_dec = ref.params_from_torch(enc), ref.params_from_torch(dec)
    assert "b_q" not in p_enc["attn"] and not p_enc["norm1"]["beta"].any()
    with torch.no_grad():
        want_enc = enc(torch.from_numpy(x)).numpy()
        want_dec = dec(
            torch.from_numpy(x), torch.from_numpy(memory), tgt_mask=torch.from_numpy(~ref.causal_mask(4))
        ).numpy()
    got_enc = ref.encoder_layer(x, p_enc, 2, norm=norm)
    got_dec = ref.decoder_layer(x, memory, p_dec, 2, norm=norm, self_mask=ref.causal_mask(4))
    assert np.max(np.abs(got_enc - want_enc)) <= 1e-10
    assert np.max(np.abs(got_dec - want_dec)) <= 1e-10
