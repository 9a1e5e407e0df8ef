"""'Weights only' means the Week 1 notes' 4d² + 2df (the weight matrices); the count with norm scales
is named apart."""

from __future__ import annotations

from attnlab.audit import audit_params
from attnlab.audit.params import render_params


def test_weights_only_is_the_notes_formula():
    d, f = 512, 2048
    r = audit_params("encoder-layer")
    assert r["weight_matrices_total"] == 4 * d * d + 2 * d * f == 3_145_728  # attnlab lesson 04's number
    assert r["formula_weight_matrices"] == "L·(4d² + 2df)"
    assert r["weights_total"] == r["weight_matrices_total"] + 2 * d  # + the two LayerNorm scales γ
    text = render_params(r)
    assert "weight matrices (the notes' 'weights only')  L·(4d² + 2df) = 3,145,728" in text
    assert "weights only (norm" not in text


def test_gqa_weight_matrices_shrink_with_the_kv_heads():
    from attnlab.audit import ModelSpec

    spec = ModelSpec.from_sizes(d_model=64, heads=8, kv_heads=2, d_ff=256, layers=3)
    r = audit_params(spec)
    d, f, d_k = 64, 256, 8
    assert r["weight_matrices_total"] == 3 * (2 * d * 2 * d_k + 2 * d * d + 2 * d * f)
