"""Symbol-sequence tasks: ``reverse``, ``copy`` and ``sort`` over a small alphabet.

A source is ``L`` symbols drawn uniformly (``L`` uniform in ``[min_len, max_len]``); the target is
the source reversed, copied, or sorted. Reversal is the classic stress test of a fixed-context
encoder-decoder: the first target symbol is the last source symbol, the last target symbol the
first, so every source position must survive the squeeze into one vector ``c``.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from attnlab.tasks.base import Example, Task
from attnlab.tasks.tokenizer import CharTokenizer

ALPHABET = string.ascii_lowercase + string.digits


# the longest source a task draws: 10^5 symbols is already far past any model's context here
MAX_SOURCE = 100_000


class SymbolTask(Task):
    """Base of the symbol tasks; ``transform`` maps the source string to the target."""

    def __init__(self, min_len: int = 3, max_len: int = 12, num_symbols: int = 10):
        for name, v in (("min_len", min_len), ("max_len", max_len), ("num_symbols", num_symbols)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if min_len > max_len:
            raise ValueError(f"min_len={min_len} is larger than max_len={max_len}")
        if max_len > MAX_SOURCE:
            raise ValueError(f"max_len must be at most {MAX_SOURCE:,} symbols per source, got {max_len:,}")
        if num_symbols > len(ALPHABET):
            raise ValueError(f"num_symbols must be at most {len(ALPHABET)}, got {num_symbols}")
        self.min_len, self.max_len, self.num_symbols = min_len, max_len, num_symbols
        self.tokenizer = CharTokenizer(ALPHABET[:num_symbols])

    def params(self) -> dict[str, Any]:
        return {"min_len": self.min_len, "max_len": self.max_len, "num_symbols": self.num_symbols}

    @staticmethod
    def transform(src: str) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _draw(self, rng: np.random.Generator) -> Example:
        length = int(rng.integers(self.min_len, self.max_len + 1))
        idx = rng.integers(0, self.num_symbols, size=length)
        src = "".join(ALPHABET[i] for i in idx)
        return Example(src, self.transform(src))


class Reverse(SymbolTask):
    """reverse: output the symbols in reverse order ("abcd" -> "dcba")."""

    name = "reverse"

    @staticmethod
    def transform(src: str) -> str:
        return src[::-1]


class Copy(SymbolTask):
    """copy: output the symbols unchanged ("abcd" -> "abcd")."""

    name = "copy"

    @staticmethod
    def transform(src: str) -> str:
        return src


class Sort(SymbolTask):
    """sort: output the symbols in alphabet order ("dbca" -> "abcd")."""

    name = "sort"

    @staticmethod
    def transform(src: str) -> str:
        return "".join(sorted(src, key=ALPHABET.index))
