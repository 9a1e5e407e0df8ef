"""The cost audit of decoder-layer, transformer and bert: every term by hand, the KV caches, and the
reconciliation with FlopCounterMode on the explicit path."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from attnlab.audit import ModelSpec, Workload, audit_cost, render_cost
from attnlab.cli import cli


def cost(**kw):
    """``audit_cost`` of the model, workload and options named by flat keywords (the CLI's flags)."""
    wl = {k: kw.pop(k) for k in ("seq", "batch", "src_seq", "causal", "window") if k in kw}
    opts = {k: kw.pop(k) for k in ("training", "bytes_per_value", "measure", "path") if k in kw}
    return audit_cost(ModelSpec.from_sizes(**kw), Workload(**wl), **opts)


# the tiny config of every hand count: d=8, h=2 (d_k=4), f=16, T=3 target tokens, S=2 source tokens, B=2
TINY = dict(d_model=8, heads=2, d_ff=16, seq=3, batch=2)


def _macs(report):
    return {t["term"]: t["macs"] for t in report["terms"]}


def _flops(report):
    return {t["term"]: t["flops"] for t in report["terms"]}


def test_decoder_layer_by_hand():
    r = cost(model="decoder-layer", src_seq=2, **TINY)
    # self-attention: B·T·d² = 2·3·64 = 384; causal A = 3·4/2 = 6, QKᵀ = AV = B·h·A·d_k = 2·2·6·4 = 96
    # cross-attention: Q and W^O over T: 384; K, V of the memory B·S·d² = 2·2·64 = 256;
    # QKᵀ = AV = B·h·T·S·d_k = 2·2·3·2·4 = 96; FFN 2·B·T·d·f = 2·2·3·8·16 = 1,536
    assert _macs(r) == {
        "Q projection": 384,
        "K projection": 384,
        "V projection": 384,
        "QKᵀ": 96,
        "softmax": 0,
        "AV": 96,
        "W^O": 384,
        "cross Q projection": 384,
        "cross K projection": 256,
        "cross V projection": 256,
        "cross QKᵀ": 96,
        "cross softmax": 0,
        "cross AV": 96,
        "cross W^O": 384,
        "FFN": 1536,
    }
    assert _flops(r)["softmax"] == 5 * 2 * 2 * 6 == 120
    assert _flops(r)["cross softmax"] == 5 * 2 * 2 * 3 * 2 == 120
    assert r["config"]["causal"] is True and r["config"]["src_seq"] == 2
    assert r["total_macs"] == 1728 + 1472 + 1536 == 4736
    assert r["total_flops"] == 2 * 4736 + 240 == 9712
    assert r["cross_score_entries"] == 2 * 2 * 3 * 2 == 24
    # KV caches, float32, L=1, h_kv=2, d_k=4: 2·1·2·4·4 = 64 B per token, self over T=3, cross over S=2
    k = r["kv_cache"]
    assert (k["bytes_per_token"], k["bytes_per_sequence"], k["bytes_batch"]) == (64, 192, 384)
    x = k["cross_attention"]
    assert (x["bytes_per_source_token"], x["bytes_per_sequence"], x["bytes_batch"]) == (64, 128, 256)
    # activations: 13 tensors of B·T·d = 48, 2 self score tensors of 36, cross K/V of B·S·d = 32,
    # 2 cross score tensors of B·h·T·S = 24, 2 FFN hidden of B·T·f = 96
    a = r["activations"]
    assert a["per_layer_entries"] == 13 * 48 + 2 * 36 + 2 * 32 + 2 * 24 + 2 * 96 == 1000
    assert a["fused_attention_all_layers_bytes"] == 4 * (1000 - 72 - 48)


def test_decoder_layer_src_seq_defaults_to_seq_and_growth_doubles_both():
    r = cost(model="decoder-layer", **TINY)
    assert r["config"]["src_seq"] == 3 and _macs(r)["cross K projection"] == 2 * 3 * 64
    g = {row["term"]: row["ratio"] for row in r["growth"]}
    assert g["cross QKᵀ"] == 4.0 and g["cross K projection"] == 2.0
    assert g["QKᵀ"] == (21 * 2 * 2 * 4) / (6 * 2 * 2 * 4)  # causal: A(6) = 21, A(3) = 6
    assert "when T and S double:" in render_cost(r)


def test_transformer_by_hand():
    r = cost(model="transformer", src_seq=2, vocab=10, **TINY)
    m = _macs(r)
    # encoder over S=2, dense: B·S·d² = 256; QKᵀ = AV = B·h·S²·d_k = 2·2·4·4 = 64; FFN 2·B·S·d·f = 1,024
    assert [m[f"encoder {t}"] for t in ("Q projection", "K projection", "V projection", "W^O")] == [256] * 4
    assert m["encoder QKᵀ"] == m["encoder AV"] == 64 and m["encoder FFN"] == 1024
    assert _flops(r)["encoder softmax"] == 5 * 2 * 2 * 4
    # decoder over T=3 as the decoder layer above, then logits B·T·d·V = 2·3·8·10 = 480
    assert m["decoder QKᵀ"] == 96 and m["decoder cross K projection"] == 256 and m["decoder cross QKᵀ"] == 96
    assert m["decoder FFN"] == 1536 and m["logits"] == 480
    assert r["total_macs"] == (4 * 256 + 2 * 64 + 1024) + 4736 + 480 == 7392
    assert r["total_flops"] == 2 * 7392 + 80 + 240 == 15104
    # a dense kernel also computes the decoder's masked scores: 3 more per head and sequence
    assert r["executed"]["total_flops"] == 15104 + 2 * 2 * (2 * 2 * 3 * 4) + 5 * 2 * 2 * 3
    assert r["encoder_score_entries"] == 2 * 2 * 2 * 2
    assert r["kv_cache"]["bytes_per_token"] == 64
    assert r["kv_cache"]["cross_attention"]["bytes_per_sequence"] == 128


def test_bert_by_hand():
    r = cost(model="bert", vocab=10, **TINY)
    m = _macs(r)
    # the encoder layer of test_cost.test_terms_by_hand (3,360 MACs) + the pooler B·d² = 128; no logits
    assert "logits" not in m and m["pooler"] == 2 * 8 * 8
    assert m["QKᵀ"] == 2 * 2 * 9 * 4 and m["FFN"] == 1536
    assert r["total_macs"] == 3360 + 128
    assert r["total_flops"] == 2 * 3488 + 5 * 2 * 2 * 9
    assert r["kv_cache"] is None and r["activations"]["logits_bytes"] == 0
    assert "0 FLOPs" in r["embeddings_note"]
    t = cost(model="bert", vocab=10, training=True, **TINY)["training"]
    # N = one layer 4d² + 2df + f + 9d = 600 + the embedding LayerNorm 2d = 16 (pooler and tables out)
    assert t["N"] == 616 and t["flops_per_token"] == 6 * 616 + 12 * 1 * 2 * 4 * 3


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"model": "bert", "vocab": 10, "causal": True}, "bert' is bidirectional"),
        ({"model": "encoder-layer", "src_seq": 4}, "src_seq applies to decoder-layer and transformer"),
        ({"model": "transformer", "vocab": 10, "window": 2}, "window applies to"),
        ({"model": "transformer"}, "needs a vocabulary size"),
        ({"model": "decoder-layer", "training": True}, "not 'decoder-layer'"),
        (
            {"model": "rnn"},
            r"model must be one of \['encoder-layer', 'decoder-layer', 'transformer', 'gpt', 'bert'\], "
            r"got 'rnn'",
        ),
    ],
)
def test_bad_input(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        cost(**{**TINY, **kwargs})


@pytest.mark.parametrize(
    "kwargs, cross_qkv",
    [
        # cross Q over T plus K, V of the memory, all layers, as FLOPs: 2·L·(B·T·d² + 2·B·S·d·h_kv·d_k)
        ({"model": "decoder-layer", "src_seq": 5}, 2 * 1 * (2 * 9 * 1024 + 2 * 2 * 5 * 32 * 32)),
        (
            {"model": "decoder-layer", "src_seq": 7, "kv_heads": 2, "window": 4, "layers": 2},
            2 * 2 * (2 * 9 * 1024 + 2 * 2 * 7 * 32 * 16),
        ),
    ],
)
def test_decoder_layer_reconciliation_exact_on_explicit_path(kwargs, cross_qkv):
    r = cost(d_model=32, heads=4, d_ff=64, seq=9, batch=2, measure=True, path="explicit", **kwargs)
    m = r["measured"]
    assert m["warnings"] == [] and m["missed_ops"] == []
    rows = {row["term"]: row["measured"] for row in m["rows"]}
    assert rows["cross Q, K, V projections"] == cross_qkv
    assert all(row["analytic"] == row["measured"] for row in m["rows"])
    softmax = sum(t["flops"] for t in r["executed"]["terms"] if "softmax" in t["term"])
    assert m["analytic_total"] == m["measured_total"] == r["executed"]["total_flops"] - softmax


def test_transformer_and_bert_reconciliation_exact_on_explicit_path():
    kw = dict(d_model=32, heads=4, d_ff=64, seq=9, batch=2, layers=2, vocab=50, measure=True, path="explicit")
    t = cost(model="transformer", src_seq=5, **kw)["measured"]
    rows = {row["term"]: row["measured"] for row in t["rows"]}
    assert rows["outside attention and FFN"] == 2 * 2 * 9 * 32 * 50  # the generator matmul
    assert rows["encoder FFN"] == 2 * 2 * 2 * 5 * 2 * 32 * 64  # 2·(L·B·S·2·d·f)
    assert rows["decoder cross QKᵀ + AV"] == 2 * 2 * 2 * 2 * 4 * 9 * 5 * 8  # 2·2·(L·B·h·T·S·d_k)
    assert t["warnings"] == [] and all(row["equal"] for row in t["rows"])
    assert t["analytic_total"] == t["measured_total"]
    b = cost(model="bert", **kw)["measured"]
    rows = {row["term"]: row["measured"] for row in b["rows"]}
    assert rows["outside attention and FFN"] == 2 * 2 * 32 * 32  # the pooler on [CLS]: 2·B·d²
    assert b["warnings"] == [] and all(row["equal"] for row in b["rows"])
    assert b["analytic_total"] == b["measured_total"]


def test_sdpa_path_never_silently_wrong_with_cross_attention():
    kw = dict(model="decoder-layer", d_model=32, heads=4, d_ff=64, seq=9, src_seq=5)
    m = cost(measure=True, **kw)["measured"]
    rows = {row["term"]: row for row in m["rows"]}
    assert rows["FFN"]["equal"] and rows["cross Q, K, V projections"]["equal"]
    if not rows["cross QKᵀ + AV"]["equal"]:  # the counter missed the fused kernel: it must say so
        assert any("scaled_dot_product" in op for op in m["missed_ops"])
        assert any("cross QKᵀ + AV" in w for w in m["warnings"])
    else:
        assert m["warnings"] == []


def test_cli_decoder_layer_src_seq_json():
    args = "audit cost --model decoder-layer --d-model 8 --heads 2 --d-ff 16 --seq 3 --src-seq 2 --batch 2"
    r = CliRunner().invoke(cli, [*args.split(), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["total_macs"] == 4736 and data["kv_cache"]["cross_attention"]["bytes_batch"] == 256
