"""Composition scores equal the Frobenius norms of the explicit d x d products (gains folded in, W^O
centred under LayerNorm); path ablation removes exactly one head's write from one path."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.interp.composition import (
    circuit_report,
    composition_scores,
    path_ablation,
    probe_length,
    random_baseline,
    repeat_loss,
)
from attnlab.interp.sequences import repeated_tokens
from attnlab.models import GPT, GPTConfig
from attnlab.nn import capture


def _model(**kw) -> GPT:
    torch.manual_seed(3)
    config = GPTConfig(vocab_size=30, d_model=16, num_heads=4, num_layers=3, d_ff=24, max_len=24, **kw)
    model = GPT(config)
    with torch.no_grad():
        for block in model.blocks:  # gains far from 1, so an unfolded gain shows
            block.norm1.weight.uniform_(0.2, 3.0)
    return model.double().eval()


@torch.no_grad()
def _explicit(model, kind, s, hs, r, hr) -> float:
    """The score from the d x d matrices, written out in the row convention (x @ W)."""

    def parts(layer, head):
        block = model.blocks[layer]
        attn, g = block.self_attn, torch.diag(block.norm1.weight)
        d_k, group = attn.d_k, attn.num_heads // attn.num_kv_heads
        kv = head // group
        w_q = g @ attn.q_proj.weight[head * d_k : (head + 1) * d_k].T  # [d, d_k]
        w_k = g @ attn.k_proj.weight[kv * d_k : (kv + 1) * d_k].T
        w_v = g @ attn.v_proj.weight[kv * d_k : (kv + 1) * d_k].T
        w_o = attn.out_proj.weight[:, head * d_k : (head + 1) * d_k].T  # [d_k, d]
        if model.config.norm == "layer":  # a LayerNorm's output and input directions are mean-free
            centre = torch.eye(16, dtype=w_q.dtype) - 1 / 16  # [d, d]: x -> x - mean(x)
            w_q, w_k, w_v, w_o = centre @ w_q, centre @ w_k, centre @ w_v, w_o @ centre
        return w_q @ w_k.T, w_v @ w_o  # W_QK, W_OV

    _, ov_s = parts(s, hs)
    qk_r, ov_r = parts(r, hr)
    right = {"Q": qk_r, "K": qk_r.T, "V": ov_r}[kind]
    return float((ov_s @ right).norm() / (ov_s.norm() * right.norm()))


@pytest.mark.parametrize(
    "kw", [{}, {"norm": "rms", "num_kv_heads": 2, "positions": "rope", "qkv_bias": False}]
)
@pytest.mark.parametrize("kind", ["Q", "K", "V"])
def test_scores_equal_the_explicit_products(kw, kind):
    model = _model(**kw)
    scores = composition_scores(model, kind)
    assert scores.shape == (3, 4, 3, 4)
    assert (
        float(scores[1:, :, :2].abs().max()) == 0.0 and float(scores[2].abs().max()) == 0.0
    )  # not earlier: 0
    for s, hs, r, hr in [(0, 0, 1, 3), (0, 2, 2, 1), (1, 3, 2, 0)]:
        assert float(scores[s, hs, r, hr]) == pytest.approx(_explicit(model, kind, s, hs, r, hr), rel=1e-10)
    assert 0.05 < random_baseline(model) < 0.5 and random_baseline(model) == random_baseline(model)


def test_path_ablation_touches_one_path_of_one_head():
    model = _model()
    probe = repeated_tokens(4, 5, 30, seed=0)  # [4, 11]
    with torch.no_grad(), capture(model, ["blocks.2.self_attn.weights"]) as cache:
        plain = model(probe)
    base = cache["blocks.2.self_attn.weights"]  # [B, h, T, T]
    pattern, logits = path_ablation(model, probe, (1, 0), (2, 3), "v")
    torch.testing.assert_close(pattern, base[:, 3], rtol=0, atol=1e-12)  # values do not move the pattern
    assert (logits - plain).abs().max() > 1e-6
    pattern, logits = path_ablation(model, probe, (1, 0), (2, 3), "k")
    assert (pattern - base[:, 3]).abs().max() > 1e-6
    with torch.no_grad(), capture(model, ["blocks.2.self_attn.weights"]) as after:
        model(probe)
    torch.testing.assert_close(
        after["blocks.2.self_attn.weights"], base, rtol=0, atol=0
    )  # nothing left behind
    # a sender that writes nothing: ablating its path changes nothing
    with torch.no_grad():
        model.blocks[0].self_attn.out_proj.weight[:, 4:8] = 0.0
        plain = model(probe)
    for path in ("q", "k", "v"):
        pattern, logits = path_ablation(model, probe, (0, 1), (2, 2), path)
        torch.testing.assert_close(logits, plain, rtol=0, atol=1e-12)


def test_bad_heads_are_named():
    model = _model()
    probe = repeated_tokens(2, 5, 30, seed=0)
    with pytest.raises(ValueError, match=r"\bsender 2\.0\b"):
        path_ablation(model, probe, (2, 0), (1, 0), "k")
    with pytest.raises(ValueError, match=r"\breceiver head 1\.9\b"):
        path_ablation(model, probe, (0, 0), (1, 9), "k")
    with pytest.raises(ValueError, match=r"\['q', 'k', 'v'\]"):
        path_ablation(model, probe, (0, 0), (1, 1), "o")
    with pytest.raises(ValueError, match=r"\['Q', 'K', 'V'\]"):
        composition_scores(model, "O")
    # heads are int pairs or the library's "layer.head"; a float or a bool is not a layer (trial B, #16)
    with pytest.raises(ValueError, match=r"^sender \(0\.0, 0\):.*\b0\.0$"):
        path_ablation(model, probe, (0.0, 0), (1, 0), "k")
    with pytest.raises(ValueError, match=r"^receiver \(True, 0\):.*\bTrue$"):
        path_ablation(model, probe, (0, 0), (True, 0), "k")
    with pytest.raises(ValueError, match=r"^ids\b.*\[B, T\]"):
        path_ablation(model, probe[0], (0, 0), (1, 0), "k")
    pattern, logits = path_ablation(model, probe, "0.1", "2.3", "q")
    want = path_ablation(model, probe, (0, 1), (2, 3), "q")
    assert torch.equal(pattern, want[0]) and torch.equal(logits, want[1])


def test_circuit_report_and_the_command(tmp_path):
    model = _model(positions="rope", ffn="none")
    report = circuit_report(model, length=5, batch=4)
    assert report.paths.receiver[0] >= 1 and len(report.paths.rows) == report.paths.receiver[0] * 4 * 3
    assert set(report.scores) == {"Q", "K", "V"} and any("K-composition" in line for line in report.lines())
    model.float().save(tmp_path / "m")
    result = CliRunner().invoke(
        cli, ["compose", str(tmp_path / "m"), "--receiver", "2.1", "--length", "5", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["receiver"] == "2.1" and (data["receiver_layer"], data["receiver_head"]) == (2, 1)
    assert len(data["paths"]) == 2 * 4 * 3 and {p["sender"] for p in data["paths"]} == {
        f"{layer}.{head}" for layer in (0, 1) for head in range(4)
    }  # every head named "layer.head", the receiver as the senders
    assert 0 <= data["score"] <= 1 and len(data["scores"]["K"]) == 3
    bad = CliRunner().invoke(cli, ["compose", str(tmp_path / "m"), "--receiver", "one"])
    assert bad.exit_code == 2 and "--receiver" in bad.output and "layer.head" in bad.output


def test_probe_length_needs_a_repeat_to_score_and_names_the_limit():
    assert probe_length(None, 24, 30) == 11 and probe_length(None, 1024, 30) == 20
    assert probe_length(None, 5, 30) == 2 and probe_length(None, 64, 3) == 2  # the smallest that fit
    with pytest.raises(ValueError, match=r"^--length 1\b.*\b2 to 11\b"):
        probe_length(1, 24, 30, name="--length")
    with pytest.raises(ValueError, match=r"^length 12\b.*\b25 positions\b.*\b24\b"):
        probe_length(12, 24, 30)
    with pytest.raises(ValueError, match=r"^length 9\b.*\b9 distinct ids\b.*\bhas 9\b"):
        probe_length(9, 24, 9)
    for max_len in (2, 4):  # L = 1 was the default at 4 (a table of NaN), 0 at 2 ("length ... got 0")
        with pytest.raises(ValueError, match=rf"\b{max_len} positions\b.*L >= 2"):
            probe_length(None, max_len, 30)
    with pytest.raises(ValueError, match=r"\b2 token ids\b"):
        probe_length(None, 64, 2)
    probe = repeated_tokens(2, 1, 30)  # [2, 3]: nothing in the second copy is predictable
    with pytest.raises(ValueError, match=r"L = 1\b.*L >= 2"):
        repeat_loss(torch.zeros(2, 3, 30), probe)


@pytest.mark.parametrize(
    "max_len, args, message",
    [
        (24, ["--length", "1"], "Error: --length 1 leaves no repeat to score"),
        (4, [], "Error: the model reads at most 4 positions, too few for a [BOS, r_1..r_L, r_1..r_L] probe"),
        (2, [], "Error: the model reads at most 2 positions, too few"),
        (4, ["--length", "2"], "Error: --length 2: the model reads at most 4 positions, too few"),
    ],
)
def test_compose_refuses_probes_with_nothing_to_score(tmp_path, max_len, args, message):
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=30, d_model=16, num_heads=2, num_layers=2, d_ff=24, max_len=max_len)
    GPT(config).save(tmp_path / "m")
    result = CliRunner().invoke(cli, ["compose", str(tmp_path / "m"), *args])
    assert result.exit_code == 2, result.output  # it printed "nan" in every row and exited 0
    assert result.output.startswith(message) and result.output.count("\n") == 1, result.output
