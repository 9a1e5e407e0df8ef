"""What every built-in task shares: examples, deterministic splits and seeded sampling.

A source string belongs to exactly one split, decided by a stable hash of the string
(80 % train, 10 % validation, 10 % test), so the splits can never overlap whatever the seed,
the length range or the number of examples drawn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnlab.names import SPLITS
from attnlab.tasks.tokenizer import CharTokenizer

_SPLIT_BOUNDS = {"train": (0, 80), "validation": (80, 90), "test": (90, 100)}


@dataclass(frozen=True)
class Example:
    """One input/output pair as text: ``src`` -> ``tgt``."""

    src: str
    tgt: str


def split_of(src: str) -> str:
    """The split that owns source string ``src`` (a stable hash bucket, independent of any seed)."""
    bucket = int.from_bytes(hashlib.blake2b(src.encode(), digest_size=8).digest(), "little") % 100
    for name, (lo, hi) in _SPLIT_BOUNDS.items():
        if lo <= bucket < hi:
            return name
    raise AssertionError(bucket)  # pragma: no cover


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {list(SPLITS)}, got {split!r}")


class Task:
    """A generated sequence-to-sequence task. Subclasses set ``name``, ``tokenizer`` and
    implement ``_draw(rng) -> Example`` (one candidate, any split) and ``params()``."""

    name: str = ""
    tokenizer: CharTokenizer

    def _draw(self, rng: np.random.Generator) -> Example:  # pragma: no cover - abstract
        raise NotImplementedError

    def params(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def max_target_len(self, src: str) -> int:
        """Longest target this task can produce for ``src`` (bounds decoding)."""
        return len(src)

    def describe(self) -> str:
        return self.__doc__.strip().splitlines()[0] if self.__doc__ else self.name

    def sample(
        self, split: str, n: int, seed: int = 0, *, max_tries_per_example: int = 1000
    ) -> list[Example]:
        """Draw ``n`` examples of ``split`` (repeats possible when the space is small), seeded.

        Candidates are drawn from the task's distribution and kept when their source falls in
        ``split``; the same ``(split, n, seed)`` always gives the same list. For large ``n`` use
        :meth:`iter_sample`, which yields the same examples one at a time in bounded memory.
        """
        return list(self.iter_sample(split, n, seed, max_tries_per_example=max_tries_per_example))

    def iter_sample(
        self, split: str, n: int, seed: int = 0, *, max_tries_per_example: int = 1000
    ) -> Iterator[Example]:
        """The examples of :meth:`sample`, one at a time (``attnlab tasks show --n 10**9`` streams)."""
        check_split(split)  # checked now, not at the first draw
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise ValueError(f"seed must be an integer in 0..2^63-1, got {seed!r}")
        return self._draws(split, n, seed, max_tries_per_example)

    def _draws(self, split: str, n: int, seed: int, max_tries_per_example: int) -> Iterator[Example]:
        # the split name is part of the seed so the three splits draw independent streams
        rng = np.random.default_rng([int(seed), SPLITS.index(split), 0x7A5C])
        found = tries = 0
        while found < n:
            ex = self._draw(rng)
            tries += 1
            if split_of(ex.src) == split:
                found += 1
                yield ex
            elif tries > max_tries_per_example * (found + 1):
                raise ValueError(
                    f"task {self.name!r} with {self.params()} has too few distinct sources "
                    f"to fill the {split!r} split (found {found} of {n})"
                )

    def spec(self) -> dict[str, Any]:
        """``{"name", "params"}``: enough to rebuild the task with :func:`attnlab.tasks.get_task`."""
        return {"name": self.name, "params": self.params()}
