"""In-context learning and induction heads change together: in the two-layer attention-only model
the ICL score (late loss minus early loss) falls as the induction score rises, strongly correlated
and half-way at nearly the same step; the one-layer model forms no induction head and learns far
less in context."""

from __future__ import annotations

import pytest

from attnlab.experiments.icl import QUICK, Settings, half_step, run, summarise


@pytest.mark.slow
def test_icl_and_the_induction_score_change_together():
    r = run(QUICK, log=lambda *_: None, progress=False)
    two, one = r.data["summaries"]["2-layer attention-only"], r.data["summaries"]["1-layer attention-only"]
    assert two["induction_end"] > 0.8 and two["icl_end"] < -0.5  # measured 0.99 and -0.88
    assert two["correlation"] < -0.9  # measured -0.98
    assert abs(two["induction_half_step"] - two["icl_half_step"]) <= 150  # measured 700 and 750
    assert one["induction_end"] < 0.3 and one["icl_end"] > two["icl_end"] + 0.4  # 0.11 and -0.15


def test_half_step_and_correlation_on_a_made_up_log():
    log = [{"step": 10 * i, "induction": x, "icl": -x} for i, x in enumerate([0.0, 0.1, 0.2, 0.8, 1.0])]
    assert half_step(log, "induction") == 30 and half_step(log, "icl") == 30
    assert abs(summarise(log)["correlation"] + 1.0) < 1e-12


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="models must be names from"):
        Settings(models=("3-layer",))
    with pytest.raises(ValueError, match="window=16: early and late windows"):
        Settings(window=16)
