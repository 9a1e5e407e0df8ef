"""The shape audit: measured shapes on every arrow, the notes' examples, in data-flow order."""

from __future__ import annotations

import pytest

from attnlab.audit import (
    ModelSpec,
    Workload,
    audit_cost,
    audit_params,
    audit_shapes,
    render_cost,
    render_shapes,
)
from attnlab.audit.build import build
from attnlab.nn import BlockConfig, DecoderLayer


def _by_step(report, layer="layers.0"):
    return {s["step"]: s["shape"] for s in report["steps"] if s["layer"] == layer}


def test_sixth_layer_output_is_50_by_512():
    r = audit_shapes(
        ModelSpec.from_sizes(d_model=512, heads=8, d_ff=2048, layers=6), Workload(seq=50, batch=1)
    )
    assert r["layer_outputs"] == [[1, 50, 512]] * 6
    assert r["per_sequence_output"] == [50, 512]


def test_five_sentences_padded_to_20_tokens():
    r = audit_shapes(ModelSpec.from_sizes(d_model=64, heads=4, d_ff=256), Workload(seq=20, batch=5))
    assert r["output"] == [5, 20, 64]
    assert r["output_numbers"] == 5 * 20 * 64 == 6_400


def test_every_arrow_in_order_post_norm():
    r = audit_shapes(ModelSpec.from_sizes(d_model=16, heads=4, d_ff=32), Workload(seq=5, batch=2))
    order = [s["step"] for s in r["steps"]]
    assert order == [
        "input x",
        "Q = x W^Q",
        "K = x W^K",
        "V = x W^V",
        "split heads Q",
        "split heads K",
        "split heads V",
        "scores QKᵀ/√d_k",
        "weights softmax(scores)",
        "per-head outputs z = AV",
        "heads side by side (transpose 1, 2)",
        "concat(heads)",
        "W^O output",
        "add: X + self-attention(X)",
        "norm LN_1 (add & norm)",
        "FFN x W_1 + b_1",
        "FFN activation ReLU",
        "FFN output (· W_2 + b_2)",
        "add: X + FFN(X)",
        "norm LN_2 (add & norm)",
    ]
    shapes = _by_step(r)
    assert shapes["split heads Q"] == [2, 4, 5, 4]  # the notes' [B, h, T, d_k] = [2, 4, 5, 4]
    assert shapes["concat(heads)"] == [2, 5, 16]
    assert shapes["per-head outputs z = AV"] == [2, 4, 5, 4]  # A V in the notes' [B, h, T, d_k]
    assert shapes["heads side by side (transpose 1, 2)"] == [2, 5, 4, 4]  # [B, T, h, d_k], then concat
    assert shapes["scores QKᵀ/√d_k"] == shapes["weights softmax(scores)"] == [2, 4, 5, 5]
    assert shapes["FFN x W_1 + b_1"] == [2, 5, 32]


def test_pre_norm_draws_the_activation_and_the_last_residual_add():
    """A pre-norm block ends in a residual add no norm follows: drawn as the layer's output
    (``resid_post``), as ``practice check block`` grades it; the activation sits between the Linears."""
    spec = ModelSpec.from_sizes(model="gpt", d_model=24, heads=2, d_ff=40, layers=2, vocab=16, norm="pre")
    r = audit_shapes(spec, Workload(seq=7, batch=3))
    first = [s for s in r["steps"] if s["layer"] == "blocks.0"]
    assert [(s["step"], s["module"], s["shape"]) for s in first[-6:]] == [
        ("add: residual + masked self-attention", "blocks.0.norm3", [3, 7, 24]),
        ("norm ln2 (pre-norm, into FFN)", "blocks.0.norm3", [3, 7, 24]),
        ("FFN x W_1 + b_1", "blocks.0.ffn.linear1", [3, 7, 40]),
        ("FFN activation GELU", "blocks.0.ffn.hidden", [3, 7, 40]),
        ("FFN output (· W_2 + b_2)", "blocks.0.ffn.linear2", [3, 7, 24]),
        ("add: residual + FFN (the layer's output)", "blocks.0.resid_post", [3, 7, 24]),
    ]
    adds = [s for s in r["steps"] if s["step"].startswith("add:")]
    assert len(adds) == 4 and [s["layer"] for s in adds] == ["blocks.0"] * 2 + ["blocks.1"] * 2
    assert set(s["module"] for s in first) - {"blocks.0.norm1", "blocks.0.norm3"} <= set(
        build(spec).hook_points()
    ) | {"blocks.0.ffn.linear1", "blocks.0.ffn.linear2"}
    text = render_shapes(r)
    assert text.index("FFN x W_1") < text.index("FFN activation GELU") < text.index("FFN output")
    assert text.index("FFN output") < text.index("add: residual + FFN (the layer's output)")
    glu = audit_shapes(
        ModelSpec.from_sizes(d_model=16, heads=2, d_ff=24, norm="pre", ffn="glu", activation="silu"),
        Workload(seq=3, batch=1),
    )
    assert _by_step(glu)["FFN activation SiLU(x W_1) ⊙ x W_3"] == [1, 3, 24]
    assert list(_by_step(glu))[-1] == "add: residual + FFN (the layer's output)"
    bare = audit_shapes(ModelSpec.from_sizes(d_model=16, heads=2, norm="pre", ffn="none"), Workload(seq=3))
    assert list(_by_step(bare))[-1] == "add: residual + self-attention (the layer's output)"
    post = audit_shapes(ModelSpec.from_sizes(d_model=16, heads=2, d_ff=8), Workload(seq=3, batch=1))
    assert sum(s["step"].startswith("add:") for s in post["steps"]) == 2  # each add drawn once


def test_gqa_pre_norm_and_decoder():
    r = audit_shapes(
        ModelSpec.from_sizes(d_model=32, heads=8, kv_heads=2, d_ff=16, norm="pre"), Workload(seq=3, batch=1)
    )
    shapes = _by_step(r)
    assert shapes["K = x W^K"] == [1, 3, 8]  # h_kv·d_k = 2·4
    assert shapes["split heads K"] == [1, 2, 3, 4]
    assert shapes["scores QKᵀ/√d_k"] == [1, 8, 3, 3]
    assert r["steps"][0]["step"].startswith("layer input X")
    d = audit_shapes(
        ModelSpec.from_sizes(model="decoder-layer", d_model=16, heads=2, d_ff=8, layers=2),
        Workload(seq=4, batch=3),
    )
    cross = [s for s in d["steps"] if s["layer"] == "layers.0" and s["where"] == "cross_attn"]
    assert [s["step"] for s in cross][:3] == [
        "input y (queries from the decoder)",
        "Q = y W^Q",
        "K = memory W^K",
    ]
    assert d["layer_outputs"] == [[3, 4, 16]] * 2
    # one address per step: the hook point that capture takes, or the module path of the parameters
    assert [s["module"] for s in cross][:3] == [f"layers.0.cross_attn.{p}" for p in ("x_q", "q", "k")]
    norms = {s["module"] for s in d["steps"] if s["step"].startswith("norm LN")}
    assert "layers.0.norm1" in norms and all(s["module"].startswith(s["layer"]) for s in d["steps"])
    points = DecoderLayer(BlockConfig(16, 2, 8)).hook_points()  # the layer's own points, unprefixed
    attention = [s for s in d["steps"] if "_attn." in s["module"] and s["layer"] == "layers.0"]
    assert len(attention) >= 20 and all(s["module"].removeprefix("layers.0.") in points for s in attention)


def test_render_draws_block():
    text = render_shapes(
        audit_shapes(ModelSpec.from_sizes(d_model=64, heads=4, d_ff=256, layers=2), Workload(seq=20, batch=5))
    )
    assert "scores QKᵀ/√d_k" in text and "[5, 4, 20, 20]" in text
    assert "6,400 numbers" in text
    assert (
        text.index("W^O output") < text.index("norm LN_1") < text.index("FFN x W_1") < text.index("norm LN_2")
    )


def test_whole_models():
    g = audit_shapes(
        ModelSpec.from_sizes(model="gpt", d_model=32, heads=4, kv_heads=2, d_ff=64, layers=2, vocab=100),
        Workload(seq=6, batch=2),
    )
    assert g["output"] == [2, 6, 100]  # logits [B, T, V]
    assert g["layer_outputs"] == [[2, 6, 32]] * 2 and g["layer_output_names"] == ["blocks.0", "blocks.1"]
    assert [s["step"] for s in g["steps"]][-2:] == ["final LayerNorm ln_f", "logits = h W_out [32 -> 100]"]
    t = audit_shapes(
        ModelSpec.from_sizes(model="transformer", d_model=32, heads=4, d_ff=64, layers=2, vocab=50),
        Workload(seq=5, src_seq=9, batch=3),
    )
    assert t["layer_output_names"] == [
        "encoder.layers.0",
        "encoder.layers.1",
        "decoder.layers.0",
        "decoder.layers.1",
    ]
    assert t["output"] == [3, 5, 50]
    cross = {s["step"]: s["shape"] for s in t["steps"] if s["where"] == "cross_attn"}
    assert cross["scores QKᵀ/√d_k"] == [3, 4, 5, 9]  # [B, h, T, S]: target queries, source keys
    assert cross["K = memory W^K"] == [3, 9, 32]
    enc = {s["step"]: s["shape"] for s in t["steps"] if s["layer"] == "encoder.layers.0"}
    assert enc["scores QKᵀ/√d_k"] == [3, 4, 9, 9]
    b = audit_shapes(
        ModelSpec.from_sizes(model="bert", d_model=32, heads=4, d_ff=64, layers=1, vocab=60),
        Workload(seq=7, batch=2),
    )
    assert b["output"] == [2, 7, 32] and b["per_sequence_output"] == [7, 32]


def _small(model="gpt", **kw):
    return ModelSpec.from_sizes(model, d_model=16, heads=2, d_ff=32, vocab=20, **{"max_len": 8, **kw})


def test_learned_positions_refuse_a_longer_input():
    # a learned [n_ctx, d] table has no row 8: refused (issue: the table was silently grown to T)
    for model in ("gpt", "bert"):
        with pytest.raises(ValueError, match=r"^seq=9\b.*\bmax_len=8 positions\b"):  # fmt: skip
            audit_shapes(_small(model), Workload(seq=9, batch=1))
        with pytest.raises(ValueError, match=r"max_len=8 positions"):
            audit_cost(_small(model), Workload(seq=9))
    assert audit_shapes(_small(), Workload(seq=8, batch=1))["config"]["max_len"] == 8  # the limit itself


def test_computed_positions_run_past_max_len_and_say_so():
    # RoPE (and sinusoidal) positions are computed: T = 12 > max_len = 8 runs, the report keeps max_len 8
    r = audit_shapes(_small(positions="rope", norm_kind="rms"), Workload(seq=12, batch=1))
    c = audit_cost(_small(positions="rope"), Workload(seq=12))
    assert r["output"] == [1, 12, 20] and r["config"]["max_len"] == c["config"]["max_len"] == 8
    for report, text in ((r, render_shapes(r)), (c, render_cost(c))):
        assert report["positions_note"].startswith("seq=12 is past the model's max_len=8")
        assert "RoPE rotations are computed" in report["positions_note"]
        assert f"note: {report['positions_note']}" in text.splitlines()[:3]
    t = audit_shapes(ModelSpec.from_sizes("transformer", d_model=16, heads=2, d_ff=32, vocab=20, max_len=8),
                     Workload(seq=4, src_seq=10, batch=1))  # fmt: skip
    assert "src_seq=10 is past" in t["positions_note"] and "sinusoidal" in t["positions_note"]
    bare = ModelSpec.from_sizes(d_model=16, heads=2, d_ff=32, max_len=8)
    bare = audit_shapes(bare, Workload(seq=12, batch=1))
    assert "positions_note" not in bare and bare["config"]["max_len"] == 8  # a bare layer takes no positions


def test_norm_names_agree_with_params_modules_and_hook_points():
    # a GPT block's norms are named as the Week 19 course page's `class Block` names them (ln1, ln2;
    # modules norm1, norm3: a decoder layer without cross-attention; there was an LN_3 and no LN_2)
    # in both audits; the final norm ln_f is addressed by its hook point final_norm (module `norm`)
    spec = _small(layers=1, max_len=8)
    shapes, params = audit_shapes(spec, Workload(seq=4, batch=1)), audit_params(spec)
    norms = [(s["step"], s["module"]) for s in shapes["steps"] if s["step"].startswith(("norm ", "final"))]
    assert norms == [
        ("norm ln1 (pre-norm, into masked self-attention)", "blocks.0.norm1"),
        ("norm ln2 (pre-norm, into FFN)", "blocks.0.norm3"),
        ("final LayerNorm ln_f", "final_norm"),
    ]
    assert [r["part"] for r in params["rows"] if r["group"] == "norms"] == ["ln1", "ln2", "ln_f (final)"]
    llama = audit_params("llama-2-7b", build_module=False)["rows"]
    llama = [r["part"] for r in llama if r["group"] == "norms"]
    assert llama == ["ln1", "ln2", "ln_f (final)"]
    model = build(spec)
    names = {n for n, _ in model.named_modules()} | set(model.hook_points())
    assert {address for _, address in norms} <= names and "final_norm" in model.hook_points()
