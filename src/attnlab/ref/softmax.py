"""Softmax, done so it never overflows: alpha_i = exp(e_i - max_j e_j) / sum_j exp(e_j - max_j e_j).

Subtracting the maximum logit changes nothing mathematically (it cancels between numerator and
denominator) but keeps every exponent <= 0, so logits of 1e4 are fine.
"""

from __future__ import annotations

import numpy as np

from attnlab.ref._checks import as_float, positive_int


def _check_axis(x: np.ndarray, axis: int) -> None:
    """A ``ValueError`` naming ``x`` for an axis it lacks or an empty axis (no logit to normalise)."""
    if isinstance(axis, bool):
        raise ValueError(f"axis must be an integer, got {axis!r}")
    if not isinstance(axis, (int, np.integer)):
        return  # a tuple of axes: NumPy's reductions check it
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis={axis} is out of range for x of shape {list(x.shape)}")
    if x.shape[axis] == 0:
        raise ValueError(f"x has no entries along axis={axis} (shape {list(x.shape)}): nothing to normalise")


def softmax(x, axis: int = -1) -> np.ndarray:
    """Stable softmax along ``axis``: alpha_i = exp(e_i - m) / sum_j exp(e_j - m), m = max_j e_j.

    Args:
        x: logits ``[..., n]`` (any shape; normalised along ``axis``).
    Returns:
        weights of the same shape, non-negative, summing to 1 along ``axis``.
    """
    x = as_float("x", x, min_ndim=1)
    _check_axis(x, axis)
    with np.errstate(over="ignore"):  # a logit range past the dtype's max: exp(-inf) = 0 is right
        z = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis: int = -1) -> np.ndarray:
    """Stable log-softmax: log alpha_i = (e_i - m) - log sum_j exp(e_j - m).

    Args:
        x: logits ``[..., n]``.
    Returns:
        log-weights of the same shape (all <= 0).
    """
    x = as_float("x", x, min_ndim=1)
    _check_axis(x, axis)
    with np.errstate(over="ignore"):
        z = x - np.max(x, axis=axis, keepdims=True)  # <= 0; -inf only if the range overflows the dtype
    if np.isinf(z).any():
        raise ValueError(
            f"log_softmax: x spans more than the largest {x.dtype} ({np.finfo(x.dtype).max:.3g}), so some "
            f"log-probabilities lie below what {x.dtype} can represent; rescale x"
        )
    return z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))


def online_softmax(x, block: int = 128) -> np.ndarray:
    """Softmax over the last axis computed block by block with a running max ``m`` and sum ``l``.

    For each block ``B`` of logits: ``m_new = max(m, max(B))``, ``l = l * exp(m - m_new) +
    sum(exp(B - m_new))``. After the last block ``alpha_i = exp(e_i - m) / l``. This is the
    recurrence FlashAttention uses; here it only shows the statistics can be streamed.

    Args:
        x: logits ``[..., n]``.
        block: number of logits read per step (positive).
    Returns:
        weights ``[..., n]``, equal to :func:`softmax` (up to rounding).
    """
    x = as_float("x", x, min_ndim=1)
    block = positive_int("block", block)
    n = x.shape[-1]
    m = np.full(x.shape[:-1] + (1,), -np.inf, dtype=x.dtype)  # running max  [..., 1]
    l = np.zeros_like(m)  # running sum of exp(e - m)  [..., 1]
    for start in range(0, n, block):
        b = x[..., start : start + block]  # [..., <=block]
        m_new = np.maximum(m, b.max(axis=-1, keepdims=True))
        l = l * np.exp(m - m_new) + np.exp(b - m_new).sum(axis=-1, keepdims=True)
        m = m_new
    return np.exp(x - m) / l
