"""The faithfulness experiment: Spearman's rho on hand-made rankings, gradient x input as the first-order
occlusion, attention rows summing to one, and on a tiny GPT trained on a play the course's claim in
its direction (attention picks occlusion's most important position less often than distance does)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.experiments.faithfulness import DISTANCE, GRADIENT, MIN_GAIN, QUICK, compare, run
from attnlab.interp.saliency import attention_received, gradient_x_input, occlusion, ranks, spearman
from attnlab.models.gpt import GPT, GPTConfig


def test_spearman_on_known_rankings():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(1 - 6 * 2 / (4 * 15))  # 1 - 6 Σd² / n(n²-1)
    assert ranks(np.array([5.0, 1.0, 5.0])).tolist() == [1.5, 0.0, 1.5]  # ties share their mean rank
    with pytest.raises(ValueError, match="constant"):
        spearman([1, 1, 1], [1, 2, 3])


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(
            vocab_size=20, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=12, tie_weights=False
        )
    )
    return model.double().eval()  # float64: occlusion's small differences above rounding


def test_gradient_x_input_is_the_first_order_occlusion(gpt):
    ids, targets = torch.randint(0, 20, (3, 12)), torch.randint(0, 20, (3,))
    with torch.no_grad():
        gpt.tok_embed.weight.mul_(1e-3)  # tiny token embeddings: removing one is a small step
    occ, gxi = occlusion(gpt, ids, targets), gradient_x_input(gpt, ids, targets)
    assert occ.shape == gxi.shape == (3, 12)
    assert float(occ.max()) > 0
    # |Δ log p| = |g·e| to first order: the rest (second order in e) within 1% of the largest score
    assert float((occ - gxi).abs().max()) < 0.01 * float(occ.max())


def test_attention_received_is_a_distribution_per_layer(gpt):
    att = attention_received(gpt, torch.randint(0, 20, (2, 12)))
    assert att.shape == (2, 2, 12)  # [L, B, T]
    assert torch.allclose(att.sum(dim=-1), torch.ones(2, 2, dtype=att.dtype), atol=1e-12)


@pytest.fixture(scope="module")
def result(text_run, tmp_path_factory):
    return run(QUICK, tmp_path_factory.mktemp("faithfulness"), run_dir=text_run, log=lambda *a: None)


def test_attention_is_not_occlusion(result):
    v, rows = result.verdict, {r.name: r for r in result.rows}
    print(result.table(), v)
    assert v["best_top1"] < v["distance_top1"] - 0.15  # occlusion's top position: rarely the most attended
    assert rows[GRADIENT].rho_occlusion > 0.2  # the two importance measures do agree with each other
    assert result.model["gate"]["passed"]  # 2.11 nats/token against the bigram table's 2.54
    # 16 lines cannot tell the gain over distance from MIN_GAIN (measured -0.12 to +0.17): no verdict
    lo, hi = v["interval"]
    assert lo < MIN_GAIN < hi and v["answer"] == "inconclusive" and not v["beats_distance"]
    for r in result.rows:
        assert -1 <= r.rho_occlusion <= 1 and 0 <= r.top1 <= 1
    assert rows[DISTANCE].top1 == v["distance_top1"]


def test_files_json_and_cli(result, text_run, tmp_path):
    data = json.loads(open(result.files["json"]).read())
    assert data["claim"].startswith("A weight is a learned soft alignment") and len(data["rows"]) == 4
    assert len(data["example"]["tokens"]) == len(data["example"]["occlusion"]) == 64
    assert open(result.files["plot"], "rb").read(4) == b"\x89PNG"
    args = ["experiment", "faithfulness", "--run", str(text_run), "--lines", "4"]
    done = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "a")])
    assert done.exit_code == 0, done.output
    assert "| layer 1 attention |" in done.output and "The claim: A weight is a learned" in done.output
    done = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "b"), "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout, parse_constant=_refuse)["verdict"]["lines"] == 4  # strict JSON


def _refuse(constant: str):
    raise ValueError(f"not JSON: {constant}")


def test_lines_that_rank_nothing_are_left_out():
    att = torch.rand(2, 3, 6)  # [L, B, T]
    occ, gxi = torch.rand(3, 6), torch.rand(3, 6)
    occ[1] = 0.5  # every position ties: no ranking
    assert compare(att, occ, gxi)[1]["lines"] == 2
    with pytest.raises(ValueError, match="every score ties"):
        compare(att, torch.zeros(3, 6), gxi)


def test_the_verdict_follows_the_interval_and_the_gate():
    """Attention equal to distance on 40 lines: the gain's interval is tight below MIN_GAIN (agrees);
    attention that ranks as occlusion does beats distance (disagrees); a model that failed its gate
    gets no verdict."""
    torch.manual_seed(0)
    b, t = 40, 12
    occ = torch.rand(b, t) + torch.arange(t) / t  # [B, T]: nearer positions matter more, noisily
    gxi = occ + 0.1 * torch.rand(b, t)
    distance = torch.arange(t, dtype=torch.float32).expand(b, t)
    same = compare(distance[None] + 1e-3 * torch.rand(1, b, t), occ, gxi)[1]
    assert same["interval"][1] < MIN_GAIN and same["answer"] == "agrees"
    faithful = compare(occ[None].clone(), occ, gxi)[1]
    assert faithful["interval"][0] > MIN_GAIN and faithful["answer"] == "disagrees"
    assert faithful["beats_distance"]
    assert compare(occ[None].clone(), occ, gxi, competent=False)[1]["answer"] == "model too weak"
