"""RollingKVCache: at most W positions held, every position counted, the returned keys are the held
ones then the new ones (what a lower-right window mask needs), batch reordering kept."""

from __future__ import annotations

import pytest
import torch

from attnlab.nn.multihead import KVCache
from attnlab.nn.rolling_cache import RollingKVCache


def _kv(t: int, start: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys whose last entry is the position they belong to: ``[2, 3, t, 4]``."""
    pos = torch.arange(start, start + t, dtype=torch.float32)[None, None, :, None].expand(2, 3, t, 4)
    return pos.clone(), -pos.clone()


def test_holds_the_last_window_positions_and_counts_them_all():
    cache, plain = RollingKVCache(5), KVCache()
    k, v = _kv(7, 0)  # a prompt longer than the window
    got_k, got_v = cache.append(k, v)
    assert torch.equal(got_k, k) and torch.equal(got_v, v)  # the prompt attends over itself
    assert (cache.length, cache.held) == (7, 5)
    assert cache.k[0, 0, :, 0].tolist() == [2, 3, 4, 5, 6]
    plain.append(k, v)
    for step in range(7, 20):
        k1, v1 = _kv(1, step)
        got_k, _ = cache.append(k1, v1)
        full_k, _ = plain.append(k1, v1)
        assert torch.equal(got_k, full_k[..., -6:, :])  # the 5 held + the new one: every key it may read
        assert cache.held == 5 and cache.length == step + 1
        assert cache.k[0, 0, :, 0].tolist() == list(range(step - 4, step + 1))
    assert cache.nbytes == 2 * cache.k.numel() * 4 == 2 * 2 * 3 * 5 * 4 * 4


def test_reorder_and_bad_input():
    cache = RollingKVCache(3)
    k, v = _kv(4, 0)
    k[1] += 100.0
    cache.append(k, v)
    cache.reorder(torch.tensor([1, 1, 0]))
    assert cache.k.shape[0] == 3 and cache.k[0, 0, 0, 0] == 101.0
    with pytest.raises(ValueError, match=r"^cache\b.*\bbatch 3\b.*\bk\b.*\bbatch 2$"):
        cache.append(*_kv(1, 4))
    with pytest.raises(ValueError, match=r"^window\b.*\bpositive\b.*, got 0$"):
        RollingKVCache(0)
