"""The one rule every experiment's verdict follows, stated before any result is read.

A claim is tested by a measured difference ``d`` whose sign the claim predicts (``claimed = +1``: the
claim says ``d > 0``; ``-1``: ``d < 0``). Its 95% interval ``[lo, hi]`` comes from paired
per-item differences (:func:`mean_interval`: mean ± t standard errors, Student's t with n - 1 degrees
of freedom, so 3 seeds or 5 random orders get the wide interval they deserve) or
from resampling the items (:func:`bootstrap_interval`, percentiles). Then :func:`decide`:

- ``"model too weak"`` when the model failed its competence gate (an n-gram table, chance or a
  position-only rule beat it, or came within the stated margin): nothing is concluded;
- ``"agrees"`` when the interval lies wholly on the claimed side of zero;
- ``"disagrees"`` when it lies wholly on the other side;
- ``"inconclusive"`` otherwise: a difference the data cannot tell from zero proves neither way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

AGREES, DISAGREES, INCONCLUSIVE, TOO_WEAK = "agrees", "disagrees", "inconclusive", "model too weak"
Z95 = 1.96  # the two-sided 95% point of the normal distribution (Student's t for df > 30)
# the two-sided 95% points of Student's t by degrees of freedom (statistical tables)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
T95 |= {11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093}
T95 |= {20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048}
T95 |= {29: 2.045, 30: 2.042}


def t95(df: int) -> float:
    """The two-sided 95% point of Student's t with ``df`` degrees of freedom (1.96 beyond 30)."""
    return T95.get(df, Z95)


def mean_interval(diffs: Sequence[float]) -> tuple[float, float, float]:
    """``(mean, lo, hi)`` of paired differences ``diffs [n]``: mean ± t95(n - 1) standard errors
    (sample standard deviation / √n). One item has no spread: ``(mean, -inf, inf)``."""
    d = np.asarray(diffs, dtype=float)
    if d.size == 0:
        raise ValueError("diffs is empty: no paired difference to estimate")
    mean = float(d.mean())
    if d.size < 2:
        return mean, -math.inf, math.inf
    half = t95(d.size - 1) * float(d.std(ddof=1)) / math.sqrt(d.size)
    return mean, mean - half, mean + half


def bootstrap_interval(
    statistic: Callable[[np.ndarray], float], n: int, resamples: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of ``statistic(idx)`` over ``resamples`` draws of ``n``
    item indices ``idx [n]`` with replacement (one fixed ``seed``: the same interval every run)."""
    if n < 1:
        raise ValueError(f"n must be a positive number of items, got {n}")
    rng = np.random.default_rng(seed)
    values = [statistic(rng.integers(0, n, n)) for _ in range(resamples)]
    lo, hi = np.percentile(values, [2.5, 97.5])
    return float(lo), float(hi)


def decide(lo: float, hi: float, claimed: int, competent: bool = True) -> str:
    """The verdict (module doc) for a 95% interval ``[lo, hi]`` of a difference whose sign the claim
    predicts to be ``claimed`` (+1 or -1), on a model that passed (``competent``) or failed its gate."""
    if claimed not in (1, -1):
        raise ValueError(f"claimed must be +1 or -1, got {claimed!r}")
    if not competent:
        return TOO_WEAK
    if claimed * lo > 0 and claimed * hi > 0:
        return AGREES
    if claimed * lo < 0 and claimed * hi < 0:
        return DISAGREES
    return INCONCLUSIVE
