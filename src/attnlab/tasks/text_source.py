"""The text a GPT learns from: Shakespeare's plays, any UTF-8 file, or standard input, checked and
split into training and held-out text.

- ``"shakespeare"``: :func:`attnlab.tasks.shakespeare.shakespeare`'s split (four whole plays held out).
- a file path, or ``"-"`` for standard input: the last 10% of the characters are held out for
  validation (moved forward to the next line break, so no line is cut in two).

A file that is empty, binary (it holds a NUL byte), or not valid UTF-8 is a ``ValueError`` naming the
file and, for bad UTF-8, the byte offset: never a model trained on mojibake.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from attnlab.tasks.shakespeare import VALIDATION_PLAYS, shakespeare

SHAKESPEARE = "shakespeare"
STDIN = "-"
HOLDOUT = 0.10  # the share of a file's characters held out for validation


@dataclass(frozen=True)
class TextCorpus:
    """Training and validation text, and where they came from (``source``: ``"shakespeare"``, a
    resolved path or ``"-"``; ``holdout``: how the validation text was chosen, in words)."""

    train: str
    val: str
    source: str
    holdout: str


def decode_text(data: bytes, name: str) -> str:
    """``data`` as text, or a ``ValueError`` naming ``name``: empty, binary (a NUL byte) or invalid
    UTF-8 (with the offset of the first bad byte). A UTF-8 byte-order mark is dropped; ``\\r\\n``
    line ends become ``\\n``."""
    if not data.strip():
        raise ValueError(f"{name} is empty: there is no text to learn from")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ValueError(f"{name} is a binary file (a NUL byte at offset {nul:,}), not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 4]
        raise ValueError(
            f"{name} is not valid UTF-8: byte {bad[:1]!r} at offset {exc.start:,} ({exc.reason})"
        ) from None
    return text.removeprefix("\ufeff").replace("\r\n", "\n")


def split_tail(text: str, share: float = HOLDOUT) -> tuple[str, str]:
    """``(train, val)``: the last ``share`` of ``text``'s characters as ``val``, its start moved to
    just after the next line break (when there is one in the tail)."""
    cut = len(text) - max(1, round(len(text) * share))
    newline = text.find("\n", max(cut - 1, 0), len(text) - 1)  # cut already at a line start: kept
    if newline >= 0:
        cut = newline + 1
    return text[:cut], text[cut:]


def read_corpus(source: str) -> TextCorpus:
    """The corpus of ``source``: ``"shakespeare"``, a file path or ``"-"`` (standard input)."""
    if source == SHAKESPEARE:
        plays = ", ".join(VALIDATION_PLAYS)
        return TextCorpus(
            shakespeare("train"), shakespeare("val"), source, f"4 whole plays held out ({plays})"
        )
    if source == STDIN:
        data, name, where = sys.stdin.buffer.read(), "standard input", STDIN
    else:
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"--text {source}: no such file (give a file, - for stdin, or {SHAKESPEARE})")
        data, name, where = path.read_bytes(), str(path), str(path.resolve())
    train, val = split_tail(decode_text(data, name))
    share = len(val) / (len(train) + len(val))
    return TextCorpus(
        train, val, where, f"the last {share:.0%} of the text held out ({len(val):,} characters)"
    )
