"""Argument checks shared by the torch side of attnlab (the NumPy reference has its own in
:mod:`attnlab.ref._checks`, which also accepts NumPy integers)."""

from __future__ import annotations


def positive_int(name: str, value) -> int:
    """Return ``value`` unchanged if it is a Python ``int`` > 0 (not a bool), else raise
    ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value
