"""Position information: sinusoidal encodings, rotary embeddings (RoPE) and ALiBi biases.

Without positions (or an order-dependent mask) self-attention is permutation-equivariant: it
cannot tell word order from content alone.
"""

from __future__ import annotations

import numpy as np

from attnlab.ref._checks import as_float, check_fits, positive_int
from attnlab.ref.rope_scaling import rope_frequencies


def sinusoidal_positions(t: int, d: int) -> np.ndarray:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).

    Args:
        t: number of positions. d: model width (odd widths drop the last cosine).
    Returns:
        ``[t, d]`` float64; fixed, no learned parameters.
    """
    t, d = positive_int("t", t), positive_int("d", d)
    check_fits(f"sinusoidal_positions({t}, {d})", t * d, 8)
    pos = np.arange(t, dtype=np.float64)[:, None]  # [t, 1]
    two_i = np.arange(0, d, 2, dtype=np.float64)[None, :]  # [1, ceil(d/2)]
    angle = pos / np.power(10000.0, two_i / d)  # [t, ceil(d/2)]
    pe = np.zeros((t, d))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : d // 2])
    return pe


def rope_angles(
    positions, d: int, base: float = 10000.0, *, scaling: dict | None = None, seq_len: int | None = None
) -> np.ndarray:
    """theta_{p,i} = p * w_i for each position p and pair i: ``[T, d/2]``, with ``w_i = base^(-2i/d)``
    after ``scaling`` (:func:`attnlab.ref.rope_frequencies`; its attention factor is not applied here)."""
    positions = np.asarray(positions, dtype=np.float64)
    inv_freq, _ = rope_frequencies(d, base, scaling, seq_len=seq_len)  # [d/2]
    return positions[:, None] * inv_freq[None, :]  # [T, d/2]


def apply_rope(
    x,
    positions,
    base: float = 10000.0,
    layout: str = "interleaved",
    *,
    scaling: dict | None = None,
    seq_len: int | None = None,
) -> np.ndarray:
    """Rotate each pair of features (a, b) by the angle theta = p * w_i, w_i = base^(-2i/d).

    [a', b'] = [a cos theta - b sin theta, a sin theta + b cos theta]

    ``layout="interleaved"``: pair i is (x_{2i}, x_{2i+1}), the convention of RoFormer;
    ``layout="half"``: pair i is (x_i, x_{i+d/2}), the rotate-half layout of Hugging Face Llama
    checkpoints. Rotations compose, so the dot product of a rotated query at position m and a
    rotated key at position n depends only on m - n (in either layout).

    Args:
        x: ``[..., T, d]`` with ``d`` even (queries or keys of one or more heads).
        positions: ``[T]`` integer positions. layout: ``"interleaved"`` or ``"half"``.
        scaling: a RoPE scaling dict (:func:`attnlab.ref.rope_frequencies`): it changes ``w_i``, and
            YaRN multiplies the result by its attention factor. seq_len: the current length for
            dynamic NTK (default ``max(positions) + 1``).
    Returns:
        ``[..., T, d]``, same dtype as ``x``.
    """
    x = as_float("x", x, min_ndim=2)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"apply_rope needs an even feature width, got d={d} (x {list(x.shape)})")
    if layout not in ("interleaved", "half"):
        raise ValueError(f"layout must be one of ['interleaved', 'half'], got {layout!r}")
    positions = np.asarray(positions)
    if positions.dtype == bool or not np.issubdtype(positions.dtype, np.number):
        raise ValueError(f"positions must be numbers, got dtype {positions.dtype}")
    if not np.all(np.isfinite(positions)):
        raise ValueError("positions contains NaN or infinite values")
    if positions.shape != (x.shape[-2],):
        raise ValueError(f"positions has shape {list(positions.shape)} but x has T={x.shape[-2]}")
    if seq_len is None and positions.size:  # the length that reaches the last position (at least 1:
        seq_len = max(int(positions.max()) + 1, 1)  # negative positions are valid relative offsets)
    inv_freq, factor = rope_frequencies(d, base, scaling, seq_len=seq_len)  # [d/2]
    ang = positions.astype(np.float64)[:, None] * inv_freq[None, :]  # [T, d/2]
    cos = (np.cos(ang) * factor).astype(x.dtype)  # [T, d/2], x's precision
    sin = (np.sin(ang) * factor).astype(x.dtype)  # [T, d/2]
    first, second = (
        (slice(0, d // 2), slice(d // 2, d)) if layout == "half" else (slice(0, d, 2), slice(1, d, 2))
    )
    a, b = x[..., first], x[..., second]  # [..., T, d/2] each: the two features of every pair
    out = np.empty_like(x)
    out[..., first] = a * cos - b * sin
    out[..., second] = a * sin + b * cos
    return out


def alibi_slopes(num_heads: int) -> np.ndarray:
    """ALiBi head slopes m_h: the geometric sequence 2^(-8/n), 2^(-16/n), ... for n a power of two;
    otherwise the closest power of two's slopes plus every other slope of the next one (Press et al.).

    Returns:
        ``[num_heads]`` float64.
    """
    num_heads = positive_int("num_heads", num_heads)
    check_fits(f"alibi_slopes({num_heads})", 3 * num_heads, 8)  # the Python list is ~3x the array

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (k + 1) for k in range(n)]

    n = 2 ** int(np.floor(np.log2(num_heads)))
    slopes = power_of_two(n)
    if n < num_heads:
        slopes += power_of_two(2 * n)[0::2][: num_heads - n]
    return np.asarray(slopes)


def alibi_bias(num_heads: int, t_q: int, t_k: int | None = None) -> np.ndarray:
    """ALiBi bias ``-m_h * |p_i - j|`` added to the scores; queries aligned to the lower right.

    Query ``i`` sits at absolute position ``p_i = t_k - t_q + i``; with a causal mask only
    ``j <= p_i`` survives, giving the paper's ``-m_h (p_i - j)``.

    Returns:
        ``[num_heads, t_q, t_k]`` float64 (0 on the diagonal, more negative with distance).
    """
    t_q = positive_int("t_q", t_q)
    t_k = t_q if t_k is None else positive_int("t_k", t_k)
    check_fits(f"alibi_bias({num_heads}, {t_q}, {t_k})", positive_int("num_heads", num_heads) * t_q * t_k, 8)
    p = np.arange(t_q)[:, None] + (t_k - t_q)  # [t_q, 1]
    dist = np.abs(p - np.arange(t_k)[None, :]).astype(np.float64)  # [t_q, t_k]
    return -alibi_slopes(num_heads)[:, None, None] * dist[None]  # [h, t_q, t_k]
