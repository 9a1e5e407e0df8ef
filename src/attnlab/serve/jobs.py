"""Model work off the event loop: one worker thread and a bounded queue in front of it.

Every request's computation runs on a single worker thread, in arrival order, so the event loop
stays free to answer (and to refuse) other requests, and two requests never run the same model at
once (a hook added by one request would otherwise be seen by the other). At most ``1 + queue``
jobs are admitted (running or waiting); past that :meth:`Jobs.run` raises :class:`Busy` at once
and the server answers ``503`` with ``Retry-After`` instead of growing a backlog. A job counts
until its thread has finished it, even when its client has gone, so the bound holds for the work
actually queued.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class Busy(Exception):
    """Every place in the queue is taken; ``retry_after`` is the advised wait in whole seconds."""

    def __init__(self, pending: int, retry_after: int = 1):
        super().__init__(f"the server is busy ({pending} requests ahead); try again in {retry_after} s")
        self.retry_after = retry_after


class Jobs:
    """Run callables on one worker thread, at most ``1 + queue`` admitted at a time."""

    def __init__(self, queue: int = 8):
        if isinstance(queue, bool) or not isinstance(queue, int) or queue < 0:
            raise ValueError(f"queue must be an integer >= 0, got {queue!r}")
        self.capacity = 1 + queue
        self.pending = 0  # admitted and not finished; changed on the event loop's thread only
        self.done = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnlab-serve")

    def _release(self, _: Future) -> None:
        self.pending -= 1
        self.done += 1

    async def run(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
        """``(fn(*args), seconds it ran)`` from the worker thread; :class:`Busy` when full."""
        if self.pending >= self.capacity:
            raise Busy(self.pending)
        loop = asyncio.get_running_loop()

        def timed() -> tuple[Any, float]:
            start = time.perf_counter()
            return fn(*args), time.perf_counter() - start

        self.pending += 1
        future = self._pool.submit(timed)
        future.add_done_callback(lambda f: _call_soon(loop, self._release, f))
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Stop taking work; jobs not started are dropped."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[[Future], None], future: Future) -> None:
    try:
        loop.call_soon_threadsafe(fn, future)
    except RuntimeError:  # the loop has closed (shutdown): nothing is waiting any more
        pass
