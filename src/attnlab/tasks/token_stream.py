"""A corpus's token ids written once to a memory-mapped file, and random context windows drawn from it.

As nanoGPT's ``train.bin``: the text is tokenized once, in pieces, into a flat array of ids on disk
(``uint16`` when the vocabulary fits, else ``uint32``); training maps the file and reads only the
windows it draws, so a corpus of gigabytes trains without being loaded into memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import torch

from attnlab._checks import positive_int


def id_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype that holds ids ``0 .. vocab_size - 1``."""
    vocab_size = positive_int("vocab_size", vocab_size)
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


def write_tokens(
    pieces: Iterable[str], encode: Callable[[str], list[int]], path: str | Path, vocab_size: int
) -> int:
    """Tokenize ``pieces`` of text one at a time and append their ids to ``path`` (written under a
    temporary name and renamed when complete, so an interrupted write leaves no half file).
    Returns the number of tokens written; an id outside ``[0, vocab_size)`` is a ``ValueError``."""
    path = Path(path)
    dtype = id_dtype(vocab_size)
    tmp = path.with_name(path.name + ".partial")
    total = 0
    with open(tmp, "wb") as f:
        for piece in pieces:
            ids = np.asarray(encode(piece), dtype=np.int64)  # [n]
            if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
                raise ValueError(f"token id {int(ids.max())} is outside the vocabulary of {vocab_size}")
            f.write(ids.astype(dtype).tobytes())
            total += int(ids.size)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return total


class TokenStream:
    """The ids of one token file ``[N]``, memory-mapped read-only.

    Args:
        path: a file written by :func:`write_tokens`.
        vocab_size: the vocabulary it was written with (decides the dtype).
    """

    def __init__(self, path: str | Path, vocab_size: int):
        self.path = Path(path)
        dtype = id_dtype(vocab_size)
        size = self.path.stat().st_size
        if size % dtype.itemsize:
            raise ValueError(f"{self.path} holds {size} bytes, not a whole number of {dtype} ids")
        self.ids = np.memmap(self.path, dtype=dtype, mode="r") if size else np.zeros(0, dtype)  # [N]

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def windows(self, batch: int, context: int, generator: np.random.Generator):
        """``batch`` random windows: ``(x [batch, context], y [batch, context])`` LongTensors, ``y``
        being ``x`` shifted by one token (the next token at each position). Starts are uniform over
        the file; only the windows are read from disk."""
        batch, context = positive_int("batch", batch), positive_int("context", context)
        if len(self) < context + 1:
            raise ValueError(
                f"{self.path.name} holds {len(self)} tokens, fewer than one context of {context} + 1"
            )
        starts = generator.integers(0, len(self) - context, size=batch)  # [batch]
        rows = np.stack([self.ids[s : s + context + 1] for s in starts]).astype(np.int64)  # [batch, C+1]
        block = torch.from_numpy(rows)
        return block[:, :-1], block[:, 1:]
