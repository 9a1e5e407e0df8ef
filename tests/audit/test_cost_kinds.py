"""audit cost for the beyond-quadratic kinds: each term against hand arithmetic, the block-sparse
tile count against the engine's own tile plan, the decoding state against the bytes the engine's
caches hold, growth with T, and one-line errors for what a kind cannot be audited with."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner

from attnlab.audit import Workload
from attnlab.audit.config import ModelSpec
from attnlab.audit.cost import audit_cost
from attnlab.audit.cost_kinds import BLOCK_SIZE, CONV_TAPS, block_sparse_tiles
from attnlab.cli import cli
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.nn import BlockConfig, sparse, state_space
from attnlab.nn.sparse import block_plan, make_pattern


def _gpt_spec(layers=2, **block) -> ModelSpec:
    return ModelSpec("gpt", BlockConfig(512, 8, 2048, norm_place="pre", **block), layers=layers, vocab=1000)


def _terms(report) -> dict[str, int]:
    return {t["term"]: t["macs"] for t in report["terms"]}


def test_linear_attention_terms_are_the_hand_arithmetic():
    r = audit_cost(_gpt_spec(attention="linear"), Workload(seq=4096, batch=3))
    L, B, T, h, d_k, d = 2, 3, 4096, 8, 64, 512
    t = _terms(r)
    assert t["state update φ(K)ᵀV"] == t["read-out φ(Q)ᵀS"] == L * B * h * T * d_k * d_k
    assert t["normaliser φ(Q)·z"] == L * B * h * T * d_k
    assert t["Q projection"] == L * B * T * d * d and "QKᵀ" not in t and "softmax" not in t
    assert r["kv_cache"] is None and r["score_entries"] == 0
    assert "4·T·d·d_k = 536,870,912" in r["notes_check"]["becomes"]  # 4·4096·512·64 FLOPs per layer
    chunks = -(-T // 64)
    assert r["executed"]["total_flops"] == r["total_flops"] + 2 * (2 * L * B * h * chunks * 64 * 64 * d_k)


def test_ssm_terms_are_the_hand_arithmetic():
    r = audit_cost(_gpt_spec(attention="ssm", state_size=16), Workload(seq=1000))
    L, T, d, n = 2, 1000, 512, 16
    t = _terms(r)
    assert t["in projection (u, gate)"] == L * T * d * 2 * d
    assert t["causal conv (4 taps)"] == L * T * d * 4
    assert t["Δ projection"] == t["out projection"] == L * T * d * d
    assert t["B, C projections"] == L * T * d * 2 * n
    assert t["scan h = āh + b̄x"] == t["read-out y = C·h"] == L * T * d * n
    assert r["executed"]["total_flops"] == r["total_flops"]
    assert "4·T·d·n = 32,768,000" in r["notes_check"]["becomes"]


@pytest.mark.parametrize("attention", ["linear", "ssm"])
def test_every_term_of_linear_and_ssm_doubles_with_t(attention):
    r = audit_cost(_gpt_spec(attention=attention), Workload(seq=777))
    assert {g["ratio"] for g in r["growth"]} == {2.0}


@pytest.mark.parametrize("attention", ["linear", "ssm"])
def test_the_state_is_what_the_engine_caches_hold(attention):
    cfg = GPTConfig(vocab_size=11, d_model=32, num_heads=4, num_layers=3, attention=attention, state_size=8)
    spec = ModelSpec("gpt", cfg.block, layers=3, vocab=11)
    want = audit_cost(spec, Workload(seq=20))["state"]["bytes_per_sequence"]
    with torch.no_grad():
        state = GPT(cfg).start(torch.randint(0, 11, (1, 20)))
        for _ in range(5):  # the state does not grow
            _, state = GPT(cfg).step(torch.tensor([1]), state)
    assert sum(c.nbytes for c in state.caches) == want


@pytest.mark.parametrize("seq, window", [(4096, 256), (300, 17), (1000, 1), (257, 1000), (16384, 256)])
def test_block_sparse_tiles_are_the_engine_plan(seq, window):
    partial, full = block_plan(make_pattern(seq, seq, causal=True, window=window))
    assert block_sparse_tiles(seq, min(window, seq)) == int((partial | full).sum())


def test_block_sparse_executes_only_its_tiles():
    spec = _gpt_spec(attention="block_sparse", window=256)
    r = audit_cost(spec, Workload(seq=4096, window=256))
    dense = audit_cost(_gpt_spec(), Workload(seq=4096, window=256))
    assert r["total_flops"] == dense["total_flops"]  # the same attended entries
    qk = {t["term"]: t["macs"] for t in r["executed"]["terms"]}["QKᵀ"]
    assert qk == 2 * 8 * 93 * 128 * 128 * 64  # L·h·tiles·128²·d_k, 93 tiles at T=4096, W=256
    dense_qk = {t["term"]: t["macs"] for t in dense["executed"]["terms"]}["QKᵀ"]
    assert dense_qk == 2 * 8 * 4096 * 4096 * 64


def test_the_engine_sizes_agree():
    assert BLOCK_SIZE == sparse.BLOCK_SIZE and CONV_TAPS == state_space.CONV_TAPS


@pytest.mark.parametrize(
    "args, message",
    [
        (["--attention", "block_sparse"], "Error: --attention block_sparse needs --window W"),
        (
            ["--model", "bert", "--attention", "ssm"],
            "Error: --attention 'ssm' is audited in model gpt, not 'bert'",
        ),
        (["--attention", "ssm", "--training"], "whose second term is softmax attention's"),
        (["--attention", "linear", "--measure"], "--measure reconciles the softmax kinds"),
        (["--attention", "linear", "--window", "8"], "--attention 'linear' has no window"),
    ],
)
def test_cli_errors_are_one_line(args, message):
    base = ["audit", "cost", "--model", "gpt", "--vocab", "50", "--seq", "64"]
    if "bert" in args:
        base = ["audit", "cost", "--vocab", "50", "--seq", "64"]
    res = CliRunner().invoke(cli, [*base, *args])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert message in res.output


def test_cli_prints_the_state_and_what_4n2d_becomes():
    args = ["audit", "cost", "--model", "gpt", "--vocab", "50", "--seq", "64", "--attention", "linear"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "state instead of a KV cache" in res.output and "4n²d becomes 4·T·d·d_k" in res.output
