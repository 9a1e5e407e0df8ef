"""The attention-only trial on a text run: logged every ``every`` steps, cached by its settings."""

from __future__ import annotations

import dataclasses

import pytest

from attnlab.experiments.text_attention_only import Trial, run

TINY = Trial(d_model=16, context=16, steps=20, batch=4, every=10, probes=4)


def test_a_trial_logs_and_is_cached(text_run, tmp_path):
    logged = []
    first = run(text_run, tmp_path, TINY, log=logged.append)
    assert [r["step"] for r in first["history"]] == [0, 10, 20] and len(logged) == 3
    assert first["tokens_seen"] == 20 * 4 * 16 and not first["cached"]
    assert first["history"][0]["train_loss"] is None and first["history"][-1]["train_loss"] > 0
    for row in first["history"]:
        assert 0 <= row["induction"] <= 1 and 0 <= row["previous"] <= 1
    assert first["formed"] is (first["best_induction"] > 0.4)
    again = run(text_run, tmp_path, TINY, log=logged.append)
    assert again["cached"] and len(logged) == 3  # read back, not trained again
    assert {k: v for k, v in again.items() if k != "cached"} == {
        k: v for k, v in first.items() if k != "cached"
    }
    other = run(text_run, tmp_path, dataclasses.replace(TINY, seed=1), log=logged.append)
    assert not other["cached"] and len(list(tmp_path.glob("attention-only-*.json"))) == 2


def test_bad_settings_name_the_field():
    with pytest.raises(ValueError, match="d_model"):
        Trial(d_model=18)
    with pytest.raises(ValueError, match="context"):
        Trial(context=3)
    with pytest.raises(ValueError, match="steps"):
        Trial(steps=0)
