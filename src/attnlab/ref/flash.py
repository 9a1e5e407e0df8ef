"""Tiled attention with the online softmax (FlashAttention's forward pass), exact, in NumPy.

Naive attention builds the whole score matrix S = Q K^T / sqrt(d_k), ``[T_q, T_k]`` per head,
before the softmax. Here Q is cut into query blocks of ``block_q`` rows and K, V into key blocks
of ``block_k`` rows; only one ``[block_q, block_k]`` tile of scores exists at a time, and the
softmax is streamed over the key blocks with a running max ``m`` and a running sum ``l``
(the recurrence of :func:`attnlab.ref.online_softmax`). The result equals
:func:`attnlab.ref.scaled_dot_product_attention` up to rounding.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from attnlab._blas import one_blas_thread, usable_cpus
from attnlab._checks import EMPTY_ROWS, choice, empty_row_error, finite_float
from attnlab.ref._checks import as_float, check_qkv, positive_int


def _lead_shape(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None) -> tuple[int, ...]:
    """Broadcast leading (batch/head) dims of q, k, v and the mask, or raise naming the shapes."""
    shapes = [("q", q.shape), ("k", k.shape), ("v", v.shape)]
    if mask is not None and mask.ndim > 2:
        shapes.append(("mask", mask.shape))
    try:
        return np.broadcast_shapes(*(s[:-2] for _, s in shapes))
    except ValueError:
        listed = ", ".join(f"{n} {list(s)}" for n, s in shapes)
        raise ValueError(f"leading (batch/head) dims do not broadcast: {listed}") from None


def _check_inputs(q, k, v, mask, t_q: int, t_k: int):
    """q, k, v that fit together (:func:`attnlab.ref._checks.check_qkv`) and the mask as a boolean
    array broadcastable to ``[..., T_q, T_k]`` (or None)."""
    check_qkv(q, k, v)
    if mask is None:
        return None
    m = np.asarray(mask)
    if m.dtype != bool:
        raise ValueError(f"mask must be boolean (True = may attend), got dtype {m.dtype}")
    if m.ndim < 2:
        m = m.reshape((1,) * (2 - m.ndim) + m.shape)  # [1.., T_k] -> [1, T_k]
    if m.shape[-2] not in (1, t_q) or m.shape[-1] not in (1, t_k):
        raise ValueError(
            f"mask of shape {list(m.shape)} does not broadcast to the scores' "
            f"[..., T_q, T_k] = [..., {t_q}, {t_k}]"
        )
    return m


def _options(block_q, block_k, window, empty_rows: str, workers):
    """The checked scalar options: ``(block_q, block_k, window or None, workers)``; ``workers``
    defaults to the CPUs this process may use."""
    choice("empty_rows", empty_rows, EMPTY_ROWS)
    return (
        positive_int("block_q", block_q),
        positive_int("block_k", block_k),
        None if window is None else positive_int("window", window),
        usable_cpus() if workers is None else positive_int("workers", workers),
    )


def key_block_range(
    q_lo: int, q_hi: int, t_k: int, offset: int, causal: bool, window: int | None
) -> tuple[int, int]:
    """Keys ``[lo, hi)`` that any query of the block ``q_lo .. q_hi - 1`` may see.

    Query ``i`` sits at absolute position ``p = offset + i`` (``offset = T_k - T_q``: lower-right
    alignment). Causal: it sees keys ``j <= p``. With a window ``w``: also ``j > p - w``.
    Key blocks outside ``[lo, hi)`` are skipped, never computed and then masked.
    """
    lo, hi = 0, t_k
    if causal:
        hi = min(t_k, max(0, offset + q_hi))  # last query of the block sees keys < offset + q_hi
    if window is not None:
        lo = max(0, offset + q_lo - window + 1)  # first query of the block sees keys >= p - w + 1
    return lo, hi


def _tile_mask(q_lo, q_hi, k_lo, k_hi, offset, causal, window):
    """Positional mask of one tile ``[q_hi - q_lo, k_hi - k_lo]``, or None if every entry is True."""
    p = np.arange(q_lo, q_hi)[:, None] + offset  # absolute query positions  [bq, 1]
    j = np.arange(k_lo, k_hi)[None, :]  # key positions  [1, bk]
    full = True
    allowed = np.ones((q_hi - q_lo, k_hi - k_lo), dtype=bool)
    if causal and k_hi - 1 > offset + q_lo:  # some key lies after the first query: tile straddles
        allowed &= j <= p
        full = False
    if window is not None and k_lo <= offset + q_hi - 1 - window:  # some key left of a window
        allowed &= j > p - window
        full = False
    return None if full else allowed


def flash_attention(
    q,
    k,
    v,
    *,
    mask=None,
    causal: bool = False,
    window: int | None = None,
    block_q: int = 128,
    block_k: int = 128,
    scale=None,
    return_lse: bool = False,
    empty_rows: str = "error",
    workers: int | None = None,
):
    """Exact attention softmax(Q K^T / sqrt(d_k) + M) V, computed tile by tile (FlashAttention).

    The recurrence, for one query block Q_i ``[B_q, d_k]`` and the key/value blocks K_j, V_j
    ``[B_k, d_k]``, ``[B_k, d_v]`` (all heads and batch entries at once):

    * start with ``m = -inf`` (running row max), ``l = 0`` (running row sum) and ``O = 0``
      (unnormalised output ``[B_q, d_v]``);
    * for each key block j that any query of the block may see:

      - ``S_ij = Q_i K_j^T * scale``                         (one ``[B_q, B_k]`` tile of scores;
        entries the mask forbids get -inf)
      - ``m_new = max(m, rowmax(S_ij))``
      - ``P_ij = exp(S_ij - m_new)``                          (weights, not yet normalised)
      - ``l = exp(m - m_new) * l + rowsum(P_ij)``
      - ``O = exp(m - m_new) * O + P_ij V_j``                 (old partial output rescaled)
      - ``m = m_new``;
    * finally ``Z_i = O / l`` and the log-sum-exp ``L_i = m + log l`` (what the backward pass
      needs to rebuild ``P = exp(S - L)`` without the sums).

    Because ``exp(m - m_new)`` rescales everything accumulated so far to the new max, ``O / l``
    after the last block is exactly ``softmax(S_i) V``. No ``[T_q, T_k]`` matrix is ever formed.

    Causal attention is aligned to the lower right, like :func:`attnlab.ref.causal_mask`: query
    ``i`` is position ``p = T_k - T_q + i`` and sees keys ``j <= p``. ``window=w`` is the causal
    sliding window of :func:`attnlab.ref.sliding_window_mask` (keys ``p - w < j <= p``) and implies
    ``causal``. Key blocks wholly above the diagonal or wholly left of the window are skipped
    (never computed); so are tiles where ``mask`` is all False.

    Args:
        q: queries ``[..., T_q, d_k]``.
        k: keys ``[..., T_k, d_k]``. v: values ``[..., T_k, d_v]`` (leading dims broadcast).
        mask: bool broadcastable to ``[..., T_q, T_k]`` (True = may attend), or None.
        causal: lower-right aligned causal attention.
        window: sliding-window width (positive int) or None.
        block_q, block_k: tile sizes (any positive ints; they need not divide T).
        scale: score multiplier; default ``1 / sqrt(d_k)``.
        return_lse: also return the log-sum-exp ``L [..., T_q]`` of the scaled, masked scores.
        empty_rows: ``"error"`` raises for a query with no key to attend to; ``"zero"`` gives 0
            (and ``L = -inf``), PyTorch's convention.
        workers: threads over the query blocks (positive int; see :meth:`_Tiles.blocks`); default:
            the CPUs this process may use, at most one per block. The result is the same, bit for bit.
    Returns:
        ``out [..., T_q, d_v]``, or ``(out, lse)`` with ``lse [..., T_q]`` if ``return_lse``.
    """
    q, k, v = (as_float(name, a, min_ndim=2) for name, a in (("q", q), ("k", k), ("v", v)))
    block_q, block_k, window, workers = _options(block_q, block_k, window, empty_rows, workers)
    causal = causal or window is not None  # a window is causal
    t_q, t_k = q.shape[-2], k.shape[-2]
    mask = _check_inputs(q, k, v, mask, t_q, t_k)
    lead = _lead_shape(q, k, v, mask)
    if mask is not None:
        mask = np.broadcast_to(mask, lead + (t_q, t_k))  # a view: nothing is copied
    dtype = np.result_type(q, k, v)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else finite_float("scale", scale)
    offset = t_k - t_q  # absolute position of query 0 (lower-right alignment)

    out = np.empty(lead + (t_q, v.shape[-1]), dtype=dtype)  # [..., T_q, d_v]
    lse = np.empty(lead + (t_q,), dtype=dtype)  # [..., T_q]
    tiles = _Tiles(k, v, mask, scale, block_k, offset, causal, window)
    for q_lo, (acc, m, l) in tiles.blocks(q, block_q, lead, dtype, workers):
        _finish_block(out, lse, q_lo, acc, m, l, empty_rows)
    return (out, lse) if return_lse else out


def _finish_block(out, lse, q_lo: int, acc, m, l, empty_rows: str) -> None:
    """Normalise one query block into ``out [..., T_q, d_v]`` and ``lse [..., T_q]``: ``Z_i = O / l``,
    ``L_i = m + log l``; a row that saw no key is an error or zeros, as ``empty_rows`` says."""
    q_hi = q_lo + acc.shape[-2]
    empty = l[..., 0, :] == 0  # no key seen at all  [..., bq]
    if empty_rows == "error" and empty.any():
        idx = [int(i) for i in np.argwhere(empty)[0]]
        idx[-1] += q_lo  # index within the block -> query index
        raise empty_row_error(tuple(idx))
    l_safe = np.where(l == 0, 1.0, l)  # [..., 1, bq]
    out[..., q_lo:q_hi, :] = acc / np.swapaxes(l_safe, -1, -2)  # Z_i = O / l  [..., bq, d_v]
    with np.errstate(divide="ignore"):
        lse[..., q_lo:q_hi] = (m + np.log(l))[..., 0, :]  # L_i = m + log l (-inf if empty)


class _Tiles:
    """The key/value side of :func:`flash_attention`: ``k [..., T_k, d_k]``, ``v [..., T_k, d_v]``, the
    broadcast ``mask [..., T_q, T_k]`` (or None), the scale, the key block size, and the causal /
    window geometry (``offset = T_k - T_q``, the position of query 0)."""

    def __init__(self, k, v, mask, scale: float, block_k: int, offset: int, causal: bool, window):
        self.k, self.v, self.mask, self.scale, self.block_k = k, v, mask, scale, block_k
        self.offset, self.causal, self.window = offset, causal, window

    def blocks(self, q, block_q: int, lead: tuple, dtype, workers: int):
        """:meth:`run` on every query block of ``q [..., T_q, d_k]``, in order: ``(q_lo, (O, m, l))``.

        Query blocks are independent of one another, so they run on ``workers`` threads, and every
        tile's products run on one BLAS thread (:mod:`attnlab._blas` says why: a loop of small GEMMs
        split across the BLAS's own threads slows several-fold as soon as another process holds a
        core). Each block's arithmetic is the same on any number of workers, so the result is too."""
        starts = range(0, q.shape[-2], block_q)

        def one(q_lo: int):  # [..., bq, d_v], [..., 1, bq] x2
            return self.run(q[..., q_lo : q_lo + block_q, :], q_lo, lead, dtype)

        with one_blas_thread(), ThreadPoolExecutor(min(workers, len(starts)) or 1) as pool:
            yield from zip(starts, pool.map(one, starts))

    def run(self, q_block, q_lo: int, lead: tuple, dtype):
        """One query block ``Q_i [..., bq, d_k]`` (queries ``q_lo ..``) over every key block it may
        see: the online-softmax recurrence. Returns the unnormalised ``O [..., bq, d_v]``, the
        running max ``m`` and sum ``l`` ``[..., 1, bq]``.

        Each tile is held transposed, S_ij^T [B_k, B_q]: the row max and row sum of S_ij then run
        down the columns, which NumPy does with whole-vector operations (several times faster than
        reducing many short rows); hence m and l are ``[..., 1, bq]``."""
        k, v, mask, block_k = self.k, self.v, self.mask, self.block_k
        bq = q_block.shape[-2]
        q_hi = q_lo + bq
        q_t = np.swapaxes(q_block * self.scale, -1, -2)  # Q_i^T, scaled once  [..., d_k, bq]
        m = np.full(lead + (1, bq), -np.inf, dtype=dtype)  # running max  [..., 1, bq]
        l = np.zeros(lead + (1, bq), dtype=dtype)  # running sum  [..., 1, bq]
        acc = np.zeros(lead + (bq, v.shape[-1]), dtype=dtype)  # unnormalised O  [..., bq, d_v]
        k_begin, k_end = key_block_range(q_lo, q_hi, k.shape[-2], self.offset, self.causal, self.window)
        # key blocks are aligned to multiples of block_k so tiles are the same for every query block
        for k_lo in range((k_begin // block_k) * block_k, k_end, block_k):
            k_hi = min(k_lo + block_k, k_end)
            allowed = _tile_mask(q_lo, q_hi, k_lo, k_hi, self.offset, self.causal, self.window)  # [bq, bk]
            if mask is not None:
                tile = mask[..., q_lo:q_hi, k_lo:k_hi]  # [..., bq, bk]
                allowed = tile if allowed is None else tile & allowed
                if not allowed.any():
                    continue
            s_t = k[..., k_lo:k_hi, :] @ q_t  # S_ij^T = K_j Q_i^T  [..., bk, bq]
            if allowed is not None:
                s_t = np.where(np.swapaxes(allowed, -1, -2), s_t, -np.inf)
            m_new = np.maximum(m, s_t.max(axis=-2, keepdims=True))  # [..., 1, bq]
            # a row that has seen only forbidden keys keeps m = -inf; shift it by 0 instead
            m_shift = m_new if allowed is None else np.where(m_new == -np.inf, 0.0, m_new)
            p_t = np.exp(np.subtract(s_t, m_shift, out=s_t), out=s_t)  # P_ij^T  [..., bk, bq]
            rescale = np.exp(m - m_shift)  # exp(m - m_new)  [..., 1, bq]
            l = rescale * l + p_t.sum(axis=-2, keepdims=True)  # [..., 1, bq]
            acc = np.swapaxes(rescale, -1, -2) * acc + np.swapaxes(p_t, -1, -2) @ v[..., k_lo:k_hi, :]
            m = m_new
        return acc, m, l
