"""Choosing where a model runs: :func:`resolve_device` for the CLI's ``--device auto|cpu|cuda``."""

from __future__ import annotations

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
            f"CUDA build: {torch.version.cuda or 'no'}); use --device cpu or auto"
        )
    return device
