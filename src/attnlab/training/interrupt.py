"""Stopping a training run without losing it: the first Ctrl-C (SIGINT) or a SIGTERM asks the loop to
stop after the step it is in; the loop then writes a checkpoint (when the run has a folder) and raises
:class:`TrainingInterrupted`, so ``attnlab train --resume`` continues where it stopped. A second
Ctrl-C stops at once, as Python's own handler does.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator


class TrainingInterrupted(KeyboardInterrupt):
    """The loop stopped on a signal after completing ``step`` of ``total`` steps; ``saved`` is the run
    folder its checkpoint went to, or None when the run has none. ``exit_code``: 128 + the signal.
    ``resume_with``: how the message says to continue (the Python call; a command sets its own line)."""

    def __init__(self, step: int, total: int, saved: str | None, signum: int):
        super().__init__(step, total, saved, signum)
        self.step, self.total, self.saved, self.exit_code = step, total, saved, 128 + signum
        self.resume_with = f"train(config, out_dir={saved!r}, resume=True)"

    def __str__(self) -> str:
        done = f"stopped after step {self.step} of {self.total}"
        if self.saved is None:
            return f"{done}; not saved (the run has no checkpoint folder)"
        return f"{done}; checkpoint saved: continue with {self.resume_with}"


@contextlib.contextmanager
def stop_requests(enabled: bool = True) -> Iterator[Callable[[], int | None]]:
    """While inside, SIGINT and SIGTERM only record that a stop was asked for; yields a function that
    returns the signal's number once one arrived (None before). A second SIGINT raises
    ``KeyboardInterrupt`` at once. Off the main thread, or with ``enabled`` False, nothing is
    installed and the function always returns None. The previous handlers come back on exit."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    asked: list[int] = []

    def handler(signum, frame) -> None:
        if asked and signum == signal.SIGINT:
            raise KeyboardInterrupt
        asked.append(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield lambda: asked[0] if asked else None
    finally:
        for s, h in previous.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)
