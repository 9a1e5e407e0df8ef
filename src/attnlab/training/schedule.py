"""Learning-rate schedules, each a pure function of the step (so resuming needs only the step).

- ``cosine``: linear warm-up to ``lr`` over ``warmup`` steps, then cosine decay to ``min_ratio * lr``
  at ``total`` steps: ``lr_s = lr_min + (lr - lr_min) * (1 + cos(pi * p)) / 2``, ``p = (s - warmup) /
  (total - warmup)``.
- ``noam`` (Vaswani et al. 2017, eq. 3): ``lr_s = factor * d_model^-0.5 * min(s^-0.5, s * warmup^-1.5)``
  with ``s`` counted from 1; here ``lr`` plays the role of ``factor``.
- ``constant``: ``lr`` throughout (after the warm-up).
"""

from __future__ import annotations

import math

from attnlab.names import SCHEDULES


def learning_rate(
    step: int,
    *,
    schedule: str,
    lr: float,
    warmup: int,
    total: int,
    d_model: int = 512,
    min_ratio: float = 0.1,
) -> float:
    """The learning rate for 0-based optimisation step ``step``."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {list(SCHEDULES)}, got {schedule!r}")
    s = step + 1
    if schedule == "noam":
        return lr * d_model**-0.5 * min(s**-0.5, s * max(warmup, 1) ** -1.5)
    if warmup > 0 and s <= warmup:
        return lr * s / warmup
    if schedule == "constant":
        return lr
    p = min(1.0, (s - warmup) / max(1, total - warmup))
    lo = min_ratio * lr
    return lo + (lr - lo) * 0.5 * (1.0 + math.cos(math.pi * p))
