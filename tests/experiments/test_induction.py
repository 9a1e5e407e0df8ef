"""The induction-head experiment on a reduced quick run: the two-layer attention-only model forms an
induction head (best score > 0.5) beside a previous-token head, the one-layer model does not
(< 0.2), and zero-ablating the induction heads sends the repeat loss back up."""

from __future__ import annotations

import dataclasses
import json

import pytest

from attnlab.experiments.induction import QUICK, Settings, run

REDUCED = dataclasses.replace(QUICK, eval_every=250, eval_size=64)


@pytest.mark.slow
def test_two_layers_form_an_induction_head_and_one_layer_does_not(tmp_path):
    two = run(
        dataclasses.replace(REDUCED, models=("2-layer attention-only",)),
        tmp_path / "two",
        show_progress=False,
        log=lambda *a: None,
    )
    one = run(
        dataclasses.replace(REDUCED, steps=300, models=("1-layer attention-only",)),
        tmp_path / "one",
        show_progress=False,
        log=lambda *a: None,
    )
    (r2,), (r1,) = two.runs, one.runs
    print(f"measured: 2-layer best induction {r2.best_induction}, 1-layer {r1.best_induction}")
    assert r2.best_induction > 0.5 and r2.best_head[0] == 1  # in the second layer
    assert r2.best_previous > 0.5 and r2.previous_head[0] == 0  # beside a first-layer previous-token head
    assert r1.best_induction < 0.2
    assert r2.loss_repeat < 0.5 * r2.loss_first  # the repeats have become predictable
    assert r2.loss_repeat_all_ablated > 0.5 * r2.loss_first  # ... until the induction heads are ablated
    # ... and as many random heads do far less: the causal test, over 5 distinct draws
    c = r2.causal
    assert len(c["random_heads"]) == 5
    assert all(set(d).isdisjoint(r2.induction_heads) for d in c["random_heads"])
    assert c["interval"][0] > 0.5 and c["answer"] == "agrees"
    assert r1.causal is None  # no induction head: nothing to test
    data = json.loads((tmp_path / "two" / "results.json").read_text())
    assert data["models"][0]["best_induction"] == r2.best_induction
    assert (tmp_path / "two" / "induction.png").stat().st_size > 10_000
    assert "| 2-layer attention-only |" in (tmp_path / "two" / "results.md").read_text()


def test_random_heads_are_distinct_and_avoid_the_induction_heads():
    from attnlab.experiments.induction import random_heads

    draws = random_heads((2, 4), [(1, 0), (1, 3)], draws=5, seed=0)
    assert len(draws) == 5 and len({tuple(d) for d in draws}) == 5
    assert all(len(d) == 2 and not {(1, 0), (1, 3)} & set(d) for d in draws)
    assert random_heads((1, 3), [(0, 0)], draws=5, seed=0) == [[(0, 1)], [(0, 2)]]  # all there are
    assert random_heads((1, 3), [(0, 0), (0, 1)], draws=5, seed=0) == []  # one head left: too few


def test_settings_refuse_bad_input():
    with pytest.raises(ValueError, match="models must be names from"):
        Settings(models=("3-layer",))
    with pytest.raises(ValueError, match="the probe \\[BOS, r, r\\] has 41 tokens, more than seq_len=32"):
        Settings(probe_len=20)


def test_the_summary_does_not_claim_an_ablation_that_did_not_happen():
    from attnlab.experiments.induction import ModelRun, _ablated

    run = ModelRun("1-layer", 10, 1.0, [], 0.2, (0, 1), 0.9, (0, 0), 3.0, 2.435, 2.5, [], 2.435, 2.6, None)
    assert _ablated(run) == "(no head scored as an induction head: nothing to ablate)"
    two = ModelRun(
        "2-layer", 10, 1.0, [], 0.8, (1, 0), 0.9, (0, 0), 3.0, 0.4, 2.0, [(1, 0), (1, 2)], 2.9, 2.6, 100
    )
    assert _ablated(two) == "(2.900 with the induction heads 1.0, 1.2 ablated)"
