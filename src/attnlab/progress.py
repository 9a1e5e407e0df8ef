"""Progress that suits where it goes: a bar on a terminal, a plain line every few seconds elsewhere.

A redrawn tqdm bar is right on a terminal and wrong in a file, a CI log or a notebook's captured
output (every redraw becomes a line: a 600-step training run wrote 108 KB). :func:`progress` looks
at the stream it writes to (stderr) and returns

- a tqdm bar when the stream is a TTY;
- a :class:`PlainProgress` otherwise: one line ``desc: 120/600 step (20%) 41.3 step/s, 3 s`` at most
  every ``every_s`` seconds, and one at the end;
- a silent one with ``quiet=True``.

``ATTNLAB_PROGRESS=bar|plain|off`` overrides the choice (tests use ``plain``). Every kind has the
same small interface: iterate it, ``update(n)``, ``set_postfix_str(s)``, ``write(line)``, ``close()``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TextIO

MODES = ("bar", "plain", "off")


def progress_mode(stream: TextIO | None = None, quiet: bool = False) -> str:
    """``"off"`` if quiet, else ``$ATTNLAB_PROGRESS`` if set, else ``"bar"`` on a TTY and ``"plain"``."""
    if quiet:
        return "off"
    forced = os.environ.get("ATTNLAB_PROGRESS", "").strip().lower()
    if forced in MODES:
        return forced
    stream = sys.stderr if stream is None else stream
    try:
        return "bar" if stream.isatty() else "plain"
    except (AttributeError, ValueError):  # a closed or unusual stream
        return "plain"


class PlainProgress:
    """A progress report for logs: a plain line at most every ``every_s`` seconds, and at the end."""

    def __init__(
        self,
        iterable: Iterable | None = None,
        *,
        total: int | None = None,
        desc: str = "",
        unit: str = "it",
        initial: int = 0,
        every_s: float = 5.0,
        stream: TextIO | None = None,
        silent: bool = False,
    ):
        self.iterable = iterable
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.total, self.desc, self.unit = total, desc, unit
        self.n = self._start = initial
        self.every_s, self.silent = every_s, silent
        self.stream = sys.stderr if stream is None else stream
        self.postfix = ""
        self._t0 = self._last = time.perf_counter()
        self._closed = False

    def __iter__(self) -> Iterator:
        for item in self.iterable or ():
            yield item
            self.update(1)
        self.close()

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def line(self) -> str:
        """The status line: ``desc: n/total unit (pct%) rate unit/s, elapsed s [postfix]``."""
        elapsed = time.perf_counter() - self._t0
        done = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        rate = (self.n - self._start) / elapsed if elapsed > 0 else 0.0
        tail = f" [{self.postfix}]" if self.postfix else ""
        head = f"{self.desc}: " if self.desc else ""
        return f"{head}{done} {self.unit}{pct} {rate:.3g} {self.unit}/s, {elapsed:.0f} s{tail}"

    def _emit(self) -> None:
        if not self.silent:
            print(self.line(), file=self.stream, flush=True)
        self._last = time.perf_counter()

    def update(self, n: int = 1) -> None:
        self.n += n
        if time.perf_counter() - self._last >= self.every_s:
            self._emit()

    def set_postfix_str(self, s: str, refresh: bool = True) -> None:  # noqa: ARG002 (tqdm's signature)
        self.postfix = s

    def set_postfix(self, **values) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def set_description(self, desc: str, refresh: bool = True) -> None:  # noqa: ARG002
        self.desc = desc

    def write(self, s: str) -> None:
        if not self.silent:
            print(s, file=self.stream, flush=True)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self.n != self._start:
                self._emit()


def progress(
    iterable: Iterable | None = None,
    *,
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    initial: int = 0,
    quiet: bool = False,
    every_s: float = 5.0,
):
    """A tqdm bar on a terminal, a :class:`PlainProgress` elsewhere, nothing when ``quiet``."""
    mode = progress_mode(quiet=quiet)
    if mode == "bar":
        from tqdm.auto import tqdm

        return tqdm(iterable, total=total, desc=desc, unit=unit, initial=initial, dynamic_ncols=True)
    return PlainProgress(
        iterable, total=total, desc=desc, unit=unit, initial=initial, every_s=every_s, silent=mode == "off"
    )


def say(message: str, *, quiet: bool = False) -> None:
    """A status line on stderr (warnings, 'saved to ...'), unless ``quiet``."""
    if not quiet:
        print(message, file=sys.stderr, flush=True)


__all__ = ["MODES", "PlainProgress", "progress", "progress_mode", "say"]
