"""Token sequences with repeated random segments: the data of the induction-head detectors and
of the induction experiment.

``repeated_tokens``: ``[BOS, r_1 .. r_L, r_1 .. r_L]``, the standard probe of induction heads (the
second half is predictable only by copying what followed the earlier occurrence). ``segment_batch``:
training sequences of a fixed length ``T`` in which a random segment of random length ``L`` is
repeated right after itself and fresh random tokens fill the rest — the copy's offset changes from
row to row, so no fixed positional head can predict the repeat, only an induction head.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from attnlab._checks import non_negative_int, positive_int


def _draw(batch: int, length: int, low: int, high: int, generator: torch.Generator) -> Tensor:
    """``[batch, length]`` tokens in ``low..high-1``, distinct within a row (so a pattern built from
    token equality has no accidental matches)."""
    if length > high - low:
        raise ValueError(f"cannot draw {length} distinct tokens from the {high - low} ids {low}..{high - 1}")
    keys = torch.rand(batch, high - low, generator=generator)  # [batch, n]
    return keys.argsort(dim=1)[:, :length] + low  # [batch, length]


def repeated_tokens(batch: int, length: int, vocab_size: int, *, bos: int = 0, seed: int = 0) -> Tensor:
    """``[batch, 1 + 2 L]`` rows ``[bos, r_1..r_L, r_1..r_L]`` with ``r`` distinct ids other than ``bos``.

    The ids are drawn from ``0..vocab_size-1`` without ``bos``; seeded (same seed, same rows).
    """
    positive_int("batch", batch)
    positive_int("length", length)
    positive_int("vocab_size", vocab_size)
    if not 0 <= non_negative_int("bos", bos) < vocab_size:
        raise ValueError(f"bos must lie in 0..{vocab_size - 1}, got {bos}")
    g = torch.Generator().manual_seed(seed)
    r = _draw(batch, length, 0, vocab_size - 1, g)  # [batch, L] in 0..V-2
    r = r + (r >= bos).long()  # skip bos: ids in 0..V-1 without bos
    first = torch.full((batch, 1), bos, dtype=torch.long)  # [batch, 1]
    return torch.cat([first, r, r], dim=1)  # [batch, 1 + 2L]


@dataclasses.dataclass
class SegmentBatch:
    """Training sequences ``ids [B, T]`` and which next-token targets are first occurrences or
    repeats: ``first [B, T-1]`` / ``repeat [B, T-1]`` are True at the input positions ``t`` whose
    target ``ids[:, t+1]`` lies in the first copy / in the repeat (its first token excluded: it
    cannot be predicted)."""

    ids: Tensor
    first: Tensor
    repeat: Tensor


def segment_batch(
    batch: int, seq_len: int, vocab_size: int, min_len: int, max_len: int, *, generator
) -> SegmentBatch:
    """Rows ``[0, r_1..r_L, r_1..r_L, s_1..]`` of length ``seq_len`` (id 0 is BOS), ``L`` uniform
    in ``min_len..max_len`` per row, ``r`` distinct ids and ``s`` free random ids, all in
    ``1..vocab_size-1``."""
    positive_int("batch", batch)
    positive_int("min_len", min_len)
    if max_len < min_len or 1 + 2 * max_len > seq_len:
        raise ValueError(
            f"need min_len <= max_len and 1 + 2 max_len <= seq_len, got min_len={min_len}, "
            f"max_len={max_len}, seq_len={seq_len}"
        )
    lengths = torch.randint(min_len, max_len + 1, (batch,), generator=generator)  # [B]
    r = _draw(batch, max_len, 1, vocab_size, generator)  # [B, L_max], ids 1..V-1 (bos = 0 below)
    ids = torch.randint(1, vocab_size, (batch, seq_len), generator=generator)  # [B, T]: filler
    pos = torch.arange(seq_len)[None, :]  # [1, T]
    L = lengths[:, None]  # [B, 1]
    in_first = (pos >= 1) & (pos <= L)  # [B, T]
    in_repeat = (pos > L) & (pos <= 2 * L)  # [B, T]
    src = torch.where(in_first, pos - 1, pos - 1 - L).clamp(0, max_len - 1)  # [B, T]: index into r
    ids = torch.where(in_first | in_repeat, r.gather(1, src), ids)
    ids[:, 0] = 0  # BOS
    target = pos[:, 1:]  # [1, T-1]: the position each input position predicts
    return SegmentBatch(
        ids=ids,
        first=(target >= 1) & (target <= L),
        repeat=(target > L + 1) & (target <= 2 * L),
    )
