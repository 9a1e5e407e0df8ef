"""RoPE frequencies with the common context-extension scalings (float64, the reference).

Plain RoPE rotates pair ``i`` of a ``d``-wide head at position ``p`` by ``theta_{p,i} = p * w_i``
with ``w_i = base^(-2i/d)``, ``i = 0 .. d/2 - 1``: wavelength ``lambda_i = 2 pi / w_i`` runs from
``2 pi`` (pair 0) to almost ``2 pi base`` (the last pair). A model trained on ``L`` positions has
seen pair ``i`` turn through ``L / lambda_i`` full rotations: the fast pairs many, the slow pairs
less than one. Each scaling changes ``w_i`` (and YaRN also the attention temperature):

- ``linear`` (position interpolation, Chen et al. 2023): ``w_i / s``, i.e. position ``p`` is read
  as ``p / s``; ``s L`` positions fit in the angles seen for ``L``, but neighbours get ``s`` times
  closer in every pair.
- ``dynamic`` (NTK-aware, "dynamic NTK"): a larger base, ``base' = base (s T / L - (s - 1))^(d/(d-2))``
  for the current length ``T >= L`` (``T <= L``: unchanged): the fastest pair is untouched, the
  slowest is divided by about ``s T / L - s + 1``, and it grows with ``T`` as it needs to.
- ``yarn`` (Peng et al. 2023): per pair, interpolate (``w_i / s``) the pairs that turn fewer than
  ``beta_slow`` times in ``L``, keep (extrapolate) those that turn more than ``beta_fast`` times,
  and ramp linearly between; multiply cos and sin by ``attention_factor = 0.1 ln s + 1`` (so the
  logits by its square: a sharper softmax over the longer context).
- ``llama3`` (Llama 3.1): wavelengths above ``L / low_freq_factor`` are divided by ``s``, those
  below ``L / high_freq_factor`` kept, and in between blended with
  ``g = (L / lambda_i - low) / (high - low)``: ``w_i' = (1 - g) w_i / s + g w_i``.

The scaling dict is validated by :func:`attnlab._rope_config.check_rope_scaling` (its keys and
errors are documented there).
"""

from __future__ import annotations

import math

import numpy as np

from attnlab._checks import positive_float
from attnlab._rope_config import check_head_dim, check_rope_scaling, check_seq_len
from attnlab.ref._checks import check_fits


def _yarn_ramp(d: int, base: float, cfg: dict) -> np.ndarray:
    """YaRN's per-pair interpolation weight ``gamma_i`` in [0, 1] (1 = fully interpolated): ``[d/2]``.

    The pair that turns ``r`` times over ``L`` positions has index
    ``i(r) = d ln(L / (2 pi r)) / (2 ln base)``; the ramp runs from ``i(beta_fast)`` (floor) to
    ``i(beta_slow)`` (ceil), clipped to ``[0, d - 1]``.
    """
    length = cfg["original_max_position_embeddings"]

    def index(rotations: float) -> float:
        return d * math.log(length / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = index(cfg["beta_fast"]), index(cfg["beta_slow"])
    if cfg["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001  # a one-pair ramp would divide by zero
    i = np.arange(d // 2, dtype=np.float64)  # [d/2]
    return np.clip((i - low) / (high - low), 0.0, 1.0)  # [d/2]


def rope_frequencies(
    head_dim: int, base: float = 10000.0, scaling: dict | None = None, *, seq_len: int | None = None
) -> tuple[np.ndarray, float]:
    """RoPE's angular frequencies ``w_i`` after ``scaling`` (see the module docstring for each rule).

    Args:
        head_dim: ``d``, the even width of one head. base: RoPE's base (10000; Llama 3 500000).
        scaling: a Hugging Face ``rope_scaling`` dict or ``None`` (plain RoPE).
        seq_len: the current length ``T`` (dynamic NTK only; ``None`` = its
            ``original_max_position_embeddings``, i.e. no change).
    Returns:
        ``(inv_freq [d/2] float64, attention_factor)``: the angle of pair ``i`` at position ``p`` is
        ``p * inv_freq[i]``; cos and sin are multiplied by ``attention_factor`` (1 except for YaRN).
    """
    cfg = check_rope_scaling(scaling)
    d = check_head_dim(head_dim, cfg)
    check_fits(f"rope_frequencies({d})", 4 * d, 8)  # a few [d/2] float64 arrays
    base = positive_float("base", base)
    seq_len = check_seq_len(seq_len)
    inv_freq = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # [d/2]
    kind = "default" if cfg is None else cfg["rope_type"]
    if kind == "default":
        return inv_freq, 1.0
    s = cfg["factor"]
    if kind == "linear":
        return inv_freq / s, 1.0
    length = cfg["original_max_position_embeddings"]
    if kind == "dynamic":
        t = length if seq_len is None else max(seq_len, length)
        new_base = base * (s * t / length - (s - 1)) ** (d / (d - 2))
        return new_base ** (-np.arange(0, d, 2, dtype=np.float64) / d), 1.0  # [d/2]
    if kind == "yarn":
        gamma = _yarn_ramp(d, base, cfg)  # [d/2], 1 = interpolate
        return inv_freq / s * gamma + inv_freq * (1 - gamma), cfg["attention_factor"]
    # llama3
    low, high = cfg["low_freq_factor"], cfg["high_freq_factor"]
    wavelen = 2 * math.pi / inv_freq  # [d/2]
    g = (length / wavelen - low) / (high - low)  # [d/2]: 0 at lambda = L/low, 1 at lambda = L/high
    blended = (1 - g) * inv_freq / s + g * inv_freq
    out = np.where(wavelen > length / low, inv_freq / s, blended)
    return np.where(wavelen < length / high, inv_freq, out), 1.0
