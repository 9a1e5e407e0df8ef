"""StaticKVCache: the same keys and values as the concatenating KVCache, written in place into
buffers allocated once; growth by doubling up to its limit; reorder; named errors."""

from __future__ import annotations

import pytest
import torch

from attnlab.nn import KVCache
from attnlab.nn.static_cache import StaticKVCache


def _kv(t: int, seed: int, b: int = 2):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, 3, t, 4, generator=g), torch.randn(b, 3, t, 5, generator=g)  # d_v != d_k


def test_holds_what_the_concatenating_cache_holds():
    static, concat = StaticKVCache(capacity=8), KVCache()
    buffer = None
    for seed, t in enumerate([5, 1, 1, 1]):
        k, v = _kv(t, seed)
        got, want = static.append(k, v), concat.append(k, v)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        if buffer is None:
            buffer = static._k.data_ptr()
        assert static._k.data_ptr() == buffer, "8 positions fit: no reallocation"
    assert static.length == concat.length == 8
    assert static.nbytes == 2 * 3 * 8 * (4 + 5) * 4


def test_grows_by_doubling_up_to_the_limit_and_refuses_beyond():
    cache = StaticKVCache(capacity=3, limit=10)
    k, v = _kv(3, 0)
    cache.append(k, v)
    for seed in range(1, 8):  # 3 + 7 = 10 positions
        cache.append(*_kv(1, seed))
    assert cache.length == 10 and cache.capacity == 10  # 3 -> 6 -> 10 (12 capped at the limit)
    assert torch.equal(cache.k[:, :, :3], k)
    with pytest.raises(ValueError, match=r"\b11 positions\b.*\blimit\b.* 10$"):
        cache.append(*_kv(1, 9))


def test_reorder_keeps_rows_and_batch_mismatch_is_named():
    cache = StaticKVCache(capacity=4)
    k, v = _kv(2, 0, b=3)
    cache.append(k, v)
    cache.reorder(torch.tensor([2, 2, 0]))
    assert torch.equal(cache.k, k[[2, 2, 0]]) and torch.equal(cache.v, v[[2, 2, 0]])
    with pytest.raises(ValueError, match=r"^cache\b.*\bbatch 3\b.*\bk\b.*\bbatch 2$"):
        cache.append(*_kv(1, 1, b=2))


def test_bad_arguments():
    with pytest.raises(ValueError, match="capacity"):
        StaticKVCache(capacity=0)
    with pytest.raises(ValueError, match="written through append"):
        StaticKVCache(capacity=2).k = torch.zeros(1)
