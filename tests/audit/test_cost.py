"""The cost audit: every term by hand on a tiny config, the notes' numbers, and the reconciliation."""

from __future__ import annotations

import pytest

from attnlab.audit import ModelSpec, Workload, audit_cost, kv_cache_bytes, render_cost
from attnlab.audit.cost import attended_entries


def cost(**kw):
    """``audit_cost`` of the model, workload and options named by flat keywords (the CLI's flags)."""
    wl = {k: kw.pop(k) for k in ("seq", "batch", "src_seq", "causal", "window") if k in kw}
    opts = {k: kw.pop(k) for k in ("training", "bytes_per_value", "measure", "path") if k in kw}
    return audit_cost(ModelSpec.from_sizes(**kw), Workload(**wl), **opts)


def _macs(report):
    return {t["term"]: t["macs"] for t in report["terms"]}


def test_terms_by_hand():
    # d=8, h=2 (d_k=4), f=16, T=3, B=2: Q/K/V/W^O = B·T·d² = 384, QKᵀ = AV = B·h·T²·d_k = 144
    r = audit_cost(ModelSpec.from_sizes(d_model=8, heads=2, d_ff=16), Workload(seq=3, batch=2))
    assert _macs(r) == {
        "Q projection": 384,
        "K projection": 384,
        "V projection": 384,
        "QKᵀ": 144,
        "softmax": 0,
        "AV": 144,
        "W^O": 384,
        "FFN": 1536,
    }
    assert {t["term"]: t["flops"] for t in r["terms"]}["softmax"] == 5 * 2 * 2 * 9
    assert r["total_macs"] == 3360
    assert r["total_flops"] == 2 * 3360 + 180
    assert r["flops_per_token"] == 6900 / 6
    assert all(t["flops"] == 2 * t["macs"] for t in r["terms"] if t["term"] != "softmax")


def test_causal_window_and_gqa():
    assert attended_entries(3) == 9
    assert attended_entries(3, causal=True) == 6
    assert attended_entries(3, window=2) == 1 + 2 + 2
    assert attended_entries(12, causal=True) == 78
    r = audit_cost(ModelSpec.from_sizes(d_model=8, heads=2, d_ff=16), Workload(seq=3, batch=2, causal=True))
    assert _macs(r)["QKᵀ"] == 2 * 2 * 6 * 4
    assert (
        r["executed"]["total_flops"]
        == audit_cost(ModelSpec.from_sizes(d_model=8, heads=2, d_ff=16), Workload(seq=3, batch=2))[
            "total_flops"
        ]
    )
    g = audit_cost(
        ModelSpec.from_sizes(d_model=8, heads=4, kv_heads=1, d_ff=16), Workload(seq=3, batch=2, window=2)
    )
    assert _macs(g)["K projection"] == 2 * 3 * 8 * 2  # K width h_kv·d_k = 2
    assert _macs(g)["QKᵀ"] == 2 * 4 * 5 * 2
    assert g["kv_cache"]["tokens_cached"] == 2


def test_notes_numbers():
    r = audit_cost(ModelSpec.from_sizes(d_model=8, heads=2, d_ff=32), Workload(seq=12, batch=4))
    assert r["score_entries"] == 4 * 2 * 12**2 == 1_152
    growth = {g["term"]: g["ratio"] for g in r["growth"]}
    assert growth["QKᵀ"] == growth["AV"] == growth["softmax"] == 4.0
    assert growth["Q projection"] == growth["FFN"] == 2.0
    n = audit_cost(ModelSpec.from_sizes(d_model=512, heads=8, d_ff=2048), Workload(seq=100))["notes_check"]
    assert n["attn_4n2d_per_layer_per_sequence"] == n["attn_measured_by_terms"] == 4 * 100**2 * 512
    assert n["mlp_16nd2_per_layer_per_sequence"] == n["mlp_by_terms"] == 16 * 100 * 512**2


@pytest.mark.parametrize("ffn, matrices", [("mlp", 2), ("glu", 3), ("none", 0)])
def test_notes_ffn_check_counts_the_audited_ffn(ffn, matrices):
    # the Week 19 page's 16nd² is a two-matrix MLP; beside it the FFN row of one layer and sequence:
    # 4·n·d·f (MLP), 6·n·d·f (GLU: 805,306,368 at T=128, d=512, f=2048, not the MLP's 536,870,912), none
    r = audit_cost(ModelSpec.from_sizes(ffn=ffn, layers=3), Workload(seq=128, batch=2))
    n, text = r["notes_check"], render_cost(r)
    ffn_row = [t["flops"] for t in r["terms"] if t["term"] == "FFN"]
    note = next(line for line in text.splitlines() if line.startswith("Week 19 course page, per layer"))
    if not matrices:
        assert ffn_row == [] and n["mlp_by_terms"] is None and n["mlp_formula"] is None
        assert note.endswith("no FFN (16nd² does not apply)") and "2048" not in note
        return
    assert n["mlp_by_terms"] == 2 * matrices * 128 * 512 * 2048 == ffn_row[0] // (3 * 2)
    assert n["mlp_formula"] == f"{2 * matrices}·n·d·f"
    assert f"{ffn.upper()} {2 * matrices}·n·d·f: {n['mlp_by_terms']:,}" in note
    assert n["mlp_16nd2_per_layer_per_sequence"] == 16 * 128 * 512**2 == 536_870_912
    assert ("805,306,368" in note) == (ffn == "glu")


def test_kv_cache_and_activations():
    assert kv_cache_bytes(layers=1, kv_heads=2, d_head=4, bytes_per_value=4) == 64
    assert kv_cache_bytes(6, 8, 64, 2, tokens=1024, batch=3) == 2 * 6 * 8 * 64 * 2 * 1024 * 3
    r = audit_cost(
        ModelSpec.from_sizes(d_model=512, heads=8, d_ff=2048, layers=6, kv_heads=2),
        Workload(seq=1000),
        bytes_per_value=2,
    )
    assert r["kv_cache"]["bytes_per_token"] == 2 * 6 * 2 * 64 * 2 == 3_072
    assert r["kv_cache"]["bytes_per_sequence"] == 3_072_000
    a = audit_cost(ModelSpec.from_sizes(d_model=8, heads=2, d_ff=16), Workload(seq=3, batch=2))["activations"]
    # x, Q, concat, W^O out, norm1, FFN out, norm2: 7·B·T·d; K, V; 2 score tensors; 2 FFN hidden
    assert a["per_layer_entries"] == 7 * 48 + 2 * 48 + 2 * 36 + 2 * 96 == 696
    assert a["per_layer_bytes"] == 4 * 696


def test_training_palm_convention():
    r = audit_cost(
        ModelSpec.from_sizes(d_model=64, heads=4, d_ff=256, layers=2, vocab=100),
        Workload(seq=32),
        training=True,
    )
    t = r["training"]
    n_layer = 4 * 64 * 64 + 2 * 64 * 256 + 256 + 9 * 64
    assert t["N"] == 2 * n_layer + 64 * 100
    assert t["flops_per_token"] == 6 * t["N"] + 12 * 2 * 4 * 16 * 32


def test_render_names_convention():
    text = render_cost(
        audit_cost(ModelSpec.from_sizes(d_model=8, heads=2, d_ff=16), Workload(seq=3, batch=2), training=True)
    )
    assert "FLOPs = 2·MACs" in text and "PaLM" in text and "1,536" in text


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"seq": 8, "window": 9}, "window=9 is larger than the sequence seq=8"),
        ({"seq": 0}, "seq must be a positive integer"),
        ({"heads": 3}, "not divisible by heads=3"),
        ({"kv_heads": 3}, "not divisible by kv_heads=3"),
    ],
)
def test_bad_input(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        cost(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"causal": True},
        {"kv_heads": 2, "window": 5},
        {"layers": 2, "batch": 3},
    ],
)
def test_reconciliation_exact_on_explicit_path(kwargs):
    r = cost(d_model=32, heads=4, d_ff=64, seq=9, measure=True, path="explicit", **kwargs)
    m = r["measured"]
    assert m["warnings"] == [] and m["missed_ops"] == []
    assert all(row["analytic"] == row["measured"] for row in m["rows"])
    assert (
        m["analytic_total"]
        == m["measured_total"]
        == r["executed"]["total_flops"]
        - next(t["flops"] for t in r["executed"]["terms"] if t["term"] == "softmax")
    )


def test_sdpa_path_never_silently_wrong():
    m = audit_cost(ModelSpec.from_sizes(d_model=32, heads=4, d_ff=64), Workload(seq=9), measure=True)[
        "measured"
    ]
    core = next(row for row in m["rows"] if row["term"] == "QKᵀ + AV")
    assert next(row for row in m["rows"] if row["term"] == "FFN")["equal"]
    if core["measured"] != core["analytic"]:  # the counter missed the fused kernel: it must say so
        assert m["missed_ops"] and any("scaled_dot_product" in op for op in m["missed_ops"])
        assert any(op in w for op in m["missed_ops"] for w in m["warnings"])
    else:
        assert m["warnings"] == []


def test_gpt_logits_and_reconciliation():
    kw = dict(model="gpt", d_model=32, heads=4, kv_heads=2, d_ff=64, seq=6, batch=2, layers=2, vocab=100)
    r = cost(measure=True, path="explicit", **kw)
    assert r["config"]["causal"] is True
    assert _macs(r)["logits"] == 2 * 6 * 32 * 100
    rows = {row["term"]: row for row in r["measured"]["rows"]}
    assert rows["outside attention and FFN"]["measured"] == 2 * 2 * 6 * 32 * 100  # the lm_head matmul
    assert all(row["equal"] for row in rows.values()) and r["measured"]["warnings"] == []


def test_gpt_training_n_includes_final_norm_and_tied_logits():
    t = audit_cost(
        ModelSpec.from_sizes(model="gpt", d_model=64, heads=4, d_ff=256, layers=2, vocab=100),
        Workload(seq=32),
        training=True,
    )
    n_layer = 4 * 64 * 64 + 2 * 64 * 256 + 256 + 9 * 64
    assert t["training"]["N"] == 2 * n_layer + 2 * 64 + 64 * 100  # layers + LN_f + logit matrix (tied)
    assert (
        audit_cost(ModelSpec.from_sizes(d_model=8, heads=2, d_ff=16), Workload(seq=3, window=2))["config"][
            "causal"
        ]
        is True
    )
