"""The text a GPT learns from: Shakespeare's plays, any UTF-8 file, or standard input, checked and
split into training and held-out text, read in pieces so that a corpus larger than memory streams.

- ``"shakespeare"``: :func:`attnlab.tasks.shakespeare.shakespeare`'s split (four whole plays held out).
- a file path, or ``"-"`` for standard input (copied to a file first, 1 MiB at a time): the last 10%
  of the characters are held out for validation (moved forward to the next line break, so no line
  is cut in two).

A file is read :data:`CHUNK_BYTES` at a time, never whole: one pass checks it and counts its
characters, one finds where the held-out text starts, and :meth:`TextSource.parts` reads it again
for each use (training a BPE tokenizer, writing the token files). A file that is empty, binary (it
holds a NUL byte), or not valid UTF-8 is a ``ValueError`` naming the file and, for the last two, the
byte offset: never a model trained on mojibake.
"""

from __future__ import annotations

import codecs
import io
import shutil
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import BinaryIO

from attnlab.tasks.shakespeare import VALIDATION_PLAYS, shakespeare

SHAKESPEARE = "shakespeare"
STDIN = "-"
HOLDOUT = 0.10  # the share of a file's characters held out for validation
CHUNK_BYTES = 1 << 20  # bytes read at a time
MAX_LINE_BYTES = 1 << 22  # one line of a line-per-record input (4 MiB: far past any model's context)
PIECE_CHARS = 1 << 20  # text is handed on in pieces of about 1M characters, cut after a line break
TRAIN, VAL = "train", "val"


@dataclass(frozen=True)
class TextCorpus:
    """Training and validation text, and where they came from (``source``: ``"shakespeare"``, a
    resolved path or ``"-"``; ``holdout``: how the validation text was chosen, in words)."""

    train: str
    val: str
    source: str
    holdout: str


def decoded(stream: BinaryIO, name: str, chunk: int | None = None) -> Iterator[str]:
    """The text of ``stream``, ``chunk`` bytes at a time (default :data:`CHUNK_BYTES`), checked as it
    is read: a NUL byte (binary) or invalid UTF-8 is a ``ValueError`` naming ``name`` and the byte
    offset. A UTF-8 byte-order mark is dropped; ``\\r\\n`` line ends become ``\\n`` (also across two
    chunks)."""
    chunk = chunk or CHUNK_BYTES
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset, held, first = 0, "", True
    while True:
        data = stream.read(chunk)
        nul = data.find(b"\x00")
        if nul >= 0:
            raise ValueError(f"{name} is a binary file (a NUL byte at offset {offset + nul:,}), not text")
        pending = decoder.getstate()[0]  # bytes of a character the last chunk cut in two
        try:
            text = decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            bad = (pending + data)[exc.start : exc.start + 1]
            at = offset - len(pending) + exc.start
            raise ValueError(
                f"{name} is not valid UTF-8: byte {bad!r} at offset {at:,} ({exc.reason})"
            ) from None
        offset += len(data)
        if first and text:
            text, first = text.removeprefix("\ufeff"), False
        text, held = held + text, ""
        if data and text.endswith("\r"):  # its \n may open the next chunk
            text, held = text[:-1], "\r"
        text = text.replace("\r\n", "\n")
        if text:
            yield text
        if not data:
            return


def read_lines(stream: BinaryIO, name: str, limit: int | None = None) -> Iterator[tuple[int, bytes]]:
    """``(number, line)`` for each line of ``stream`` (numbered from 1, its ``\n`` or ``\r\n``
    removed), read at most ``limit`` bytes at a time (default :data:`MAX_LINE_BYTES`): a longer line
    (an input with no line end, however long, is never read whole) or a NUL byte (a binary input) is
    a ``ValueError`` naming ``name`` and the line. Decoding is the caller's (it names the column)."""
    limit = limit or MAX_LINE_BYTES
    number = 0
    while raw := stream.readline(limit + 2):  # + room for its \r\n
        number += 1
        if b"\0" in raw:
            raise ValueError(f"{name} line {number} holds a NUL byte: a binary file, not text")
        line = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1] if raw.endswith(b"\n") else raw
        if len(line) > limit:
            raise ValueError(
                f"{name} line {number} is longer than {limit:,} bytes, the most one line may hold"
            )
        yield number, line


def decode_text(data: bytes, name: str) -> str:
    """``data`` as text (:func:`decoded`'s checks), or a ``ValueError`` naming ``name`` when it is
    empty or only whitespace."""
    text = "".join(decoded(io.BytesIO(data), name))
    if not text.strip():
        raise ValueError(f"{name} is empty: there is no text to learn from")
    return text


def line_pieces(texts: Iterable[str], size: int | None = None) -> Iterator[str]:
    """``texts`` joined and cut again into pieces of at most ``size`` characters (default
    :data:`PIECE_CHARS`), each ending just after its last line break (when it holds one): BPE
    never merges across a line break."""
    size, buf = size or PIECE_CHARS, ""
    for text in texts:
        buf += text
        while len(buf) >= size:
            newline = buf.rfind("\n", 0, size)
            end = newline + 1 if newline >= 0 else size
            yield buf[:end]
            buf = buf[end:]
    if buf:
        yield buf


def split_tail(text: str, share: float = HOLDOUT) -> tuple[str, str]:
    """``(train, val)``: the last ``share`` of ``text``'s characters as ``val``, its start moved to
    just after the next line break (when there is one in the tail). :class:`TextSource` cuts a file
    in the same place without holding it."""
    cut = _tail_start(len(text), share)
    newline = text.find("\n", max(cut - 1, 0), len(text) - 1)  # cut already at a line start: kept
    if newline >= 0:
        cut = newline + 1
    return text[:cut], text[cut:]


def _tail_start(n: int, share: float) -> int:
    return n - max(1, round(n * share))


@dataclass(frozen=True)
class TextSource:
    """A corpus that can be read again, piece by piece: ``source`` (``"shakespeare"``, a resolved
    path or ``"-"``), ``name`` (for messages), ``path`` (the file read), ``alphabet`` (its distinct
    characters), ``train_chars`` and ``val_chars``, ``holdout`` (how the validation text was chosen,
    in words) and, for Shakespeare (5 MB, not a user's corpus), ``texts``: the two splits in memory."""

    source: str
    name: str
    path: Path | None
    alphabet: frozenset[str]
    train_chars: int
    val_chars: int
    holdout: str
    texts: tuple[str, str] | None = None

    def parts(self) -> Iterator[tuple[str, str]]:
        """``(split, piece)`` in order, ``split`` being ``"train"`` or ``"val"``: every training
        piece, then every held-out one; pieces of at most :data:`PIECE_CHARS` characters, cut after
        a line break where one is near."""
        if self.texts is not None:
            for split, text in zip((TRAIN, VAL), self.texts):
                yield from ((split, piece) for piece in line_pieces([text]))
            return
        yield from _cut(self._read(), self.train_chars)

    def train_pieces(self) -> Iterator[str]:
        """The training text only, piece by piece (what a BPE tokenizer is learnt from)."""
        for split, piece in self.parts():
            if split != TRAIN:
                return
            yield piece

    def _read(self) -> Iterator[str]:
        with open(self.path, "rb") as f:
            yield from decoded(f, self.name)


def _split_at(texts: Iterable[str], cut: int) -> Iterator[tuple[str, str]]:
    """``texts`` as ``("train", text)`` before character ``cut`` and ``("val", text)`` from it on."""
    pos = 0
    for text in texts:
        head = text[: max(cut - pos, 0)]
        if head:
            yield TRAIN, head
        if len(head) < len(text):
            yield VAL, text[len(head) :]
        pos += len(text)


def _cut(texts: Iterable[str], cut: int) -> Iterator[tuple[str, str]]:
    """``(split, piece)``: the text before character ``cut`` and the text after it, each cut into
    :func:`line_pieces` (lazily: nothing is held beyond one piece)."""
    for split, group in groupby(_split_at(texts, cut), key=itemgetter(0)):
        yield from ((split, piece) for piece in line_pieces(text for _, text in group))


def _scan(path: Path, name: str) -> tuple[int, frozenset[str]]:
    """``(characters, distinct characters)`` of the file, read once; empty is a ``ValueError``."""
    n, alphabet, words = 0, set(), False
    with open(path, "rb") as f:
        for text in decoded(f, name):
            n += len(text)
            alphabet.update(text)
            words = words or not text.isspace()
    if not words:
        raise ValueError(f"{name} is empty: there is no text to learn from")
    return n, frozenset(alphabet)


def _held_out_start(path: Path, name: str, n: int, share: float = HOLDOUT) -> int:
    """Where :func:`split_tail` would cut the file's ``n`` characters, found by reading it again."""
    cut, pos = _tail_start(n, share), 0
    with open(path, "rb") as f:
        for text in decoded(f, name):
            lo, hi = max(cut - 1 - pos, 0), min(n - 1 - pos, len(text))
            newline = text.find("\n", lo, hi) if lo < hi else -1
            if newline >= 0:
                return pos + newline + 1
            pos += len(text)
            if pos >= n - 1:
                break
    return cut


def spool_stdin(folder: Path) -> Path:
    """Standard input copied to ``folder/stdin.txt``, 1 MiB at a time (it can be read only once)."""
    path = Path(folder) / "stdin.txt"
    with open(path, "wb") as f:
        shutil.copyfileobj(sys.stdin.buffer, f, CHUNK_BYTES)
    return path


def open_source(source: str, spool: Path | None = None) -> TextSource:
    """The :class:`TextSource` of ``source``: ``"shakespeare"``, a file path or ``"-"`` (standard
    input, copied into the folder ``spool``). Every check of the text runs here (one pass)."""
    if source == SHAKESPEARE:
        train, val = shakespeare(TRAIN), shakespeare(VAL)
        held = f"4 whole plays held out ({', '.join(VALIDATION_PLAYS)})"
        alphabet = frozenset(train + val)
        return TextSource(source, source, None, alphabet, len(train), len(val), held, (train, val))
    if source == STDIN:
        if spool is None:
            raise ValueError("standard input is read into a file first: give a folder to hold it")
        path, name = spool_stdin(spool), "standard input"
    else:
        path, name = Path(source), source
        if not path.is_file():
            what = "a folder, not a file" if path.is_dir() else "no such file"
            raise ValueError(f"source={source}: {what} (give a file, - for stdin, or {SHAKESPEARE})")
    n, alphabet = _scan(path, name)
    cut = _held_out_start(path, name, n)
    held = f"the last {(n - cut) / n:.0%} of the text held out ({n - cut:,} characters)"
    where = STDIN if source == STDIN else str(path.resolve())
    return TextSource(where, name, path, alphabet, cut, n - cut, held)


def read_corpus(source: str) -> TextCorpus:
    """The whole corpus of ``source`` in memory (for small texts: experiments, tests); training
    reads it piece by piece through :func:`open_source`."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="attnlab-stdin-") as tmp:
        src = open_source(source, Path(tmp))
        texts: dict[str, list[str]] = {TRAIN: [], VAL: []}
        for split, piece in src.parts():
            texts[split].append(piece)
    return TextCorpus("".join(texts[TRAIN]), "".join(texts[VAL]), src.source, src.holdout)
