"""RoPE frequencies with the common scalings, for the engine: the same rules as
:mod:`attnlab.ref.rope_scaling` (where each is explained), written in torch.

``linear`` divides every frequency by ``s``; ``dynamic`` raises the base to
``base (s T / L - s + 1)^(d/(d-2))`` for the current length ``T > L``; ``yarn`` ramps from keeping a
pair to dividing it by ``s`` as its rotations over ``L`` fall from ``beta_fast`` to ``beta_slow``,
and scales cos/sin by its attention factor; ``llama3`` divides long wavelengths by ``s``, keeps
short ones and blends in between.
"""

from __future__ import annotations

import math

import torch

from attnlab._checks import positive_float
from attnlab._rope_config import check_head_dim, check_rope_scaling, check_seq_len


def _pair_exponents(d: int, device) -> torch.Tensor:
    """``2i / d`` for ``i = 0 .. d/2 - 1``: ``[d/2]`` float64 (float32 on MPS, which has no float64)."""
    work = torch.float32 if torch.device(device or "cpu").type == "mps" else torch.float64
    return torch.arange(0, d, 2, dtype=work, device=device) / d  # [d/2]


def rope_frequencies(
    head_dim: int,
    base: float = 10000.0,
    scaling: dict | None = None,
    *,
    seq_len: int | None = None,
    device=None,
) -> tuple[torch.Tensor, float]:
    """``(inv_freq [d/2], attention_factor)``: pair ``i`` at position ``p`` turns by ``p inv_freq[i]``.

    Args: as :func:`attnlab.ref.rope_frequencies` (``seq_len``: dynamic NTK's current length),
    plus ``device``. ``inv_freq`` is float64 (float32 on MPS).
    """
    cfg = check_rope_scaling(scaling)
    d = check_head_dim(head_dim, cfg)
    base = positive_float("base", base)
    seq_len = check_seq_len(seq_len)
    expo = _pair_exponents(d, device)  # [d/2]
    inv_freq = torch.pow(torch.tensor(base, dtype=expo.dtype, device=device), -expo)  # [d/2]
    kind = "default" if cfg is None else cfg["rope_type"]
    if kind == "default":
        return inv_freq, 1.0
    s = cfg["factor"]
    if kind == "linear":
        return inv_freq / s, 1.0
    length = cfg["original_max_position_embeddings"]
    if kind == "dynamic":
        t = length if seq_len is None else max(seq_len, length)
        grown = base * (s * t / length - (s - 1)) ** (d / (d - 2))  # the NTK-aware base for length t
        return torch.pow(torch.tensor(grown, dtype=expo.dtype, device=device), -expo), 1.0
    if kind == "yarn":
        # the pair index that turns r times over L positions: d ln(L / (2 pi r)) / (2 ln base)
        def index(r: float) -> float:
            return d * math.log(length / (r * 2 * math.pi)) / (2 * math.log(base))

        lo, hi = index(cfg["beta_fast"]), index(cfg["beta_slow"])
        if cfg["truncate"]:
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, d - 1)
        hi = hi + 0.001 if lo == hi else hi
        i = torch.arange(d // 2, dtype=expo.dtype, device=device)  # [d/2]
        gamma = ((i - lo) / (hi - lo)).clamp(0.0, 1.0)  # [d/2]: 1 = interpolate (divide by s)
        return torch.lerp(inv_freq, inv_freq / s, gamma), cfg["attention_factor"]
    low, high = cfg["low_freq_factor"], cfg["high_freq_factor"]  # llama3
    wavelen = 2 * math.pi / inv_freq  # [d/2]
    g = ((length / wavelen - low) / (high - low)).clamp(0.0, 1.0)  # [d/2]: 0 long, 1 short wavelengths
    return torch.lerp(inv_freq / s, inv_freq, g), 1.0
