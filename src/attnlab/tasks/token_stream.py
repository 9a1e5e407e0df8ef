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


class TokenWriter:
    """Token ids appended to ``path`` piece by piece, written under a temporary name and renamed when
    the ``with`` block ends without an error (an interrupted or failed write leaves no file).

    Args:
        path: the token file. vocab_size: ids lie in ``[0, vocab_size)`` (decides the dtype).
    """

    def __init__(self, path: str | Path, vocab_size: int):
        self.path, self.vocab_size = Path(path), vocab_size
        self.dtype = id_dtype(vocab_size)
        self.tmp = self.path.with_name(self.path.name + ".partial")
        self.count = 0

    def __enter__(self) -> TokenWriter:
        self.file = open(self.tmp, "wb")
        return self

    def add(self, ids) -> None:
        """Append ``ids [n]``; an id outside ``[0, vocab_size)`` is a ``ValueError``."""
        ids = np.asarray(ids, dtype=np.int64)  # [n]
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(f"token id {int(ids.max())} is outside the vocabulary of {self.vocab_size}")
        self.file.write(ids.astype(self.dtype).tobytes())
        self.count += int(ids.size)

    def __exit__(self, kind, exc, tb) -> None:
        if kind is None:
            self.file.flush()
            os.fsync(self.file.fileno())
        self.file.close()
        if kind is None:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)


def write_tokens(
    pieces: Iterable[str], encode: Callable[[str], list[int]], path: str | Path, vocab_size: int
) -> int:
    """Tokenize ``pieces`` of text one at a time and append their ids to ``path`` (a
    :class:`TokenWriter`). Returns the number of tokens written; an id outside ``[0, vocab_size)`` is
    a ``ValueError``."""
    with TokenWriter(path, vocab_size) as out:
        for piece in pieces:
            out.add(encode(piece))
    return out.count


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
