"""In-context learning and induction heads change together: in the two-layer attention-only model
the ICL score (late loss minus early loss) falls as the induction score rises, strongly correlated
and half-way at nearly the same step; the one-layer model forms no induction head and learns far
less in context."""

from __future__ import annotations

import pytest

from attnlab.experiments.icl import QUICK, Settings, against_control, half_step, run, summarise


@pytest.mark.slow
def test_icl_and_the_induction_score_change_together():
    r = run(QUICK, log=lambda *_: None, progress=False)
    two, one = r.data["summaries"]["2-layer attention-only"], r.data["summaries"]["1-layer attention-only"]
    assert two["induction_end"] > 0.8 and two["icl_end"] < -0.5  # measured 0.99 and -0.88
    assert two["correlation"] < -0.9  # measured -0.98
    assert abs(two["induction_half_step"] - two["icl_half_step"]) <= 150  # measured 700 and 750
    assert one["induction_end"] < 0.3 and one["icl_end"] > two["icl_end"] + 0.4  # 0.11 and -0.15
    test = r.data["test"]  # against the one-layer control, per held-out sequence
    assert test["control"] == "1-layer attention-only" and test["answer"] == "agrees"
    assert test["interval"][1] < -0.4


def test_half_step_and_correlation_on_a_made_up_log():
    log = [{"step": 10 * i, "induction": x, "icl": -x} for i, x in enumerate([0.0, 0.1, 0.2, 0.8, 1.0])]
    assert half_step(log, "induction") == 30 and half_step(log, "icl") == 30
    assert abs(summarise(log)["correlation"] + 1.0) < 1e-12


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ValueError, match=r"^models\b.*, got \['3-layer'\]$"):
        Settings(models=("3-layer",))
    with pytest.raises(ValueError, match=r"^window=16\b.*\boverlap\b"):
        Settings(window=16)


def test_a_correlation_the_control_shares_is_not_support():
    """Both models' ICL scores fall as their induction scores rise (correlation -1 in each); the
    verdict reads the per-sequence difference against the control, not the correlation."""

    def log(ind_end, icl_end, per_seq):
        hist = [{"step": 0, "induction": 0.0, "icl": 0.0}, {"step": 10, "induction": ind_end, "icl": icl_end}]
        hist[-1]["icl_per_sequence"] = per_seq
        return hist

    same = {"a": log(0.9, -0.5, [-0.5, -0.6, -0.4, -0.5]), "c": log(0.1, -0.5, [-0.4, -0.6, -0.5, -0.5])}
    test = against_control(same, {n: summarise(h) for n, h in same.items()})
    assert (test["model"], test["control"], test["answer"]) == ("a", "c", "inconclusive")
    apart = {"a": log(0.9, -0.9, [-0.9, -1.0, -0.8, -0.9]), "c": same["c"]}
    test = against_control(apart, {n: summarise(h) for n, h in apart.items()})
    assert test["answer"] == "agrees" and test["difference"] == pytest.approx(-0.4)
    weak = {"c": same["c"]}
    assert against_control(weak, {"c": summarise(weak["c"])})["answer"] == "model too weak"
