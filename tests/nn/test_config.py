"""BlockConfig: every field validated with a one-line message, JSON round trip, and the model configs
that map onto it (GPTConfig, TransformerConfig, BertConfig)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.models import GPTConfig, TransformerConfig
from attnlab.models.bert import BertConfig
from attnlab.nn import BlockConfig
from attnlab.nn.config import ACTIVATIONS, ATTENTION_KINDS, FFNS, NORM_PLACES, NORMS, POSITIONS, ROPE_LAYOUTS


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(d_model=0), r"BlockConfig.d_model must be a positive integer, got 0"),
        (dict(num_heads=2.0), r"BlockConfig.num_heads must be a positive integer, got 2.0"),
        (dict(d_ff=-1), r"BlockConfig.d_ff must be a positive integer, got -1"),
        (dict(num_kv_heads=0), r"BlockConfig.num_kv_heads must be a positive integer, got 0"),
        (dict(d_model=10), r"BlockConfig.d_model=10 is not divisible by num_heads=4"),
        (dict(num_kv_heads=3), r"BlockConfig.num_heads=4 is not divisible by num_kv_heads=3"),
        (dict(norm="batch"), r"BlockConfig.norm must be one of \['layer', 'rms'\], got 'batch'"),
        (dict(norm_eps=0.0), r"BlockConfig.norm_eps must be a finite number > 0, got 0.0"),
        (dict(norm_place="sandwich"), r"BlockConfig.norm_place must be one of \['post', 'pre'\]"),
        (dict(ffn="moe"), r"BlockConfig.ffn must be one of \['mlp', 'glu', 'none'\]"),
        (dict(activation="swish"), r"BlockConfig.activation must be one of"),
        (dict(qkv_bias=1), r"BlockConfig.qkv_bias must be true or false, got 1"),
        (dict(out_bias="no"), r"BlockConfig.out_bias must be true or false"),
        (dict(ffn_bias=None), r"BlockConfig.ffn_bias must be true or false"),
        (dict(positions="sinus"), r"BlockConfig.positions must be one of"),
        (dict(rope_layout="neox"), r"BlockConfig.rope_layout must be one of \['interleaved', 'half'\]"),
        (dict(rope_base=-1.0), r"BlockConfig.rope_base must be a finite number > 0"),
        (dict(d_model=12, num_heads=4, positions="rope"), r"RoPE needs an even head width, got .* = 3"),
        (
            dict(rope_scaling={"factor": 2.0}),
            r"BlockConfig.rope_scaling must be None or a dict with a 'rope_type'",
        ),
        (dict(window=0), r"BlockConfig.window must be a positive integer, got 0"),
        (
            dict(attention="ring"),
            r"BlockConfig.attention must be one of "
            r"\['sdpa', 'explicit', 'flash', 'block_sparse', 'linear', 'ssm'\]",
        ),
        (dict(attention="flash", positions="alibi"), r"attention='flash' does not take an additive bias"),
        (dict(dropout=1.0), r"BlockConfig.dropout must be a number in \[0, 1\), got 1.0"),
    ],
)
def test_every_field_is_validated_with_one_line(kw, message):
    with pytest.raises(ValueError, match=message) as info:
        BlockConfig(**{**dict(d_model=16, num_heads=4, d_ff=32), **kw})
    assert "\n" not in str(info.value)


def test_defaults_and_derived_sizes():
    c = BlockConfig(64, 8, num_kv_heads=2)
    assert c.d_ff == 256 and c.head_dim == 8 and c.kv_heads == 2  # d_ff defaults to 4 d_model
    assert BlockConfig(64, 8).kv_heads == 8
    assert c.replace(norm="rms").norm == "rms" and c.norm == "layer"  # frozen: replace makes a copy
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.norm = "rms"
    with pytest.raises(ValueError, match=r"\bnorm\b.*\['layer', 'rms'\], got 'batch'"):
        c.replace(norm="batch")  # replace validates again


@settings(max_examples=60, deadline=None)
@given(
    h=st.sampled_from([1, 2, 4]),
    d_k=st.sampled_from([2, 4, 8]),
    kv=st.sampled_from([None, 1]),
    norm=st.sampled_from(NORMS),
    place=st.sampled_from(NORM_PLACES),
    ffn=st.sampled_from(FFNS),
    act=st.sampled_from(ACTIVATIONS),
    biases=st.tuples(st.booleans(), st.booleans(), st.booleans()),
    positions=st.sampled_from(POSITIONS),
    layout=st.sampled_from(ROPE_LAYOUTS),
    base=st.floats(1.0, 1e6),
    scaling=st.sampled_from([None, {"rope_type": "linear", "factor": 4.0}]),
    window=st.sampled_from([None, 1, 7]),
    attention=st.sampled_from(ATTENTION_KINDS),
    dropout=st.sampled_from([0.0, 0.1]),
)
def test_json_round_trip(
    h, d_k, kv, norm, place, ffn, act, biases, positions, layout, base, scaling, window, attention, dropout
):
    if attention in ("flash", "block_sparse", "linear", "ssm") and positions == "alibi":
        positions = "rope"
    if attention == "block_sparse" and window is None:
        window = 3
    if attention in ("linear", "ssm"):
        window = None
    if attention == "ssm":
        positions, kv = ("none" if positions == "rope" else positions), None
    c = BlockConfig(
        h * d_k, h, 3 * d_k, num_kv_heads=kv, norm=norm, norm_place=place, ffn=ffn, activation=act,
        qkv_bias=biases[0], out_bias=biases[1], ffn_bias=biases[2], positions=positions, rope_layout=layout,
        rope_base=base, rope_scaling=scaling, window=window, attention=attention, dropout=dropout,
    )  # fmt: skip
    text = c.to_json()
    assert json.loads(text) == c.to_dict()
    assert BlockConfig.from_json(text) == c
    assert BlockConfig.from_dict(json.loads(text)) == c


def test_from_dict_names_unknown_and_missing_fields():
    with pytest.raises(ValueError, match=r"^BlockConfig\b.*\bno field\b.*\['colour'\]"):
        BlockConfig.from_dict({"d_model": 8, "num_heads": 2, "colour": "red"})
    with pytest.raises(ValueError, match=r"^BlockConfig\b.*\bmissing\b.*\['num_heads'\]"):
        BlockConfig.from_dict({"d_model": 8})
    with pytest.raises(ValueError, match=r"^BlockConfig\b.*\bobject\b.*\blist$"):
        BlockConfig.from_dict([8, 2])


def test_model_configs_map_onto_the_block():
    gpt = GPTConfig(vocab_size=10, d_model=16, num_heads=4, d_ff=40, norm="rms", ffn="glu", activation="silu")
    want = BlockConfig(
        16, 4, 40, norm="rms", norm_place="pre", ffn="glu", activation="silu", positions="learned"
    )
    assert gpt.block == want
    t = TransformerConfig(
        src_vocab=5, tgt_vocab=5, d_model=16, num_heads=2, d_ff=32, norm_place="pre", dropout=0.0
    )
    assert t.block == BlockConfig(16, 2, 32, norm_place="pre", positions="sinusoidal")
    b = BertConfig(vocab_size=5, d_model=16, num_heads=2, d_ff=32, norm_eps=1e-12)
    assert b.block == BlockConfig(16, 2, 32, norm_eps=1e-12, activation="gelu", positions="learned")
    with pytest.raises(ValueError, match=r"^GPTConfig\.norm\b.*\['layer', 'rms'\], got 'batch'$"):
        GPTConfig(vocab_size=10, norm="batch")  # the message names the model's config, not BlockConfig
