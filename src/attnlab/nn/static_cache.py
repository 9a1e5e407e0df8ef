"""A preallocated KV cache: keys and values written in place into buffers sized once.

:class:`~attnlab.nn.KVCache` concatenates each new position onto the cached ones, so step t of a
generation copies all t cached keys and values again (``torch.cat`` allocates ``[B, h_kv, t + 1,
d_k]``): O(T^2) bytes moved over a generation of T tokens, and one allocation per layer per step.
:class:`StaticKVCache` allocates ``[B, h_kv, capacity, d_k]`` once (``capacity``: the prompt plus
the tokens to generate, when the caller knows them) and writes position t into slot t, so a step
moves only the new ``2 · h_kv · d_k`` values per layer; ``k``/``v`` are views of the filled slots.
When a generation outgrows the buffer it doubles (amortised O(1) copies per position).
"""

from __future__ import annotations

import torch

from attnlab._checks import positive_int
from attnlab.nn.multihead import KVCache


class StaticKVCache(KVCache):
    """A :class:`KVCache` whose keys and values live in preallocated buffers
    ``[B, h_kv, capacity, d_k]``; ``k``/``v`` are the views ``[B, h_kv, length, d_k]`` of the slots
    written so far, so every reader of a :class:`KVCache` reads this one the same way.

    Args:
        capacity: positions to allocate at the first append (at least the first append's length;
            grows by doubling, up to ``limit``, when a later append would overflow it).
        limit: most positions it may ever hold (the model's ``max_len``); ``None`` for no limit.
    """

    def __init__(self, capacity: int, limit: int | None = None):
        super().__init__()
        self.capacity = positive_int("capacity", capacity)
        self.limit = None if limit is None else positive_int("limit", limit)
        self._k: torch.Tensor | None = None  # [B, h_kv, capacity, d_k]
        self._v: torch.Tensor | None = None
        self.filled = 0

    # KVCache stores k and v as attributes; here they are views of the filled slots
    @property
    def k(self) -> torch.Tensor | None:
        return None if self._k is None else self._k[:, :, : self.filled]  # [B, h_kv, length, d_k]

    @k.setter
    def k(self, value) -> None:
        if value is not None:
            raise ValueError("StaticKVCache.k is written through append(), not assigned")

    @property
    def v(self) -> torch.Tensor | None:
        return None if self._v is None else self._v[:, :, : self.filled]  # [B, h_kv, length, d_v]

    @v.setter
    def v(self, value) -> None:
        if value is not None:
            raise ValueError("StaticKVCache.v is written through append(), not assigned")

    @property
    def length(self) -> int:
        """Number of cached positions."""
        return self.filled

    @property
    def nbytes(self) -> int:
        """Bytes allocated for keys and values (the whole capacity, filled or not)."""
        if self._k is None:
            return 0
        return self._k.numel() * self._k.element_size() + self._v.numel() * self._v.element_size()

    def _grow(self, need: int) -> None:
        """Reallocate to hold ``need`` positions: double the capacity (at most ``limit``)."""
        if self.limit is not None and need > self.limit:
            raise ValueError(f"the cache would hold {need} positions, more than its limit of {self.limit}")
        size = max(need, 2 * self.capacity)
        size = size if self.limit is None else min(size, self.limit)
        k, v = self._k, self._v
        shape = (k.shape[0], k.shape[1], size, k.shape[3])  # [B, h_kv, size, d_k]
        self._k, self._v = k.new_zeros(shape), v.new_zeros(shape[:3] + (v.shape[3],))
        self._k[:, :, : self.filled] = k[:, :, : self.filled]
        self._v[:, :, : self.filled] = v[:, :, : self.filled]
        self.capacity = size

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``k, v [B, h_kv, T_new, d]`` into the next slots; return views of every filled slot
        ``[B, h_kv, T_cache + T_new, d]``."""
        b, h_kv, t_new, _ = k.shape
        if self._k is None:
            cap = max(self.capacity, t_new)
            # zeros, not empty: a reader of the whole buffer (the compiled step) masks the unfilled
            # slots, and a masked weight of 0 times an uninitialised NaN would still be NaN
            self._k = k.new_zeros(b, h_kv, cap, k.shape[3])  # [B, h_kv, capacity, d_k]
            self._v = v.new_zeros(b, h_kv, cap, v.shape[3])  # [B, h_kv, capacity, d_v]
            self.capacity = cap
        elif b != self._k.shape[0]:
            raise ValueError(f"cache holds batch {self._k.shape[0]} but k has batch {b}")
        end = self.filled + t_new
        if end > self.capacity:
            self._grow(end)
        self._k[:, :, self.filled : end] = k
        self._v[:, :, self.filled : end] = v
        self.filled = end
        return self.k, self.v

    def reorder(self, index: torch.Tensor) -> StaticKVCache:
        """Keep batch rows ``index [B']`` (beam search); in place, returns ``self``."""
        if self._k is not None:
            self._k = self._k.index_select(0, index)
            self._v = self._v.index_select(0, index)
        return self
