"""How NumPy's BLAS is allowed to run inside loops of small matrix products.

OpenBLAS splits every GEMM above a small size across one thread per core and waits for all of them at
the end of each call. For a loop of thousands of small GEMMs (the tiles of
:func:`attnlab.ref.flash_attention`: 128×64×128 per head) that hand-off is paid per call, and when
another process holds a core the wait is for a descheduled thread: measured on a 2-core AMD Zen 5,
load average 5.5, the tiled loop ran 4.3× slower with OpenBLAS's threads than with one thread. The
loop instead runs its products on one BLAS thread each and spreads independent work (query blocks)
over threads of its own, which never wait for one another.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator


@functools.cache
def _controller():
    """threadpoolctl's view of the BLAS libraries loaded in this process (found once: a scan of the
    process's shared libraries costs milliseconds)."""
    import threadpoolctl  # imported on first use: most of attnlab never limits the BLAS

    return threadpoolctl.ThreadpoolController()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Within the block, every BLAS call runs on the calling thread alone; the previous limits are
    restored afterwards. The limit is process-wide (BLAS libraries keep one setting)."""
    with _controller().limit(limits=1, user_api="blas"):
        yield


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)
