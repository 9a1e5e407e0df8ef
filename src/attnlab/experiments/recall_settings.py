"""The settings of the recall experiment (:mod:`attnlab.experiments.recall`), in a module without
torch: ``attnlab experiment recall --help`` shows the presets' sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab._checks import positive_int

KINDS = ("attention", "window", "linear", "ssm")


@dataclass(frozen=True)
class Settings:
    """Everything that decides the numbers: sequence sizes, widths, training, seeds."""

    pairs: tuple[int, ...] = (4, 8, 16)
    widths: tuple[int, ...] = (16, 32, 64)
    kinds: tuple[str, ...] = KINDS
    window: int = 4
    num_keys: int = 32
    num_values: int = 32
    layers: int = 2
    state: int = 16
    steps: int = 1500
    batch_size: int = 64
    lr: float = 3e-3
    eval_size: int = 512
    seed: int = 0

    def __post_init__(self) -> None:
        sizes = ("window", "num_keys", "num_values", "layers", "state", "steps", "batch_size", "eval_size")
        for name in sizes:
            positive_int(name, getattr(self, name))
        for name in ("pairs", "widths"):
            values = getattr(self, name)
            if not values:
                raise ValueError(f"{name} must name at least one size")
            for v in values:
                positive_int(name, v)
        if max(self.pairs) > self.num_keys:
            raise ValueError(
                f"pairs={max(self.pairs)} needs at least as many keys, got num_keys={self.num_keys}"
            )
        bad = [k for k in self.kinds if k not in KINDS]
        if bad or not self.kinds:
            raise ValueError(f"kinds must be a non-empty subset of {list(KINDS)}, got {list(self.kinds)}")


# 16 keys and values, 500 steps of 64 sequences at 3e-3: enough for full attention at d=64 to solve
# 4 and 8 pairs (1.00) on one CPU thread in about 4 minutes for all 16 models; a rate of 1e-2, or
# 400 steps of 32, left it at a third (measured table: docs/concepts/16-beyond-quadratic.md)
QUICK = Settings(
    pairs=(4, 8),
    widths=(16, 64),
    num_keys=16,
    num_values=16,
    state=8,
    steps=500,
    batch_size=64,
    lr=3e-3,
    eval_size=256,
)
