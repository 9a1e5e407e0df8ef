"""The one set of argument checks used across attnlab (``ref``, ``nn``, ``models``, ``audit``, the CLI).

Every check returns the value (normalised: ``int``/``float``) or raises ``ValueError`` with one
message format: ``"<name> must be <what>, got <value!r>"``. Pure Python (no NumPy, no torch), so the
NumPy reference may use it too; NumPy integer and float scalars are accepted through ``numbers``.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterable


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def positive_int(name: str, value) -> int:
    """Return ``value`` as an ``int`` if it is an integer > 0 (not a bool), else raise ``ValueError``."""
    if not _is_int(value) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def non_negative_int(name: str, value) -> int:
    """Return ``value`` as an ``int`` if it is an integer >= 0 (not a bool), else raise ``ValueError``."""
    if not _is_int(value) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


def int_in(name: str, value, low: int, high: int) -> int:
    """Return ``value`` as an ``int`` if it is an integer (not a bool) in ``low..high``, else raise
    ``ValueError`` naming ``name`` and the range (a string, a float, NaN and 10**30 alike)."""
    if not _is_int(value) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, got {value!r}")
    return int(value)


def finite_float(name: str, value) -> float:
    """Return ``value`` as a ``float`` if it is a finite real number, else raise ``ValueError``."""
    if not _is_real(value) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def non_negative_float(name: str, value) -> float:
    """Return ``value`` as a ``float`` if it is a finite number >= 0, else raise ``ValueError``."""
    if not _is_real(value) or not math.isfinite(float(value)) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def positive_float(name: str, value) -> float:
    """Return ``value`` as a ``float`` if it is a finite number > 0, else raise ``ValueError``."""
    if not _is_real(value) or not math.isfinite(float(value)) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def probability(name: str, value) -> float:
    """Return ``value`` as a ``float`` if it lies in [0, 1) (a dropout rate), else raise ``ValueError``."""
    if not _is_real(value) or not math.isfinite(float(value)) or not 0 <= value < 1:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


def did_you_mean(value, choices: Iterable) -> str:
    """``"; did you mean 'gpt2'?"`` naming the choice closest to a mistyped ``value`` (difflib's
    ratio >= 0.6, case ignored), or ``""`` when none is close: the tail of an unknown-choice message."""
    import difflib

    options = [str(c) for c in choices]
    lowered = {o.lower(): o for o in options}
    close = difflib.get_close_matches(str(value).lower(), list(lowered), n=1, cutoff=0.6)
    return f"; did you mean {lowered[close[0]]!r}?" if close else ""


def choice(name: str, value, choices: Iterable):
    """Return ``value`` if it is one of ``choices``, else raise ``ValueError`` listing them (and the
    closest, :func:`did_you_mean`)."""
    options = list(choices)
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}{did_you_mean(value, options)}")
    return value


def optional_positive_int(name: str, value) -> int | None:
    """``None`` or a positive integer."""
    return None if value is None else positive_int(name, value)


def memory_bytes() -> int:
    """Physical memory of this machine in bytes (a generous bound when it cannot be read). The
    size checks of ``ref`` (arrays) and ``models`` (a config built on the meta device) compare with it."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 1 << 40


# A query row whose mask leaves no key: the one policy of attnlab.ref and attnlab.nn. "error" (the
# default) raises, naming the row; "zero" is PyTorch's convention (that row's weights and output are 0).
EMPTY_ROWS = ("error", "zero")


def empty_row_error(index: tuple[int, ...]) -> ValueError:
    """The error for the first query row (``index`` into the mask's ``[..., T_q]``) with no key."""
    return ValueError(
        f"mask leaves query row {index} (index [..., T_q]) with no key to attend to; "
        f"pass empty_rows='zero' for PyTorch's convention (output 0)"
    )


def debug_checks() -> bool:
    """Whether ``ATTNLAB_DEBUG_CHECKS=1``: the checks that read tensor values back to the host (token
    ids in range, on every forward and decode step) then run everywhere; otherwise only at the edges
    (a prompt before the decode loop, a CLI's input), so that no forward waits on the device."""
    return os.environ.get("ATTNLAB_DEBUG_CHECKS", "") not in ("", "0")


def linear_attention_shapes(q: tuple, k: tuple, v: tuple, causal: bool) -> None:
    """The shapes linear attention needs, for ``ref`` and ``nn`` alike: ``q [..., T_q, d]``,
    ``k [..., T_k, d]``, ``v [..., T_k, d_v]`` with d >= 1, T_k >= 1 and, when ``causal``,
    T_k >= T_q; else a ``ValueError`` naming the sizes and both shapes."""
    q, k, v = list(q), list(k), list(v)
    if k[-1] != q[-1]:
        raise ValueError(f"k has d={k[-1]} but q has d={q[-1]} (q {q}, k {k})")
    if v[-2] != k[-2]:
        raise ValueError(f"v has T_k={v[-2]} but k has T_k={k[-2]} (k {k}, v {v})")
    if q[-1] == 0 or k[-2] == 0:
        raise ValueError(f"linear attention needs d >= 1 and T_k >= 1 (a key to attend to), got q {q}, k {k}")
    if causal and k[-2] < q[-2]:
        raise ValueError(f"causal linear attention needs T_k >= T_q, got q {q}, k {k}")
