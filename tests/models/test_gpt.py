"""GPT: parity with a reference composition (float64), causality, KV-cached protocol, weight
tying through save/load, config validation and bad ids."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from attnlab import ref
from attnlab.models import GPT, GPTConfig, load_model
from attnlab.nn import capture

SMALL = dict(vocab_size=17, d_model=16, num_heads=4, num_layers=2, d_ff=40, max_len=12)


def _model(seed: int = 0, **kw) -> GPT:
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**{**SMALL, **kw})).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * (0.3 if p.ndim == 1 else 0.1))
    return model


def _np(t):
    return t.detach().numpy().astype(np.float64)


@pytest.mark.parametrize("kw", [dict(), dict(positions="rope", num_kv_heads=2), dict(num_kv_heads=1)])
def test_forward_matches_reference_composition(kw):
    model = _model(**kw).double()
    ids = torch.randint(0, 17, (2, 7), generator=torch.Generator().manual_seed(1))
    x = _np(model.tok_embed.weight)[ids.numpy()]
    if model.pos_embed is not None:
        x = x + _np(model.pos_embed.weight)[:7]
    for b in model.blocks:
        a = b.self_attn
        params = {
            "attn": {
                "W_q": _np(a.q_proj.weight).T,
                "W_k": _np(a.k_proj.weight).T,
                "W_v": _np(a.v_proj.weight).T,
                "W_o": _np(a.out_proj.weight).T,
                "b_q": _np(a.q_proj.bias),
                "b_k": _np(a.k_proj.bias),
                "b_v": _np(a.v_proj.bias),
                "b_o": _np(a.out_proj.bias),
            },
            "ffn": {
                "W_1": _np(b.ffn.linear1.weight).T,
                "b_1": _np(b.ffn.linear1.bias),
                "W_2": _np(b.ffn.linear2.weight).T,
                "b_2": _np(b.ffn.linear2.bias),
            },
            "norm1": {"gamma": _np(b.norm1.weight), "beta": _np(b.norm1.bias)},
            "norm2": {"gamma": _np(b.norm3.weight), "beta": _np(b.norm3.bias)},
        }
        if kw.get("positions") == "rope":  # the reference encoder layer has no RoPE: compose by hand
            attn = ref.multi_head_attention(
                ref.layer_norm(x, **params["norm1"]),
                None,
                params["attn"],
                4,
                num_kv_heads=kw.get("num_kv_heads"),
                mask=ref.causal_mask(7),
                positions="rope",
            )[0]
            u = x + attn
            x = u + ref.feed_forward(ref.layer_norm(u, **params["norm2"]), params["ffn"], "gelu")
        else:
            x = ref.encoder_layer(
                x,
                params,
                4,
                norm="pre",
                activation="gelu",
                mask=ref.causal_mask(7),
                num_kv_heads=kw.get("num_kv_heads"),
            )
    x = ref.layer_norm(x, _np(model.norm.weight), _np(model.norm.bias))
    want = x @ _np(model.tok_embed.weight).T  # tied output weights
    np.testing.assert_allclose(_np(model(ids)), want, rtol=0, atol=1e-10)


def test_logits_depend_only_on_the_past_and_attention_is_causal():
    model = _model(2)
    ids = torch.randint(0, 17, (2, 8), generator=torch.Generator().manual_seed(3))
    with capture(model, ["blocks.*.self_attn.weights"]) as cache:
        logits = model(ids)
    attn = [cache[f"blocks.{i}.self_attn.weights"] for i in range(2)]
    other = ids.clone()
    other[:, 5:] = (other[:, 5:] + 1) % 17
    torch.testing.assert_close(model(other)[:, :5], logits[:, :5], rtol=0, atol=1e-6)
    assert [w.shape for w in attn] == [(2, 4, 8, 8)] * 2
    assert all(float(w.triu(1).abs().max()) == 0.0 for w in attn)


def test_start_step_reorder_match_forward():
    model = _model(4, positions="rope", num_kv_heads=2)
    ids = torch.randint(0, 17, (3, 9), generator=torch.Generator().manual_seed(5))
    full = model(ids)
    state = model.start(ids[:, :4])
    torch.testing.assert_close(state.last_logits, full[:, 3], rtol=0, atol=1e-5)
    logits, state = model.step(ids[:, 4], state)
    torch.testing.assert_close(logits, full[:, 4], rtol=0, atol=1e-5)
    state = model.reorder(state, torch.tensor([1, 0, 0]))
    logits, state = model.step(ids[[1, 0, 0], 5], state)
    torch.testing.assert_close(logits, full[[1, 0, 0], 5], rtol=0, atol=1e-5)
    assert state.length == 6


@pytest.mark.parametrize("tie", [True, False])
def test_save_load_keeps_weights_and_tie(tmp_path, tie):
    model = _model(6, tie_weights=tie)
    assert (model.lm_head.weight is model.tok_embed.weight) == tie
    model.save(tmp_path)
    loaded = load_model(tmp_path).eval()
    ids = torch.randint(0, 17, (2, 5), generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(loaded(ids), model(ids), rtol=0, atol=0)
    assert (loaded.lm_head.weight is loaded.tok_embed.weight) == tie
    assert GPT.load(tmp_path).config == model.config


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(d_model=18), "d_model=18 is not divisible by num_heads=4"),
        (dict(num_kv_heads=3), "num_heads=4 is not divisible by num_kv_heads=3"),
        (dict(positions="sinus"), "positions must be one of"),
        (dict(d_model=12, num_heads=4, positions="rope"), "RoPE needs an even head width"),
        (dict(vocab_size=0), "vocab_size must be a positive integer"),
        (dict(max_len=-1), "max_len must be a positive integer"),
    ],
)
def test_config_validation(kw, message):
    with pytest.raises(ValueError, match=message):
        GPTConfig(**{**SMALL, **kw})


def test_bad_ids_and_lengths():
    model = _model()
    with pytest.raises(ValueError, match=r"^ids\b.* 17\b.*\b0\.\.16\b"):
        model(torch.tensor([[1, 17]]))
    with pytest.raises(ValueError, match=r"^ids\b.*\b13\b.*\bmax_len=12\b"):
        model(torch.ones(1, 13, dtype=torch.long))
    state = model.start(torch.ones(1, 12, dtype=torch.long))
    with pytest.raises(ValueError, match="exceed max_len=12"):
        model.step(torch.tensor([1]), state)


def test_attention_mask_takes_bool_or_0_1_and_refuses_anything_else():
    """A 0/1 mask of any dtype is the bool mask; 0.5, 2, an empty row and a NumPy array are refused."""
    model = _model()
    ids = torch.randint(0, 17, (2, 6), generator=torch.Generator().manual_seed(3))
    keep = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    with torch.no_grad():
        want = model(ids, attention_mask=keep)
        for dtype in (torch.long, torch.int32, torch.float32, torch.float64):
            assert torch.equal(model(ids, attention_mask=keep.to(dtype)), want)
        assert (want[1, :4] - model(ids[1:, :4])[0]).abs().max() <= 1e-5  # the padding changed nothing
    for bad, message in [
        (torch.full((2, 6), 0.5), "attention_mask must hold only 0 and 1 (or False and True), got 0.5"),
        (torch.full((2, 6), 2), "attention_mask must hold only 0 and 1 (or False and True), got 2"),
        (torch.tensor([[1.0] * 6, [float("nan")] * 6]), "got nan"),
        (torch.tensor([[1] * 6, [0] * 6]), "attention_mask has a row with no real token (row 1 is all 0)"),
        (np.ones((2, 6)), "attention_mask must be a torch tensor [B, T] of 1/True (real token) and 0/False"),
        (torch.ones(2, 5), "attention_mask has shape [2, 5] but ids has shape [2, 6]"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            model(ids, attention_mask=bad)


def test_step_and_reorder_refuse_a_missing_state_and_rows_outside_the_batch():
    model = _model()
    with pytest.raises(ValueError, match=r"^state\b.*\bGPTState\b.*\bNoneType$"):
        model.step(torch.tensor([1]), None)
    state = model.start(torch.tensor([[1, 2, 3]]))
    with pytest.raises(
        ValueError, match=re.escape("index holds rows [5] but the state holds a batch of 1 (rows 0..0)")
    ):
        model.reorder(state, torch.tensor([5]))
    with pytest.raises(
        ValueError, match=re.escape("index must be an integer tensor [B'] of batch rows, got list")
    ):
        model.reorder(state, [0])
    assert model.reorder(state, torch.tensor([0, 0])).last_logits.shape == (2, 17)
