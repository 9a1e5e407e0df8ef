"""The GQA experiment on Shakespeare: the KV cache shrinks by exactly h / h_kv (the formula equals
what a real cache holds), the parameters shrink with it, and the held-out loss barely moves."""

from __future__ import annotations

import math

import pytest

from attnlab.experiments.gqa import Settings, decide, run

SMALL = Settings(d_model=16, num_heads=4, num_layers=1, context=32, steps=60, batch=16, eval_windows=64,
                 spread_seeds=1)  # fmt: skip


@pytest.mark.slow
def test_cache_shrinks_h_over_h_kv_with_little_loss():
    r = run(SMALL, log=lambda *_: None, progress=False)
    models = [m for m in r.data["models"] if m["seed"] == SMALL.seed]
    assert [m["kv_heads"] for m in models] == [4, 2, 1]
    d_k = SMALL.d_model // SMALL.num_heads
    for m in r.data["models"]:
        assert m["cache_bytes_per_token"] == 2 * SMALL.num_layers * m["kv_heads"] * d_k * 4
        assert m["measured_cache_bytes_per_token"] == m["cache_bytes_per_token"]
    assert models[0]["params"] > models[1]["params"] > models[2]["params"]  # W^K, W^V shrink too
    vocab = r.data["vocab"]
    losses = [m["held_out_loss"] for m in models]
    assert all(loss < math.log(vocab) - 0.8 for loss in losses)  # every model learnt something
    assert r.data["worst_difference"] < 0.1  # little quality loss (measured -0.05..0: none)
    assert [row[3] for row in r.rows] == ["1/1", "1/2", "1/4"]
    # 60 steps learn less than a table of character pairs: no verdict on quality loss
    assert r.data["baselines"]["bigram"] < losses[0] and r.data["answer"] == "model too weak"


def test_the_gate_comes_before_little_quality_loss():
    tables = {"unigram": 3.3, "bigram": 2.51, "trigram": 2.6}
    assert decide(2.489, 0.053, 0.010, tables)[0] == "model too weak"  # MHA no better than the bigram
    assert decide(2.0, 0.005, 0.010, tables)[0] == "agrees"
    assert decide(2.0, 0.2, 0.010, tables)[0] == "disagrees"  # 0.2 > 10% of the 0.51 gained
    assert decide(2.0, 0.03, 0.010, tables)[0] == "inconclusive"


def test_kv_heads_are_h_half_two_one():
    assert Settings(num_heads=8).kv_heads == (8, 4, 2, 1)
    assert Settings(d_model=32, num_heads=4).kv_heads == (4, 2, 1)


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="num_heads=3 must be even"):
        Settings(num_heads=3, d_model=48)
    with pytest.raises(ValueError, match=r"\bRoPE\b.*\beven\b.*\bd_model/num_heads = 3$"):
        Settings(d_model=24, num_heads=8)
