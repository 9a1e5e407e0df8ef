"""Ordering the processes of a DDP run: rank 0 prepares, the others follow (or fail with it).

A run folder is prepared once, by rank 0 (checked, repaired, a text run's token files written), and
the other ranks must not read it before that is done, nor wait for ever when it fails.
:func:`lead_first` is that order: rank 0 runs the block first and then tells every rank whether it
succeeded; the others wait for that word, then run their block, or raise rank 0's error as their own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


def _group_ready(world: int) -> bool:
    import torch.distributed as dist

    return world > 1 and dist.is_available() and dist.is_initialized()


def _broadcast(message: str | None) -> str | None:
    """Rank 0's ``message`` on every rank (``torch.distributed.broadcast_object_list``)."""
    import torch.distributed as dist

    box = [message]
    dist.broadcast_object_list(box, src=0)
    return box[0]


@contextlib.contextmanager
def lead_first(rank: int, world: int) -> Iterator[None]:
    """Run the ``with`` block on rank 0 first, then on the other ranks. An exception on rank 0 is
    raised there as it is and on every other rank as a ``ValueError`` of the same message (before
    their block runs). Without an initialised process group (one process) it does nothing."""
    if not _group_ready(world):
        yield
        return
    if rank != 0:
        failed = _broadcast(None)
        if failed is not None:
            raise ValueError(failed)
        yield
        return
    try:
        yield
    except BaseException as exc:
        _broadcast(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise
    _broadcast(None)


def same_everywhere(value, world: int):
    """Rank 0's ``value`` on every rank (a default folder name chosen once); ``value`` itself in
    one process."""
    return _broadcast(value) if _group_ready(world) else value
