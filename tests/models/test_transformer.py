"""The encoder-decoder Transformer: parity with a reference composition (float64), teacher forcing,
the KV-cached decoding protocol, attention maps, save/load, config validation and bad ids."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlab import ref
from attnlab.models import Transformer, TransformerConfig, load_model
from attnlab.nn import Decoder, capture

SMALL = dict(
    src_vocab=11,
    tgt_vocab=13,
    d_model=16,
    num_heads=2,
    d_ff=32,
    num_encoder_layers=2,
    num_decoder_layers=2,
    max_len=20,
    dropout=0.0,
)


def _model(seed: int = 0, **kw) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig(**{**SMALL, **kw})).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(torch.randn_like(p) * 0.2)
    return model


def _batch(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 11, (3, 6), generator=g)
    src[1, 4:] = 0  # padding
    src[2, 2:] = 0
    tgt_in = torch.randint(3, 13, (3, 5), generator=g)
    tgt_in[:, 0] = 1  # BOS
    return src, tgt_in


def _np(t):
    return t.detach().numpy().astype(np.float64)


def _mha(m):
    return {
        "W_q": _np(m.q_proj.weight).T,
        "W_k": _np(m.k_proj.weight).T,
        "W_v": _np(m.v_proj.weight).T,
        "W_o": _np(m.out_proj.weight).T,
        "b_q": _np(m.q_proj.bias),
        "b_k": _np(m.k_proj.bias),
        "b_v": _np(m.v_proj.bias),
        "b_o": _np(m.out_proj.bias),
    }


def _ffn(f):
    return {
        "W_1": _np(f.linear1.weight).T,
        "b_1": _np(f.linear1.bias),
        "W_2": _np(f.linear2.weight).T,
        "b_2": _np(f.linear2.bias),
    }


def _ln(n):
    return {"gamma": _np(n.weight), "beta": _np(n.bias)}


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_forward_matches_reference_composition(norm):
    model = _model(norm_place=norm).double()
    src, tgt_in = _batch()
    d = 16
    pe = ref.sinusoidal_positions(20, d)
    x = _np(model.src_embed.weight)[src.numpy()] * math.sqrt(d) + pe[:6]
    src_mask = (src != 0).numpy()[:, None, :]  # [B, 1, S]
    for layer in model.encoder.layers:
        x = ref.encoder_layer(
            x,
            {
                "attn": _mha(layer.self_attn),
                "ffn": _ffn(layer.ffn),
                "norm1": _ln(layer.norm1),
                "norm2": _ln(layer.norm2),
            },
            2,
            norm=norm,
            mask=src_mask,
        )
    if norm == "pre":
        x = ref.layer_norm(x, **{k: v for k, v in zip(("gamma", "beta"), _ln(model.encoder.norm).values())})
    y = _np(model.tgt_embed.weight)[tgt_in.numpy()] * math.sqrt(d) + pe[:5]
    for layer in model.decoder.layers:
        params = {
            "self_attn": _mha(layer.self_attn),
            "cross_attn": _mha(layer.cross_attn),
            "ffn": _ffn(layer.ffn),
            "norm1": _ln(layer.norm1),
            "norm2": _ln(layer.norm2),
            "norm3": _ln(layer.norm3),
        }
        y = ref.decoder_layer(y, x, params, 2, norm=norm, self_mask=ref.causal_mask(5), memory_mask=src_mask)
    if norm == "pre":
        y = ref.layer_norm(y, _ln(model.decoder.norm)["gamma"], _ln(model.decoder.norm)["beta"])
    want = y @ _np(model.generator.weight).T + _np(model.generator.bias)
    np.testing.assert_allclose(_np(model(src, tgt_in)), want, rtol=0, atol=1e-10)


def test_teacher_forcing_reads_the_gold_previous_tokens():
    """Logits at step t equal incremental decoding fed the gold tokens tgt_in[:, :t+1], and do not
    depend on later gold tokens (the causal mask)."""
    model = _model(2)
    src, tgt_in = _batch(3)
    logits = model(src, tgt_in)
    state = model.start(src)
    for t in range(tgt_in.shape[1]):
        step_logits, state = model.step(tgt_in[:, t], state)
        torch.testing.assert_close(step_logits, logits[:, t], rtol=0, atol=1e-5)
    changed = tgt_in.clone()
    changed[:, 3:] = 4
    torch.testing.assert_close(model(src, changed)[:, :3], logits[:, :3], rtol=0, atol=1e-6)
    assert not torch.allclose(model(src, changed)[:, 3:], logits[:, 3:], atol=1e-3)


def test_attention_maps_and_padding():
    model = _model(4)
    src, tgt_in = _batch(5)
    with capture(model, ["*.weights"]) as cache:
        logits = model(src, tgt_in)
    attn = {  # [B, h, T_q, T_k] per layer
        kind: [cache[f"{stack}.layers.{i}.{leaf}.weights"] for i in range(2)]
        for kind, stack, leaf in [
            ("encoder_self", "encoder", "self_attn"),
            ("decoder_self", "decoder", "self_attn"),
            ("cross", "decoder", "cross_attn"),
        ]
    }
    assert logits.shape == (3, 5, 13)
    assert [w.shape for w in attn["encoder_self"]] == [(3, 2, 6, 6)] * 2
    assert [w.shape for w in attn["decoder_self"]] == [(3, 2, 5, 5)] * 2
    assert [w.shape for w in attn["cross"]] == [(3, 2, 5, 6)] * 2
    for w in attn["cross"]:
        assert float(w[2, :, :, 2:].detach().abs().max()) == 0.0  # PAD sources get no weight
        torch.testing.assert_close(w.sum(-1), torch.ones(3, 2, 5))
    for w in attn["decoder_self"]:
        assert float(w.triu(1).abs().max()) == 0.0  # no peeking at later target tokens
    torch.testing.assert_close(logits, model(src, tgt_in))


def test_padding_in_source_does_not_change_real_rows():
    model = _model(6)
    src, tgt_in = _batch(7)
    alone = model(src[2:3, :2], tgt_in[2:3])  # the same sentence without its padding
    torch.testing.assert_close(model(src, tgt_in)[2:3], alone, rtol=0, atol=1e-5)


def test_reorder_selects_batch_rows():
    model = _model(8)
    src, tgt_in = _batch(9)
    state = model.start(src)
    model.step(tgt_in[:, 0], state)
    state = model.reorder(state, torch.tensor([2, 2, 0]))
    logits, _ = model.step(tgt_in[[2, 2, 0], 1], state)
    torch.testing.assert_close(logits, model(src, tgt_in)[[2, 2, 0], 1], rtol=0, atol=1e-5)


@pytest.mark.parametrize("share", [False, True])
def test_save_and_load_round_trip(tmp_path, share):
    kw = dict(tgt_vocab=11, share_embeddings=True) if share else {}
    model = _model(10, **kw)
    src, tgt_in = _batch(11)
    tgt_in = tgt_in.clamp(max=10)
    model.save(tmp_path / "m")
    loaded = load_model(tmp_path / "m").eval()
    assert isinstance(loaded, Transformer) and loaded.config == model.config
    torch.testing.assert_close(loaded(src, tgt_in), model(src, tgt_in), rtol=0, atol=0)
    if share:
        assert loaded.generator.weight is loaded.src_embed.weight is loaded.tgt_embed.weight


def test_prenorm_stacks_have_final_norms_postnorm_do_not():
    assert isinstance(_model(norm_place="pre").decoder, Decoder)
    assert (
        _model(norm_place="pre").encoder.norm is not None
        and _model(norm_place="pre").decoder.norm is not None
    )
    assert _model().encoder.norm is None and _model().decoder.norm is None


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(d_model=15), "d_model=15 is not divisible by num_heads=2"),
        (dict(src_vocab=0), "src_vocab must be a positive integer"),
        (dict(norm_place="middle"), "norm_place must be one of"),
        (dict(activation="tanh"), "activation must be one of"),
        (dict(dropout=1.5), r"dropout must be a number in \[0, 1\)"),
        (dict(share_embeddings=True), "share_embeddings needs src_vocab == tgt_vocab"),
        (dict(pad_id=11), "pad_id=11"),
    ],
)
def test_config_validation(kw, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**{**SMALL, **kw})


def test_bad_ids_and_lengths():
    model = _model()
    src, tgt_in = _batch()
    bad = src.clone()
    bad[0, 1] = 11
    with pytest.raises(ValueError, match=r"^src\b.* 11\b.*\b0\.\.10\b"):
        model(bad, tgt_in)
    with pytest.raises(ValueError, match=r"^tgt_in\b.* -1\b"):
        model(src, tgt_in - 2)
    with pytest.raises(ValueError, match=r"^src\b.*\b21\b.*\bmax_len=20\b"):
        model(torch.ones(1, 21, dtype=torch.long), tgt_in[:1])
    with pytest.raises(ValueError, match="integer tensor"):
        model(src.float(), tgt_in)
    with pytest.raises(ValueError, match=r"^tokens\b.* 13\b"):
        model.step(torch.tensor([13, 1, 1]), model.start(src))
