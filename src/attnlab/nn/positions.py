"""Position information for the engine: sinusoidal and learned tables, RoPE and ALiBi.

The same conventions as :mod:`attnlab.ref.positions`: RoPE rotates interleaved feature pairs
``(x_{2i}, x_{2i+1})`` or, with ``layout="half"``, the pairs ``(x_i, x_{i+d/2})``; ALiBi biases
are aligned to the lower right (queries are the last positions).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnlab._checks import choice, memory_bytes, non_negative_int, positive_int
from attnlab.nn.config import ROPE_LAYOUTS
from attnlab.nn.rope_scaling import rope_frequencies


def _check_range(
    name: str, offset: int, t: int, max_len: int, x: torch.Tensor | None = None, d: int | None = None
) -> None:
    if x is not None and x.shape[-1] != d:
        raise ValueError(f"{name}: x must be [B, T, d={d}], got {list(x.shape)}")
    if offset < 0 or offset + t > max_len:
        raise ValueError(
            f"{name}: positions {offset}..{offset + t - 1} exceed max_len={max_len} "
            f"(sequence of length {t} at offset {offset})"
        )


def _check_table(what: str, n_elements: int, itemsize: int) -> None:
    """Refuse, before allocating, a table of ``n_elements`` taking ``itemsize`` bytes each (with its
    temporaries) beyond half of this machine's memory: a ``ValueError`` naming ``what`` and the GiB.
    Nothing is refused on the ``meta`` device, where a model is only counted."""

    if torch.get_default_device().type == "meta":
        return
    need, have = n_elements * itemsize, memory_bytes()
    if need > have // 2:
        raise ValueError(
            f"{what} would need {need / 2**30:,.1f} GiB; this machine has {have / 2**30:,.1f} GiB"
        )


def sinusoidal_positions(max_len: int, d: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)): ``[max_len, d]``
    float64 (odd ``d`` drops the last cosine). Sizes are checked before anything is allocated."""
    max_len, d = positive_int("max_len", max_len), positive_int("d", d)
    _check_table(f"sinusoidal_positions({max_len}, {d})", max_len * d, 24)  # table, angles, float32 copy
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # [max_len, 1]
    two_i = torch.arange(0, d, 2, dtype=torch.float64)[None, :]  # [1, ceil(d/2)]
    angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), two_i / d)  # [max_len, ceil(d/2)]
    pe = torch.zeros(max_len, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d // 2])
    return pe


class SinusoidalPositions(nn.Module):
    """Fixed sinusoidal encodings added to the embeddings: ``x + PE[offset : offset + T]``.

    The table is a non-persistent float32 buffer (not saved: it is a function of ``max_len`` and
    ``d``); float64 inputs get rows computed afresh in float64, so float64 models stay exact.
    """

    def __init__(self, max_len: int, d: int):
        super().__init__()
        self.max_len = positive_int("SinusoidalPositions.max_len", max_len)
        self.d = positive_int("SinusoidalPositions.d", d)
        self.register_buffer("pe", sinusoidal_positions(max_len, d).float(), persistent=False)  # [max_len, d]

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``x [B, T, d] -> x + PE[offset:offset+T] [B, T, d]``; positions beyond ``max_len`` raise."""
        t = x.shape[-2]
        _check_range("SinusoidalPositions", offset, t, self.max_len, x, self.d)
        if x.dtype == torch.float64:
            return x + sinusoidal_positions(offset + t, self.d)[offset:].to(x.device)  # [B, T, d]
        return x + self.pe[offset : offset + t].to(x.dtype)  # [B, T, d]


class LearnedPositions(nn.Module):
    """Learned absolute positions (GPT-2 style): ``x + P[offset : offset + T]``, ``P [max_len, d]``."""

    def __init__(self, max_len: int, d: int):
        super().__init__()
        self.max_len = positive_int("LearnedPositions.max_len", max_len)
        self.d = positive_int("LearnedPositions.d", d)
        _check_table(f"LearnedPositions({max_len}, {d})", max_len * d, 8)  # randn and its scaled copy
        self.weight = nn.Parameter(torch.randn(max_len, d) * 0.02)  # [max_len, d]

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``x [B, T, d] -> x + P[offset:offset+T] [B, T, d]``; positions beyond ``max_len`` raise."""
        t = x.shape[-2]
        _check_range("LearnedPositions", offset, t, self.max_len, x, self.weight.shape[-1])
        return x + self.weight[offset : offset + t]  # [B, T, d]


def rope_cos_sin(
    positions: torch.Tensor,
    d: int,
    base: float = 10000.0,
    dtype=torch.float32,
    *,
    scaling: dict | None = None,
    seq_len: int | None = None,
):
    """cos and sin of theta_{p,i} = p * w_i for each position p and pair i, times the attention factor.

    ``w_i = base^(-2i/d)`` after ``scaling`` (:func:`attnlab.nn.rope_frequencies`); the attention
    factor is 1 except for YaRN, whose factor multiplies both (so the logits by its square).

    Args:
        positions: ``[T]`` integer positions. d: even feature width of one head.
        scaling: a Hugging Face ``rope_scaling`` dict or ``None``. seq_len: the current length for
            dynamic NTK (default ``max(positions) + 1``).
    Returns:
        ``(cos, sin)``, each ``[T, d/2]`` in ``dtype`` (computed in float64, except on Apple's MPS,
        which has no float64).
    """
    if seq_len is None and scaling is not None and positions.numel():
        seq_len = int(positions.max()) + 1
    inv_freq, factor = rope_frequencies(d, base, scaling, seq_len=seq_len, device=positions.device)  # [d/2]
    ang = positions.to(inv_freq.dtype)[:, None] * inv_freq[None, :]  # [T, d/2]
    if factor != 1.0:
        return (ang.cos() * factor).to(dtype), (ang.sin() * factor).to(dtype)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def apply_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str = "interleaved"
) -> torch.Tensor:
    """Rotate each feature pair (a, b) by theta: [a cos - b sin, a sin + b cos].

    ``layout="interleaved"`` pairs features (2i, 2i+1) (RoFormer); ``"half"`` pairs (i, i + d/2),
    the rotate-half layout of Hugging Face Llama checkpoints. Pair i turns by angle theta_{p,i}
    either way, so the two layouts are the same rotation on permuted features.

    Args:
        x: ``[..., T, d]`` (queries or keys, any number of heads). cos, sin: ``[T, d/2]``.
        layout: ``"interleaved"`` or ``"half"``.
    Returns:
        ``[..., T, d]``.
    """
    if layout == "half":
        a, b = x.chunk(2, dim=-1)  # [..., T, d/2] each: features i and i + d/2
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)  # [..., T, d]
    choice("layout", layout, ROPE_LAYOUTS)
    a, b = x[..., 0::2], x[..., 1::2]  # [..., T, d/2] each
    rotated = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)  # [..., T, d/2, 2]
    return rotated.flatten(-2)  # [..., T, d]


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi slopes m_h: 2^(-8/n), 2^(-16/n), ... for n a power of two; otherwise the closest power
    of two's slopes plus every other slope of the next (Press et al.). Returns ``[num_heads]`` float64."""

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (k + 1) for k in range(n)]

    positive_int("num_heads", num_heads)  # not log2's error
    n = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = power_of_two(n)
    if n < num_heads:
        slopes += power_of_two(2 * n)[0::2][: num_heads - n]
    return torch.tensor(slopes, dtype=torch.float64)


def alibi_bias(
    num_heads: int, t_q: int, t_k: int | None = None, *, device=None, dtype=torch.float32
) -> torch.Tensor:
    """ALiBi bias ``-m_h |p_i - j|`` with query ``i`` at absolute position ``p_i = t_k - t_q + i``.

    Returns:
        ``[num_heads, t_q, t_k]``.
    """
    t_q = non_negative_int("t_q", t_q)
    t_k = t_q if t_k is None else non_negative_int("t_k", t_k)
    _check_table(
        f"alibi_bias({num_heads}, {t_q}, {t_k})", positive_int("num_heads", num_heads) * t_q * t_k, 28
    )
    p = torch.arange(t_q)[:, None] + (t_k - t_q)  # [t_q, 1]
    dist = (p - torch.arange(t_k)[None, :]).abs().to(torch.float64)  # [t_q, t_k]
    bias = -alibi_slopes(num_heads)[:, None, None] * dist[None]  # [h, t_q, t_k], float64 on the CPU
    return bias.to(dtype=dtype).to(device)  # (cast first: some devices have no float64)
