"""Attention without the T x T softmax: linear attention and a selective state-space scan.

Both are written here in their most literal form, the one a textbook prints, so that the fast
forms in :mod:`attnlab.nn.linear` (prefix sums, chunked scans, recurrent steps) are checked against
a different computation:

- :func:`linear_attention` builds the full ``[T_q, T_k]`` matrix of feature-map similarities
  ``phi(Q) phi(K)^T`` (quadratic, on purpose) and normalises its rows;
- :func:`selective_scan` runs the recurrence one time step at a time.
"""

from __future__ import annotations

import numpy as np

from attnlab.ref._checks import as_float, check_linear
from attnlab.ref.masks import causal_mask


def elu_feature_map(x: np.ndarray) -> np.ndarray:
    """phi(x) = elu(x) + 1 (Katharopoulos et al. 2020, eq. 7): ``x + 1`` for ``x > 0``, ``exp(x)``
    otherwise; strictly positive, so every normaliser below is > 0. ``x [...]`` -> ``[...]`` (same shape)."""
    x = as_float("x", x)
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention(q, k, v, *, causal: bool = False) -> np.ndarray:
    """Linear attention (Katharopoulos et al. 2020), in the quadratic textbook form::

        A = phi(Q) phi(K)^T  (.* M when causal)        Z_i = sum_j A_ij V_j / sum_j A_ij

    with phi = elu + 1 and M the lower-right causal mask. Softmax's ``exp(q.k)`` is replaced by the
    kernel ``phi(q).phi(k)``; no ``1 / sqrt(d)`` scale (it would only rescale phi's argument).

    Args:
        q: ``[..., T_q, d]``. k: ``[..., T_k, d]``. v: ``[..., T_k, d_v]`` (leading dims broadcast).
        causal: query ``i`` sees keys ``0 .. T_k - T_q + i`` (needs ``T_k >= T_q``).
    Returns:
        ``Z [..., T_q, d_v]``.
    """
    q, k, v = check_linear(q, k, v, causal)
    t_q, t_k = q.shape[-2], k.shape[-2]
    # exp(x) underflows to 0 far below 0 (q - 400: every product 0, Z = 0/0). Z is unchanged when a
    # row of phi(Q) or all of phi(K) is divided by a constant, and phi(x) / exp(m) = phi(x - m) when
    # every x <= m < 0: each row of Q, and K as a whole, is shifted up to a largest entry of 0.
    fq = elu_feature_map(q - np.minimum(q.max(axis=-1, keepdims=True), 0.0))  # [..., T_q, d]
    fk = elu_feature_map(k - np.minimum(k.max(axis=(-2, -1), keepdims=True), 0.0))  # [..., T_k, d]
    a = fq @ np.swapaxes(fk, -1, -2)  # phi(Q) phi(K)^T  [..., T_q, T_k]
    if causal:
        a = a * causal_mask(t_q, t_k)  # [T_q, T_k], lower right
    return (a @ v) / a.sum(axis=-1, keepdims=True)  # [..., T_q, d_v]


def _check_scan(x, delta, A, B, C, D):
    x = as_float("x", x, ndim=3)
    b, t, d = x.shape
    delta = as_float("delta", delta, ndim=3)
    if delta.shape != x.shape:
        raise ValueError(f"delta must have x's shape [B, T, d] = {list(x.shape)}, got {list(delta.shape)}")
    if np.any(delta <= 0):
        raise ValueError("delta must be > 0 everywhere (a step size; Mamba uses softplus(.) > 0)")
    A = as_float("A", A, ndim=2)
    if A.shape[0] != d:
        raise ValueError(f"A must be [d, n] with d={d} (x {list(x.shape)}), got {list(A.shape)}")
    if np.any(A > 0):
        raise ValueError(
            "A must be <= 0 everywhere (a decay; Mamba uses A = -exp(A_log)), got a positive entry"
        )
    n = A.shape[1]
    B = as_float("B", B, ndim=3)
    C = as_float("C", C, ndim=3)
    for name, m in (("B", B), ("C", C)):
        if m.shape != (b, t, n):
            raise ValueError(
                f"{name} must be [B, T, n] = {[b, t, n]} (x {list(x.shape)}, A {list(A.shape)}), "
                f"got {list(m.shape)}"
            )
    if D is not None:
        D = as_float("D", D, ndim=1)
        if D.shape != (d,):
            raise ValueError(f"D must be [d] = [{d}], got {list(D.shape)}")
    return x, delta, A, B, C, D


def selective_scan(x, delta, A, B, C, D=None) -> np.ndarray:
    """The selective state-space recurrence (Mamba's core, Gu & Dao 2023), one step at a time::

        h_t = exp(delta_t A) * h_{t-1} + (delta_t B_t) x_t        h_0 = 0
        y_t = C_t . h_t  (+ D * x_t)

    per channel ``c`` with a state of ``n`` numbers: ``h_t[c] = exp(delta_t[c] A[c]) * h_{t-1}[c] +
    delta_t[c] B_t x_t[c]`` (elementwise over ``n``), ``y_t[c] = sum_n C_t[n] h_t[c, n]``. The step
    size ``delta`` and ``B``, ``C`` depend on the input (selective); ``A <= 0`` is a per-channel decay.

    Args:
        x: ``[B, T, d]``. delta: ``[B, T, d]``, > 0. A: ``[d, n]``, <= 0. B, C: ``[B, T, n]``.
        D: ``[d]`` skip connection or None.
    Returns:
        ``y [B, T, d]``.
    """
    x, delta, A, B, C, D = _check_scan(x, delta, A, B, C, D)
    b, t, d = x.shape
    h = np.zeros((b, d, A.shape[1]))  # the state  [B, d, n]
    y = np.zeros_like(x)  # [B, T, d]
    for s in range(t):
        dt = delta[:, s, :, None]  # [B, d, 1]
        h = np.exp(dt * A) * h + dt * B[:, s, None, :] * x[:, s, :, None]  # [B, d, n]
        y[:, s] = (h * C[:, s, None, :]).sum(axis=-1)  # [B, d]
    if D is not None:
        y = y + D * x
    return y
