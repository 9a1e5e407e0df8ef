"""The attention grader: a correct solution passes every check; each seeded mistake fails with its
diagnosis; the checks' expected values come from torch SDPA and attnlab.ref (oracles), and every
known mistake is told apart from the right answer on at least one check."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from attnlab.practice.cases import attention_checks
from attnlab.practice.grade import _close, diagnose, grade_attention
from attnlab.practice.mistakes import MISTAKES, Baseline, get_mistake

SEEDED = [
    "softmax-over-queries",
    "no-scale",
    "scale-by-d_k",
    "mask-after-softmax",
    "finite-mask",
    "mask-inverted",
    "causal-upper-left",
    "causal-strict",
    "split-without-transpose",
    "merge-without-transpose",
    "wo-on-the-left",
    "unstable-softmax",
    "keys-not-values",
    "projections-transposed",
]


def test_seeded_list_is_the_fixtures(learner_file):
    assert set(SEEDED) == set(learner_file.SEEDED) and len(SEEDED) >= 10


def test_correct_solution_passes_every_check(learner_file):
    report = grade_attention(str(learner_file()))
    assert report.total == len(attention_checks()) >= 20
    assert [r.id for r in report.results if not r.passed] == []


def test_worked_cases_hold_the_notes_numbers():
    checks = {c.id: c for c in attention_checks()}
    np.testing.assert_allclose(checks["softmax-worked"].expected, [0.881, 0.119], atol=5e-4)
    out, w = checks["sdpa-worked-scale"].expected
    np.testing.assert_allclose(w[0, 0], [0.731, 0.269], atol=5e-4)  # raw [8, 0] / sqrt(64)
    np.testing.assert_allclose(checks["sdpa-worked-values"].expected[0][0, 0], [0.5, 1.0], atol=1e-12)
    np.testing.assert_allclose(
        checks["sdpa-worked-identity"].expected[1][0], [[0.670, 0.330], [0.330, 0.670]], atol=5e-4
    )
    np.testing.assert_array_equal(checks["merge-worked"].expected[0, 0], [1, 2, 3, 4])
    # the unscaled value the notes contrast it with: softmax([8, 0]) = [0.9997, 0.0003]
    _, w_noscale = (
        MISTAKES[[m.key for m in MISTAKES].index("no-scale")]
        .solution()
        .scaled_dot_product_attention(*checks["sdpa-worked-scale"].args)
    )
    np.testing.assert_allclose(w_noscale[0, 0], [0.9997, 0.0003], atol=5e-5)


def test_baseline_agrees_with_the_oracles_and_every_mistake_is_detectable():
    """The in-process baseline equals torch SDPA / attnlab.ref on every check; each mistake differs on
    at least one, and on each check it fails, diagnose() names that mistake (or one with the same output)."""
    checks = attention_checks()
    base = Baseline()
    for c in checks:
        assert _close(getattr(base, c.function)(*c.args, **c.kwargs), c.expected, c.tol), c.id
    for m in MISTAKES:
        failed = 0
        for c in checks:
            try:
                with np.errstate(all="ignore"):
                    got = getattr(m.solution(), c.function)(*c.args, **c.kwargs)
            except Exception:
                continue
            if _close(got, c.expected, c.tol):
                continue
            failed += 1
            named = diagnose(c, got)
            twin = next(x for x in MISTAKES if x.key == named)
            with np.errstate(all="ignore"):
                assert _close(getattr(twin.solution(), c.function)(*c.args, **c.kwargs), got, c.tol), (
                    m.key,
                    c.id,
                )
        assert failed, f"{m.key} passes every check"


@pytest.mark.slow
@pytest.mark.parametrize("key", SEEDED)
def test_seeded_mistake_fails_with_its_diagnosis(learner_file, key):
    report = grade_attention(str(learner_file(mistake=key)))
    failed = [r for r in report.results if not r.passed]
    assert failed, key
    named = Counter(r.mistake for r in failed)
    assert named.most_common(1)[0][0] == key, (key, named)
    explanation = get_mistake(key).explanation
    assert all(explanation in r.message for r in failed if r.mistake == key)
