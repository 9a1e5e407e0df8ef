"""Peak bytes of the tensors a PyTorch call allocates on the CPU (PyTorch keeps no CPU allocator stats).

A ``TorchDispatchMode`` sees every tensor each ATen operation returns. A storage is counted the
first time it appears (unless it aliases an argument of the operation: views and in-place results
allocate nothing) and uncounted once it is freed (its ``StorageWeakRef`` has expired); the
peak of that running sum is the call's extra memory. Inputs existing before the call never appear
as outputs, so they are not counted. Scratch buffers private to a fused kernel are not visible.
"""

from __future__ import annotations

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LiveBytes(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.live: dict[int, tuple[StorageWeakRef, int]] = {}
        self.current = 0
        self.peak = 0

    def _sweep(self) -> None:
        dead = [key for key, (ref, _) in self.live.items() if ref.expired()]
        for key in dead:
            self.current -= self.live.pop(key)[1]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self._sweep()
        inputs = {
            a.untyped_storage().data_ptr()
            for a in tree_flatten((args, kwargs))[0]
            if isinstance(a, torch.Tensor)
        }
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type == "cpu":
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if key in inputs:  # a view of, or an in-place result on, an argument: nothing new
                    continue
                if key in self.live and not self.live[key][0].expired():
                    continue
                self.live[key] = (StorageWeakRef(storage), storage.nbytes())
                self.current += storage.nbytes()
        self.peak = max(self.peak, self.current)
        return out


def extra_peak_bytes(fn) -> int:
    """Peak bytes of tensors allocated while ``fn()`` runs (its result included)."""
    with LiveBytes() as mode:
        result = fn()
        del result
    return mode.peak
