"""Grade the learner's attention file: run every check in the sandbox, compare, name the mistake.

A failed check is diagnosed by running each known mistake (:mod:`attnlab.practice.mistakes`) on the
same inputs: the mistake whose output the learner's output matches is named. When none matches,
the message says what is off (shape, NaN, rows that do not sum to 1, the largest difference).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from attnlab.practice.cases import Check, attention_checks
from attnlab.practice.mistakes import MISTAKES
from attnlab.practice.sandbox import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, Sandbox
from attnlab.practice.starter import check_file


@dataclass
class Result:
    """One check's verdict: ``mistake`` is a key of :data:`MISTAKES` (or None), ``message`` one line."""

    id: str
    function: str
    title: str
    passed: bool
    message: str = ""
    mistake: str | None = None
    max_error: float | None = None


@dataclass
class Report:
    """Every check's :class:`Result`, in order; ``score`` = checks passed."""

    file: str
    results: list[Result]

    @property
    def score(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def total(self) -> int:
        return len(self.results)

    def to_json(self) -> dict:
        return {
            "file": self.file,
            "score": self.score,
            "total": self.total,
            "passed": self.score == self.total,
            "checks": [asdict(r) for r in self.results],
        }


def _parts(value) -> list:
    return list(value) if isinstance(value, tuple) else [value]


def _close(got, want, tol: tuple[float, float]) -> bool:
    """Same structure, shapes and numbers (NaN where the other has NaN) within ``tol``."""
    g, w = _parts(got), _parts(want)
    if isinstance(got, tuple) != isinstance(want, tuple) or len(g) != len(w):
        return False
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or _wrong_dtype(a, b):
            return False
        if b.dtype == bool:
            if not np.array_equal(a, b):
                return False
        elif not np.allclose(
            a.astype(np.float64), b.astype(np.float64), atol=tol[0], rtol=tol[1], equal_nan=True
        ):
            return False
    return True


def _wrong_dtype(a: np.ndarray, b: np.ndarray) -> str | None:
    """Why ``a`` cannot stand for ``b``: a mask must be bool (not 0/1 numbers), numbers must be real
    floating point (a complex or integer array is not an answer, whatever its values)."""
    if b.dtype == bool:
        return None if a.dtype == bool else f"is {a.dtype}, expected a bool mask (True = may attend)"
    if a.dtype.kind != "f":
        return f"is {a.dtype}, expected real floating-point numbers (float32 or float64)"
    return None


def _shape(a) -> str:
    return "[" + ", ".join(map(str, np.shape(a))) + "]"


def _what_is_off(check: Check, got) -> tuple[str, float | None]:
    """The first way ``got`` differs from the expected value, in words, and the largest difference."""
    want = check.expected
    names = ("out", "weights") if isinstance(want, tuple) else ("the result",)
    if isinstance(want, tuple) and not isinstance(got, tuple):
        return "returned one array; return the pair (out, weights)", None
    if not isinstance(want, tuple) and isinstance(got, tuple):
        return f"returned a tuple of {len(got)}; return one array", None
    if isinstance(want, tuple) and len(got) != len(want):
        return f"returned {len(got)} values; return (out, weights)", None
    worst = 0.0
    for name, a, b in zip(names, _parts(got), _parts(want)):
        a = np.asarray(a)
        if a.shape != b.shape:
            return f"{name} has shape {_shape(a)}, expected {_shape(b)}", None
        wrong = _wrong_dtype(a, b)
        if wrong is not None:
            return f"{name} {wrong}", None
        if a.dtype.kind in "fc" and not np.all(np.isfinite(a)):
            return f"{name} contains NaN or inf (overflow?)", None
        worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0)))
    if isinstance(want, tuple):
        rows = np.asarray(got[1], dtype=np.float64).sum(-1)
        if not np.allclose(rows, 1.0, atol=1e-4):
            return (
                f"the rows of the weights do not sum to 1 over the keys "
                f"(sums {rows.min():.3g}..{rows.max():.3g})",
                worst,
            )
    return f"differs from {check.oracle} by up to {worst:.3g}", worst


def diagnose(check: Check, got) -> str | None:
    """The key of the first known mistake whose output on ``check``'s inputs equals ``got``."""
    for m in MISTAKES:
        fn: Callable = getattr(m.solution(), check.function)
        try:
            with np.errstate(all="ignore"):
                theirs = fn(*check.args, **check.kwargs)
        except Exception:  # the mistake cannot even run on these inputs
            continue
        if _close(theirs, check.expected, check.tol):
            continue  # this mistake gives the right answer here: it cannot be told apart
        if _close(got, theirs, check.tol):
            return m.key
    return None


def grade_attention(
    path: str,
    *,
    seed: int = 0,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    progress: Callable[[Result], None] | None = None,
) -> Report:
    """Check the six functions of the learner's file ``path`` (see :mod:`attnlab.practice.starter`).

    ``ValueError`` (one line) for a file that is missing, not Python, lacks a function or has the
    wrong signature; everything the learner's code does when run (exceptions, ``sys.exit``,
    ``os._exit``, a crash, a hang past ``timeout_s``, more than ``memory_mb`` MiB) fails the check.
    ``progress`` is called with each :class:`Result` as it is decided.
    """
    check_file(path)
    explain = {m.key: m.explanation for m in MISTAKES}
    results = []
    with Sandbox(path, timeout_s=timeout_s, memory_mb=memory_mb) as box:
        for check in attention_checks(seed):
            outcome = box.call(check.function, *check.args, **check.kwargs)
            if outcome.error is not None:
                result = Result(check.id, check.function, check.title, False, outcome.error)
            elif _close(outcome.value, check.expected, check.tol):
                result = Result(check.id, check.function, check.title, True)
            else:
                message, err = _what_is_off(check, outcome.value)
                key = diagnose(check, outcome.value)
                if key is not None:
                    message = f"likely mistake: {explain[key]} ({message})"
                result = Result(check.id, check.function, check.title, False, message, key, err)
            results.append(result)
            if progress is not None:
                progress(result)
    return Report(str(path), results)
