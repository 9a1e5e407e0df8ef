"""The KV cache of a sliding-window layer: a rolling buffer of the last W positions.

With a causal sliding window of W keys (Mistral: query p reads keys p - W < j <= p), a key that
has fallen out of the window is never read again, so decoding needs only the last W positions'
keys and values per layer: ``2 · L · h_kv · d_k · W`` values however long the text grows (what
``attnlab audit cost --window W`` calls the cache). :class:`RollingKVCache` keeps exactly those.
"""

from __future__ import annotations

import torch

from attnlab._checks import positive_int
from attnlab.nn.multihead import KVCache


class RollingKVCache(KVCache):
    """A :class:`KVCache` that holds the keys and values of at most ``window`` positions.

    ``append(k, v)`` returns the held positions followed by the new ones (every key the new
    queries may need; the layer's lower-right window mask picks each query's W), then keeps only
    the last ``window``. ``length`` counts every position seen (the next position, from which RoPE
    takes its angles); ``held`` is how many are kept, ``min(length, window)``.
    """

    def __init__(self, window: int):
        super().__init__()
        self.window = positive_int("window", window)
        self.seen = 0

    @property
    def length(self) -> int:
        """Positions seen so far (not the number held: see :attr:`held`)."""
        return self.seen

    @property
    def held(self) -> int:
        """Positions whose keys and values are kept: ``min(length, window)``."""
        return 0 if self.k is None else self.k.shape[-2]

    @property
    def nbytes(self) -> int:
        """Bytes of the kept keys and values."""
        return 0 if self.k is None else self.k.numel() * self.k.element_size() * 2

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add ``k, v [B, h_kv, T_new, d]``; return ``[B, h_kv, held + T_new, d]`` and keep the last W."""
        if self.k is not None:
            if k.shape[0] != self.k.shape[0]:
                raise ValueError(f"cache holds batch {self.k.shape[0]} but k has batch {k.shape[0]}")
            k = torch.cat([self.k, k], dim=-2)  # [B, h_kv, held + T_new, d_k]
            v = torch.cat([self.v, v], dim=-2)  # [B, h_kv, held + T_new, d_v]
        self.seen += k.shape[-2] - self.held
        self.k, self.v = k[..., -self.window :, :], v[..., -self.window :, :]  # [B, h_kv, <= W, d]
        return k, v
