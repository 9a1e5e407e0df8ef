"""The n-gram baselines against values computed by hand on a tiny text, the competence gate, and the
verdict rule every experiment follows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlab.experiments import verdicts
from attnlab.experiments.baselines import gate, ngram_loss, ngram_losses

# train 0 1 0 1 0 2, held out 0 1 0 2 (V = 3): scored at positions 2 and 3, tokens 0 and 2
TRAIN, HELD_OUT = [0, 1, 0, 1, 0, 2], [0, 1, 0, 2]


def test_ngram_losses_by_hand():
    # unigram: c(0) = 3, c(2) = 1 of 6: p = 4/9 and 2/9 (add-one over V = 3)
    assert ngram_loss(TRAIN, HELD_OUT, 1, 3) == pytest.approx(-(math.log(4 / 9) + math.log(2 / 9)) / 2)
    # bigram: 0 after 1: c(1 0) = 2, c(1 .) = 2 -> 3/5; 2 after 0: c(0 2) = 1, c(0 .) = 3 -> 2/6
    assert ngram_loss(TRAIN, HELD_OUT, 2, 3) == pytest.approx(-(math.log(3 / 5) + math.log(2 / 6)) / 2)
    # trigram: 0 after 0 1: c = 2 of c(0 1 .) = 2 -> 3/5; 2 after 1 0: c = 1 of c(1 0 .) = 2 -> 2/5
    assert ngram_loss(TRAIN, HELD_OUT, 3, 3) == pytest.approx(-(math.log(3 / 5) + math.log(2 / 5)) / 2)
    assert list(ngram_losses(TRAIN, HELD_OUT, 3)) == ["unigram", "bigram", "trigram"]


def test_an_unseen_history_is_uniform_and_bad_input_is_named():
    # history 2 never seen in train: (0 + 1) / (0 + V)
    assert ngram_loss([0, 1, 0, 1], [1, 2, 2], 2, 4) == pytest.approx(math.log(4))
    with pytest.raises(ValueError, match="held_out"):
        ngram_loss(TRAIN, [0, 1, 5], 2, 3)
    with pytest.raises(ValueError, match="n must be"):
        ngram_loss(TRAIN, HELD_OUT, 4, 3)


def test_the_gate_needs_the_margin():
    tables = {"unigram": 3.0, "bigram": 2.5, "trigram": 2.2}
    assert gate(2.05, tables)["passed"] and gate(2.05, tables)["best"] == "trigram"
    assert not gate(2.15, tables)["passed"]  # better than the table, but by less than 0.1


def test_decide_and_the_intervals():
    assert verdicts.decide(0.1, 0.3, +1) == verdicts.AGREES
    assert verdicts.decide(0.1, 0.3, -1) == verdicts.DISAGREES
    assert verdicts.decide(-0.1, 0.3, +1) == verdicts.INCONCLUSIVE
    assert verdicts.decide(0.1, 0.3, +1, competent=False) == verdicts.TOO_WEAK
    mean, lo, hi = verdicts.mean_interval([1.0, 2.0, 3.0, 4.0])
    # 4 items: Student's t with 3 degrees of freedom (3.182), not the normal 1.96
    assert mean == 2.5 and hi - mean == pytest.approx(3.182 * np.std([1, 2, 3, 4], ddof=1) / 2)
    big = np.arange(200.0) % 7  # beyond 30 degrees of freedom t is the normal point
    assert verdicts.mean_interval(big)[2] - big.mean() == pytest.approx(1.96 * big.std(ddof=1) / np.sqrt(200))
    assert verdicts.mean_interval([1.0])[1] == -math.inf
    values = np.arange(100.0)
    lo, hi = verdicts.bootstrap_interval(lambda idx: float(values[idx].mean()), 100)
    assert lo < 49.5 < hi and hi - lo == pytest.approx(2 * 1.96 * values.std() / 10, rel=0.15)
