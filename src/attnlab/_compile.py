"""``torch.compile`` with Inductor's on-disk cache kept apart per vector capability.

Inductor keys its cache of compiled kernels without the CPU capability it compiled for
(``torch.backends.cpu.get_cpu_capability()``, which ``ATEN_CPU_CAPABILITY`` caps). Measured with
PyTorch 2.13 on an Intel Xeon (AVX-512): ``block_sparse_attention`` compiled in a process capped to
AVX2 and then reused from the cache by an uncapped process returned errors of 2.4 (against SDPA under
the same mask; 3.6e-7 from a fresh cache). So every compile attnlab makes goes through
:func:`compiled`, which puts the cache in a sub-folder named for the capability in force.
"""

from __future__ import annotations

import os

PREFIX = "attnlab-isa-"


def isolate_inductor_cache() -> str:
    """Point ``TORCHINDUCTOR_CACHE_DIR`` at ``<cache>/attnlab-isa-<capability>`` (``<cache>``: the
    folder the user set, else Inductor's default) and return it; idempotent (a folder this function
    named already is renamed for the capability in force, never nested)."""
    import torch
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    capability = torch.backends.cpu.get_cpu_capability().lower()
    base = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or default_cache_dir()
    if os.path.basename(base).startswith(PREFIX):
        base = os.path.dirname(base)
    folder = os.path.join(base, PREFIX + capability)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    return folder


def compiled(fn, **options):
    """``torch.compile(fn, **options)`` after :func:`isolate_inductor_cache`."""
    import torch

    isolate_inductor_cache()
    return torch.compile(fn, **options)
