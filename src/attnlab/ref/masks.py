"""Boolean attention masks. Convention: ``True`` where a query may attend, broadcastable to
``[..., T_q, T_k]`` (the convention of ``torch.nn.functional.scaled_dot_product_attention``).

A mask M enters the scores as an additive term: softmax(QK^T / sqrt(d_k) + M) with M = 0 where
allowed and -inf where forbidden. Every query row must keep at least one key (see
:func:`check_rows`).
"""

from __future__ import annotations

import numpy as np

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
    window = positive_int("window", window)
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
    if empty_rows not in ("error", "zero"):
        raise ValueError(f"empty_rows must be 'error' or 'zero', got {empty_rows!r}")
    empty = ~mask.any(axis=-1)
    if empty_rows == "error" and empty.any():
        idx = tuple(int(i) for i in np.argwhere(empty)[0])
        raise ValueError(
            f"mask leaves query row {idx} (index [..., T_q]) with no key to attend to; "
            f"pass empty_rows='zero' for PyTorch's convention (output 0)"
        )
    return empty
