"""Boolean attention masks. Convention: ``True`` where a query may attend, broadcastable to
``[..., T_q, T_k]`` (the convention of ``torch.nn.functional.scaled_dot_product_attention``).

A mask M enters the scores as an additive term: softmax(QK^T / sqrt(d_k) + M) with M = 0 where
allowed and -inf where forbidden. Every query row must keep at least one key (see
:func:`check_rows`).
"""

from __future__ import annotations

import numpy as np

from attnlab._checks import EMPTY_ROWS, choice, empty_row_error
from attnlab.ref._checks import check_fits, positive_int


def causal_mask(t_q: int, t_k: int | None = None) -> np.ndarray:
    """Causal mask aligned to the lower right: ``[t_q, t_k]``.

    The ``t_q`` queries are the *last* ``t_q`` positions of the ``t_k`` keys, so query ``i`` sees
    keys ``0 .. t_k - t_q + i``. With ``t_q == t_k`` this is the usual lower triangle; with
    ``t_q == 1`` (one decoding step over a KV cache) the query sees every cached key.
    (PyTorch's ``is_causal=True`` is aligned to the upper left instead: query ``i`` sees keys
    ``0 .. i``, which for ``t_q=1`` would hide every cached key but the first.)

    Args:
        t_q: number of queries. t_k: number of keys (default ``t_q``). With ``t_q > t_k`` the first
            ``t_q - t_k`` rows are empty (attention over them needs ``empty_rows="zero"``).
    Returns:
        bool ``[t_q, t_k]``.
    """
    t_q = positive_int("t_q", t_q)
    t_k = t_q if t_k is None else positive_int("t_k", t_k)
    check_fits(f"causal_mask({t_q}, {t_k})", t_q * t_k, 1)
    i = np.arange(t_q)[:, None] + (t_k - t_q)  # absolute position of each query  [t_q, 1]
    j = np.arange(t_k)[None, :]  # [1, t_k]
    return j <= i


def padding_mask(lengths, t: int) -> np.ndarray:
    """Key-padding mask ``[B, 1, t]``: key ``j`` of sequence ``b`` is real iff ``j < lengths[b]``.

    The middle axis broadcasts over queries, so the result broadcasts to ``[B, T_q, t]``
    (multi-head code inserts the head axis).

    Args:
        lengths: ``[B]`` true lengths, each in ``1..t``. t: padded length.
    Returns:
        bool ``[B, 1, t]``.
    """
    t = positive_int("t", t)
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(
            f"lengths must be a 1-D integer array, got shape {list(lengths.shape)} dtype {lengths.dtype}"
        )
    if np.any(lengths < 1) or np.any(lengths > t):
        raise ValueError(f"lengths must lie in 1..{t} (t), got {lengths.tolist()}")
    return (np.arange(t)[None, :] < lengths[:, None])[:, None, :]


def sliding_window_mask(t_q: int, t_k: int | None = None, window: int = 1) -> np.ndarray:
    """Causal sliding-window mask ``[t_q, t_k]``, aligned to the lower right like :func:`causal_mask`.

    Query ``i`` (absolute position ``p = t_k - t_q + i``) sees keys ``p - window + 1 .. p``: itself
    and the ``window - 1`` tokens before it.

    Args:
        t_q: queries. t_k: keys (default ``t_q``). window: keys each query sees (positive).
    Returns:
        bool ``[t_q, t_k]``.
    """
    t_q = positive_int("t_q", t_q)
    t_k = t_q if t_k is None else positive_int("t_k", t_k)
    window = min(positive_int("window", window), t_k)  # a window of T_k or more is plain causal
    check_fits(f"sliding_window_mask({t_q}, {t_k})", t_q * t_k, 1)
    p = np.arange(t_q)[:, None] + (t_k - t_q)  # [t_q, 1]
    j = np.arange(t_k)[None, :]  # [1, t_k]
    return (j <= p) & (j > p - window)


def check_rows(mask: np.ndarray, empty_rows: str = "error") -> np.ndarray:
    """Find query rows with no key left to attend to.

    Args:
        mask: bool ``[..., T_q, T_k]`` (already broadcast).
        empty_rows: ``"error"`` raises ``ValueError`` naming the first empty row; ``"zero"`` accepts.
    Returns:
        bool ``[..., T_q]``, True where a row is empty.
    """
    choice("empty_rows", empty_rows, EMPTY_ROWS)
    empty = ~mask.any(axis=-1)
    if empty_rows == "error" and empty.any():
        raise empty_row_error(tuple(int(i) for i in np.argwhere(empty)[0]))
    return empty


def _global_positions(global_tokens, t_k: int) -> np.ndarray:
    """``global_tokens`` -> sorted unique int positions, each in ``0 .. t_k - 1``."""
    g = np.asarray(global_tokens)
    if g.ndim != 1 or not (g.size == 0 or np.issubdtype(g.dtype, np.integer)):
        raise ValueError(f"global_tokens must be a 1-D list of integer positions, got {global_tokens!r}")
    if g.size and (g.min() < 0 or g.max() >= t_k):
        raise ValueError(f"global_tokens must lie in 0..{t_k - 1} (the sequence), got {g.tolist()}")
    return np.unique(g).astype(np.int64)


def sparse_pattern_mask(
    t_q: int,
    t_k: int | None = None,
    *,
    causal: bool = False,
    window: int | None = None,
    global_tokens=None,
    stride: int | None = None,
) -> np.ndarray:
    """Sliding-window, Longformer and strided (Child et al. 2019) patterns as one boolean mask.

    With query ``i`` at position ``p = t_k - t_q + i`` (lower-right aligned) and ``d = p - j``::

        M[i, j] = causal_ok & (local | strided | global)
        causal_ok = d >= 0 when causal (else True)
        local     = |d| < window       (the window counts the query itself; window=None: all keys,
                                        unless a stride is given, whose local part is |d| < stride)
        strided   = d mod stride == 0  (the "summary" keys every stride positions; off when None)
        global    = p or j in global_tokens  (Longformer: global tokens see and are seen by all)

    Causal with a window ``w``: query ``p`` sees keys ``p - w + 1 .. p`` (as
    :func:`sliding_window_mask`); non-causal: keys ``p - w + 1 .. p + w - 1``. Child et al.'s
    strided pattern is ``causal=True, stride=l``: the previous ``l`` positions and every ``l``-th one
    before them. Every row keeps its own position (``d = 0``), so no row is empty.

    Args:
        t_q: queries. t_k: keys (default ``t_q``; ``t_k >= t_q``). window, stride: positive ints or
            None. global_tokens: key positions ``0 .. t_k - 1`` or None.
    Returns:
        bool ``[t_q, t_k]``.
    """
    t_q = positive_int("t_q", t_q)
    t_k = t_q if t_k is None else positive_int("t_k", t_k)
    check_fits(f"sparse_pattern_mask({t_q}, {t_k})", t_q * t_k, 9)  # the bool mask and int64 offsets
    if t_k < t_q:
        raise ValueError(
            f"sparse_pattern_mask needs t_k >= t_q (queries are the last keys), got {t_q}, {t_k}"
        )
    reach = None if window is None else positive_int("window", window)
    if stride is not None:
        stride = positive_int("stride", stride)
        reach = stride if reach is None else reach
    p = np.arange(t_q)[:, None] + (t_k - t_q)  # query positions  [t_q, 1]
    j = np.arange(t_k)[None, :]  # key positions  [1, t_k]
    d = p - j  # [t_q, t_k]
    allowed = np.ones((t_q, t_k), dtype=bool) if reach is None else np.abs(d) < reach
    if stride is not None:
        allowed |= d % stride == 0
    if global_tokens is not None:
        is_global = np.zeros(t_k, dtype=bool)
        is_global[_global_positions(global_tokens, t_k)] = True
        allowed |= is_global[p] | is_global[j]  # [t_q, 1] | [1, t_k]
    if causal:
        allowed &= d >= 0
    return allowed


def longformer_mask(t: int, window: int, global_tokens) -> np.ndarray:
    """Longformer (Beltagy et al. 2020): a non-causal local ``window`` plus ``global_tokens`` that
    attend to, and are attended by, every position. bool ``[t, t]``; see :func:`sparse_pattern_mask`."""
    return sparse_pattern_mask(t, window=window, global_tokens=global_tokens)


def strided_mask(t: int, stride: int, causal: bool = True) -> np.ndarray:
    """Child et al. (2019) strided pattern: the previous ``stride`` positions and every
    ``stride``-th earlier one. bool ``[t, t]``; see :func:`sparse_pattern_mask`."""
    return sparse_pattern_mask(t, causal=causal, stride=stride)
