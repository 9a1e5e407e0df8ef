"""Choosing where a model runs: :func:`resolve_device` for the CLI's ``--device auto|cpu|cuda``, and
:func:`torch_threads` for how many CPU threads its operations use."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(device: str = "auto") -> str:
    """``"auto"``: ``"cuda"`` when ``torch.cuda.is_available()``, else ``"cpu"``; ``"cpu"`` as is;
    ``"cuda"``: ``"cuda"``, or a ``ValueError`` (one line) when PyTorch sees no CUDA device."""
    import torch

    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {device!r}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device 'cuda' was asked for but PyTorch sees no CUDA device (torch {torch.__version__}, "
            f"CUDA build: {torch.version.cuda or 'no'}); use device=cpu or auto"
        )
    return device


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Torch's intra-op threads set to ``n`` inside the block (``None``: left as they are), the count
    restored afterwards. Small models run on one: they gain nothing from a second thread, and on a
    shared machine each operation waits for it."""
    import torch

    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
