"""Input checks shared by the reference: every bad input becomes a ``ValueError`` naming the argument.

The array checks (dtype, rank, finiteness, mask broadcasting) live here; the scalar checks are
attnlab's one set (:mod:`attnlab._checks`, pure Python), re-exported so ``ref`` and ``nn`` raise the
same messages (``"<name> must be a positive integer, got 0"``).
"""

from __future__ import annotations

import numpy as np

from attnlab._checks import memory_bytes, non_negative_float, positive_float, positive_int

__all__ = [
    "as_float",
    "as_mask",
    "check_fits",
    "non_negative_float",
    "positive_float",
    "positive_int",
    "result_dtype",
]


def as_float(name: str, x, *, min_ndim: int = 0, ndim: int | None = None) -> np.ndarray:
    """Return ``x`` as a float array (float64 unless it already is float32/float64).

    Raises ``ValueError`` naming ``name`` if the rank is wrong or any entry is NaN/inf.
    """
    a = np.asarray(x)
    if np.iscomplexobj(a):  # astype(float64) would drop the imaginary part without a word
        raise ValueError(f"{name} must be a real array, got dtype {a.dtype}")
    if a.dtype not in (np.float32, np.float64):
        if a.dtype == bool or not np.issubdtype(a.dtype, np.number):
            raise ValueError(f"{name} must be a numeric array, got dtype {a.dtype}")
        a = a.astype(np.float64)
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must have rank {ndim}, got shape {list(a.shape)}")
    if a.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {list(a.shape)}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinite values (shape {list(a.shape)})")
    return a


def check_qkv(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """Queries ``[..., T_q, d_k]``, keys ``[..., T_k, d_k]`` and values ``[..., T_k, d_v]`` that fit
    together: the same d_k (not 0) for q and k, the same T_k for k and v; else a ``ValueError`` with
    the shapes."""
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"k has d_k={k.shape[-1]} but q has d_k={q.shape[-1]} (q {list(q.shape)}, k {list(k.shape)})"
        )
    if q.shape[-1] == 0:
        raise ValueError(f"q and k have d_k=0: no feature to compare (q {list(q.shape)}, k {list(k.shape)})")
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"v has T_k={v.shape[-2]} but k has T_k={k.shape[-2]} (k {list(k.shape)}, v {list(v.shape)})"
        )


def as_mask(name: str, mask, target_shape: tuple[int, ...]) -> np.ndarray:
    """Return ``mask`` as a boolean array broadcast to ``target_shape``.

    ``True`` means "may attend". Raises ``ValueError`` if it is not boolean or does not broadcast.
    """
    m = np.asarray(mask)
    if m.dtype != bool:
        raise ValueError(f"{name} must be boolean (True = may attend), got dtype {m.dtype}")
    try:
        return np.broadcast_to(m, target_shape)
    except ValueError:
        raise ValueError(
            f"{name} of shape {list(m.shape)} does not broadcast to the scores' shape {list(target_shape)}"
        ) from None


def result_dtype(*arrays: np.ndarray) -> np.dtype:
    """float32 only if every input is float32; float64 otherwise."""
    return np.result_type(*arrays)


def check_fits(what: str, n_elements: int, itemsize: int = 8) -> None:
    """Refuse, before allocating, an array that would take more than half of this machine's memory:
    ``ValueError`` naming ``what`` and the GiB it would need (never a raw ``MemoryError``)."""

    need = int(n_elements) * itemsize
    have = memory_bytes()
    if need > have // 2:
        raise ValueError(
            f"{what} would need {need / 2**30:,.1f} GiB; this machine has {have / 2**30:,.1f} GiB"
        )
