"""Learner files that try to pass without being right: they monkeypatch NumPy or builtins (in their
own process: the grader compares in its own), or return objects whose ``__array__``, ``__eq__`` or
NumPy protocol methods lie (only the numbers the object turns into cross to the grader). Each is a
real file graded by the real grader; each test asserts which checks fail and why."""

from __future__ import annotations

import pytest

from attnlab.practice.cases import attention_checks
from attnlab.practice.grade import grade_attention

N_CHECKS = {f: sum(c.function == f for c in attention_checks()) for f in ("softmax", "causal_mask")}

# at import: every comparison a grader might make says "equal", abs and all say "close enough"
PATCHES = """
import builtins

import numpy as np

np.allclose = np.array_equal = lambda *args, **kwargs: True
np.isclose = lambda a, b, *args, **kwargs: np.ones(np.broadcast(a, b).shape, dtype=bool)
np.testing.assert_allclose = np.testing.assert_array_equal = lambda *args, **kwargs: None
builtins.abs = lambda x: 0.0
builtins.all = lambda it: True
np.ndarray.__module__  # the type itself cannot be patched: setattr(np.ndarray, ...) raises TypeError
"""

WRONG = {
    "softmax": "def softmax(x, axis=-1):\n    return np.ones_like(x) / x.shape[axis]",
    "causal_mask": "def causal_mask(t_q, t_k):\n    return np.ones((t_q, t_k), dtype=bool)",
}


def _failed(report, function: str, needle: str) -> None:
    rows = [r for r in report.results if r.function == function]
    assert rows and all(not r.passed and needle in r.message for r in rows), [r.message for r in rows]


def test_monkeypatching_numpy_and_builtins_passes_nothing_wrong(learner_file):
    path = learner_file(learner_file.overriding(WRONG, PATCHES))
    report = grade_attention(str(path), timeout_s=5.0)
    _failed(report, "softmax", "differs from")
    _failed(report, "causal_mask", "differs from")
    assert report.score == report.total - sum(N_CHECKS.values())


LIARS = """

class _Equal:
    '''Equal to everything, and NumPy's idea of it is zeros of the right shape.'''

    def __init__(self, shape):
        self.shape = shape

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __array__(self, dtype=None, copy=None):
        return np.zeros(self.shape)


class _Agreeable(np.ndarray):
    '''An array whose comparisons, ufuncs and NumPy functions all answer "True".'''

    def __eq__(self, other):
        return np.ones(np.shape(other), dtype=bool)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return True

    def __array_function__(self, func, types, args, kwargs):
        return True
"""

LYING = {
    "softmax": "def softmax(x, axis=-1):\n    return _Equal(np.shape(x))",
    "causal_mask": "def causal_mask(t_q, t_k):\n    return np.ones((t_q, t_k), dtype=bool).view(_Agreeable)",
    "split_heads": "def split_heads(x, num_heads):\n    class _Fails:\n"
    "        def __array__(self, dtype=None, copy=None):\n            raise ValueError('no numbers here')\n"
    "    return _Fails()",
}


def test_objects_whose_array_or_eq_lie_are_judged_by_their_numbers(learner_file):
    path = learner_file(learner_file.overriding(LYING, LIARS))
    report = grade_attention(str(path), timeout_s=5.0)
    _failed(report, "softmax", "differs from")  # its zeros, whatever __eq__ says
    _failed(report, "causal_mask", "differs from")  # all True: the plain array behind the view
    _failed(report, "split_heads", "ValueError: no numbers here")
    n_split = sum(c.function == "split_heads" for c in attention_checks())
    assert report.score == report.total - sum(N_CHECKS.values()) - n_split


@pytest.mark.parametrize("value", ["np.array([object()])", "{'out': 1}", "np.zeros(3).view([('a', '<f8')])"])
def test_non_numbers_are_refused_by_kind(learner_file, value):
    path = learner_file(learner_file.overriding({"softmax": f"def softmax(x, axis=-1):\n    return {value}"}))
    report = grade_attention(str(path), timeout_s=5.0)
    _failed(report, "softmax", "not an array of numbers")
    assert report.score == report.total - N_CHECKS["softmax"]
