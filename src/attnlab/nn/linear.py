"""Linear attention and the selective state-space scan, in their fast forms; the same ideas as
:mod:`attnlab.ref.linear` (read it first), computed differently so the tests compare two methods.

Linear attention (Katharopoulos et al. 2020), phi = elu + 1::

    non-causal:  Z = phi(Q) (phi(K)^T V) / phi(Q) (phi(K)^T 1)        O(T d d_v), no T x T matrix
    causal:      S_t = S_{t-1} + phi(k_t) v_t^T,  z_t = z_{t-1} + phi(k_t),
                 Z_t = phi(q_t)^T S_t / phi(q_t)^T z_t

The causal parallel form takes the prefix sums of ``phi(K_c)^T V_c`` over chunks of ``chunk``
positions and does the masked quadratic product only inside a chunk; the recurrent form
(:func:`linear_attention_step`) keeps ``(S, z)``: O(1) memory per generated token.

Selective scan (Gu & Dao 2023): ``h_t = exp(delta_t A) h_{t-1} + delta_t B_t x_t``,
``y_t = C_t . h_t + D x_t``. The recurrence ``h_t = a_t h_{t-1} + b_t`` composes over a chunk of
steps into one step ``h_end = (prod a) h_start + e`` (with ``e`` the chunk run from zero), so
:func:`selective_scan` runs all chunks at once from zero, carries the state across chunks, and
runs all chunks again from their true starts; :func:`selective_scan_step` is the one-token
recurrence for generation.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab._checks import linear_attention_shapes, positive_int


def _finite(name: str, t: Tensor, min_ndim: int = 1) -> Tensor:
    if not isinstance(t, Tensor) or not t.is_floating_point():
        raise ValueError(f"{name} must be a floating tensor, got {type(t).__name__}")
    if t.dim() < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {list(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or infinite values (shape {list(t.shape)})")
    return t


def elu_feature_map(x: Tensor) -> Tensor:
    """phi(x) = elu(x) + 1 (Katharopoulos et al. 2020, eq. 7), > 0 everywhere; ``x [...]`` -> ``[...]``."""
    return F.elu(x) + 1.0


def _check_qkv(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        _finite(name, t, min_ndim=2)
    linear_attention_shapes(q.shape, k.shape, v.shape, causal)


def linear_attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, chunk: int = 64) -> Tensor:
    """Linear attention ``phi(Q) (phi(K)^T V) / phi(Q) (phi(K)^T 1)``, phi = elu + 1, in O(T).

    Causal (lower-right aligned: query ``i`` sees keys ``0 .. T_k - T_q + i``): prefix sums of the
    states ``phi(K_c)^T V_c`` of chunks of ``chunk`` positions, plus the masked quadratic product
    inside each chunk (``chunk=1`` is the plain per-token prefix sum). Memory is O(T d d_v / chunk +
    T chunk), never ``[T, T]``. Equals :func:`attnlab.ref.linear_attention` (the quadratic form).

    Args:
        q: ``[..., T_q, d]``. k: ``[..., T_k, d]``. v: ``[..., T_k, d_v]`` (leading dims broadcast).
        causal: see above. chunk: positions per chunk of the causal form.
    Returns:
        ``Z [..., T_q, d_v]``.
    """
    _check_qkv(q, k, v, causal)
    chunk = positive_int("chunk", chunk)
    # phi = exp(x) below 0 underflows to 0 for rows far below it (q - 100 in float32: 0/0): a row of
    # phi(Q) and all of phi(K) may be divided by a constant, and phi(x) / exp(m) = phi(x - m) when
    # every x <= m < 0; so each row of Q, and K as a whole, is shifted up to a largest entry of 0
    fq = elu_feature_map(q - q.amax(dim=-1, keepdim=True).clamp(max=0.0))  # [..., T_q, d]
    fk = elu_feature_map(k - k.amax(dim=(-2, -1), keepdim=True).clamp(max=0.0))  # [..., T_k, d]
    # Z is unchanged by scaling a row of phi(Q), all of phi(K), and V (then Z) by constants: powers of
    # two >= 1 keep the products finite at 1e30 (they overflowed float32: inf / inf = NaN) and leave
    # ordinary inputs bit for bit as they were.
    fq = fq / _scale_down(fq, (-1,))  # [..., T_q, d], each row's max <= 2
    fk = fk / _scale_down(fk, (-2, -1))  # [..., T_k, d]
    sv = _scale_down(v.abs(), (-2, -1))  # [..., 1, 1]
    v = v / sv
    if not causal:
        kv = fk.transpose(-1, -2) @ v  # phi(K)^T V  [..., d, d_v]
        z = fk.sum(dim=-2)  # phi(K)^T 1  [..., d]
        return (fq @ kv) / (fq @ z.unsqueeze(-1)) * sv  # [..., T_q, d_v]
    return _causal(fq, fk, v, chunk) * sv


def _scale_down(t: Tensor, dims: tuple[int, ...]) -> Tensor:
    """A power of two near ``max t`` over ``dims`` (kept as size 1), never below 1."""
    return torch.exp2(torch.floor(torch.log2(t.amax(dim=dims, keepdim=True).clamp(min=1.0))))


def _causal(fq: Tensor, fk: Tensor, v: Tensor, chunk: int) -> Tensor:
    """The causal form of :func:`linear_attention` on the feature maps ``phi(Q) [..., T_q, d]``,
    ``phi(K) [..., T_k, d]`` and ``V [..., T_k, d_v]``: ``Z [..., T_q, d_v]``."""
    t_q, t_k = fq.shape[-2], fk.shape[-2]
    lead = torch.broadcast_shapes(fq.shape[:-2], fk.shape[:-2], v.shape[:-2])
    fq, fk = fq.expand(lead + fq.shape[-2:]), fk.expand(lead + fk.shape[-2:])
    v = v.expand(lead + v.shape[-2:])
    # Keys before the first query are seen by every query: they only start the state.
    past = t_k - t_q
    s0 = fk[..., :past, :].transpose(-1, -2) @ v[..., :past, :]  # [..., d, d_v]
    z0 = fk[..., :past, :].sum(dim=-2)  # [..., d]
    fk, v = fk[..., past:, :], v[..., past:, :]  # [..., T_q, d], [..., T_q, d_v]
    n_c = -(-t_q // chunk)
    pad = n_c * chunk - t_q  # padded positions come last: no real query sees them; phi = 1 there
    # keeps every denominator > 0 (a 0/0 in a dropped row would still poison the gradients)
    d, d_v = fq.shape[-1], v.shape[-1]
    qc = F.pad(fq, (0, 0, 0, pad), value=1.0).reshape(lead + (n_c, chunk, d))  # [..., n_c, L, d]
    kc = F.pad(fk, (0, 0, 0, pad), value=1.0).reshape(lead + (n_c, chunk, d))  # [..., n_c, L, d]
    vc = F.pad(v, (0, 0, 0, pad)).reshape(lead + (n_c, chunk, d_v))  # [..., n_c, L, d_v]
    kv_c = kc.transpose(-1, -2) @ vc  # each chunk's phi(K_c)^T V_c  [..., n_c, d, d_v]
    z_c = kc.sum(dim=-2)  # [..., n_c, d]
    # Exclusive prefix sums: the state S, z left by all earlier chunks.
    s_before = torch.cumsum(torch.cat([s0.unsqueeze(-3), kv_c[..., :-1, :, :]], dim=-3), dim=-3)
    z_before = torch.cumsum(torch.cat([z0.unsqueeze(-2), z_c[..., :-1, :]], dim=-2), dim=-2)
    tril = torch.ones(chunk, chunk, dtype=torch.bool, device=fq.device).tril()  # [L, L]
    a = (qc @ kc.transpose(-1, -2)).masked_fill(~tril, 0.0)  # phi(Q_c) phi(K_c)^T .* M  [..., n_c, L, L]
    num = a @ vc + qc @ s_before  # [..., n_c, L, d_v]
    den = a.sum(dim=-1, keepdim=True) + qc @ z_before.unsqueeze(-1)  # [..., n_c, L, 1]
    out = (num / den).reshape(lead + (n_c * chunk, d_v))  # [..., T_pad, d_v]
    return out[..., :t_q, :]


def linear_attention_step(
    q: Tensor, k: Tensor, v: Tensor, state: tuple[Tensor, Tensor] | None = None
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """One token of causal linear attention, the recurrent form (constant memory per token)::

        S_t = S_{t-1} + phi(k_t) v_t^T      z_t = z_{t-1} + phi(k_t)
        Z_t = phi(q_t)^T S_t / phi(q_t)^T z_t

    Args:
        q, k: ``[..., d]`` (this token). v: ``[..., d_v]``. state: ``(S [..., d, d_v], z [..., d])``
            from the previous step, or None at the first token.
    Returns:
        ``(Z_t [..., d_v], (S_t, z_t))``.
    """
    _finite("q", q)
    _finite("k", k)
    _finite("v", v)
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(f"k has d={k.shape[-1]} but q has d={q.shape[-1]}")
    fq, fk = elu_feature_map(q), elu_feature_map(k)  # [..., d]
    s_new = fk.unsqueeze(-1) * v.unsqueeze(-2)  # phi(k_t) v_t^T  [..., d, d_v]
    if state is None:
        s, z = s_new, fk
    else:
        s, z = state[0] + s_new, state[1] + fk
    out = (fq.unsqueeze(-2) @ s).squeeze(-2) / (fq * z).sum(dim=-1, keepdim=True)  # [..., d_v]
    return out, (s, z)


class LinearAttentionState:
    """Generation state of one linear-attention layer: ``S [B, h, d_k, d_v]`` and ``z [B, h, d_k]`` (the
    sums of :func:`linear_attention_step`), the same size at every position; ``length`` counts the
    positions consumed (RoPE's next position). ``append`` only counts: the layer updates ``S, z``."""

    static = False

    def __init__(self):
        self.s: Tensor | None = None
        self.z: Tensor | None = None
        self.length = 0

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Count the new positions of ``k, v [B, h_kv, T_new, d]`` and return them unchanged."""
        if self.s is not None and k.shape[0] != self.s.shape[0]:
            raise ValueError(f"cache holds batch {self.s.shape[0]} but k has batch {k.shape[0]}")
        self.length += k.shape[-2]
        return k, v

    @property
    def nbytes(self) -> int:
        """Bytes held: constant in the number of positions."""
        return sum(t.numel() * t.element_size() for t in (self.s, self.z) if t is not None)

    def reorder(self, index: Tensor) -> LinearAttentionState:
        """Keep batch rows ``index [B']`` (beam search); in place, returns ``self``."""
        if self.s is not None:
            self.s, self.z = self.s.index_select(0, index), self.z.index_select(0, index)
        return self


def causal_linear_attention_with_state(
    q: Tensor, k: Tensor, v: Tensor, state: LinearAttentionState
) -> Tensor:
    """Causal linear attention of new positions that continue ``state`` (updated in place):
    ``Z_t = phi(q_t)^T S_t / phi(q_t)^T z_t`` with ``S_t, z_t`` the sums over every position so far.

    The first call (an empty state) runs the chunked parallel form and keeps ``S = phi(K)^T V``,
    ``z = phi(K)^T 1``; later calls run :func:`linear_attention_step` token by token.

    Args:
        q, k: ``[B, h, T_new, d]``. v: ``[B, h, T_new, d_v]``. state: :class:`LinearAttentionState`.
    Returns:
        ``Z [B, h, T_new, d_v]``.
    """
    if state.s is None:
        out = linear_attention(q, k, v, causal=True)  # [B, h, T_new, d_v]
        fk = elu_feature_map(k)  # [B, h, T_new, d]
        state.s, state.z = fk.transpose(-1, -2) @ v, fk.sum(dim=-2)  # [B, h, d, d_v], [B, h, d]
        return out
    outs = []
    carry = (state.s, state.z)
    for t in range(q.shape[-2]):
        z_t, carry = linear_attention_step(q[..., t, :], k[..., t, :], v[..., t, :], carry)  # [B, h, d_v]
        outs.append(z_t)
    state.s, state.z = carry
    return torch.stack(outs, dim=-2)  # [B, h, T_new, d_v]


def _check_scan(x, delta, A, B, C, D):
    _finite("x", x)
    if x.dim() != 3:
        raise ValueError(f"x must be [B, T, d], got shape {list(x.shape)}")
    b, t, d = x.shape
    _finite("delta", delta)
    if delta.shape != x.shape:
        raise ValueError(f"delta must have x's shape [B, T, d] = {list(x.shape)}, got {list(delta.shape)}")
    if bool((delta <= 0).any()):
        raise ValueError("delta must be > 0 everywhere (a step size; Mamba uses softplus(.) > 0)")
    _finite("A", A)
    if A.dim() != 2 or A.shape[0] != d:
        raise ValueError(f"A must be [d, n] with d={d} (x {list(x.shape)}), got {list(A.shape)}")
    if bool((A > 0).any()):
        raise ValueError(
            "A must be <= 0 everywhere (a decay; Mamba uses A = -exp(A_log)), got a positive entry"
        )
    n = A.shape[1]
    for name, m in (("B", B), ("C", C)):
        _finite(name, m)
        if tuple(m.shape) != (b, t, n):
            raise ValueError(
                f"{name} must be [B, T, n] = {[b, t, n]} (x {list(x.shape)}, A {list(A.shape)}), "
                f"got {list(m.shape)}"
            )
    if D is not None:
        _finite("D", D)
        if tuple(D.shape) != (d,):
            raise ValueError(f"D must be [d] = [{d}], got {list(D.shape)}")


def selective_scan(
    x: Tensor,
    delta: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    D: Tensor | None = None,
    *,
    chunk: int | None = None,
    state: Tensor | None = None,
    return_state: bool = False,
):
    """Selective state-space scan ``h_t = exp(delta_t A) h_{t-1} + delta_t B_t x_t``,
    ``y_t = C_t . h_t (+ D x_t)``, as a chunked (two-level) parallel scan.

    The T steps are cut into ``n_c`` chunks of ``L`` (default ``ceil(sqrt(T))``) and every chunk
    runs at once, as one batch:

    1. each chunk from a zero state: its end state ``e_c`` (L vectorised steps);
       its total decay is ``P_c = exp(A * sum_{t in c} delta_t)`` (the exponents add);
    2. the true start of each chunk, ``s_{c+1} = P_c * s_c + e_c`` (n_c steps of the same recurrence);
    3. each chunk again from ``s_c``, now emitting ``y_t`` (L vectorised steps).

    ``2 L + n_c`` Python steps instead of T, each on ``[B, n_c, d, n]``; extra memory
    O(n_c d n), never ``[T, d, n]``. It equals the sequential recurrence of
    :func:`attnlab.ref.selective_scan` up to rounding.

    Args:
        x: ``[B, T, d]``. delta: ``[B, T, d]``, > 0. A: ``[d, n]``, <= 0. B, C: ``[B, T, n]``.
        D: ``[d]`` or None. chunk: steps per chunk (None: ``ceil(sqrt(T))``).
        state: ``h_0 [B, d, n]`` (default zeros). return_state: also return the last state
            ``h_T [B, d, n]`` (to continue with :func:`selective_scan_step`).
    Returns:
        ``y [B, T, d]``, or ``(y, h_T)``.
    """
    _check_scan(x, delta, A, B, C, D)
    b, t, d = x.shape
    n = A.shape[1]
    chunk = math.isqrt(t - 1) + 1 if chunk is None else positive_int("chunk", chunk)
    n_c = -(-t // chunk)
    pad = n_c * chunk - t  # padded steps: delta = 0 (decay 1) and x = 0, so the state is unchanged
    xs = F.pad(x, (0, 0, 0, pad)).reshape(b, n_c, chunk, d)  # [B, n_c, L, d]
    dts = F.pad(delta, (0, 0, 0, pad)).reshape(b, n_c, chunk, d)  # [B, n_c, L, d]
    bs = F.pad(B, (0, 0, 0, pad)).reshape(b, n_c, chunk, n)  # [B, n_c, L, n]
    cs = F.pad(C, (0, 0, 0, pad)).reshape(b, n_c, chunk, n)  # [B, n_c, L, n]

    def step(h: Tensor, i: int) -> Tensor:  # position i of every chunk at once
        dt = dts[:, :, i, :, None]  # [B, n_c, d, 1]
        return torch.exp(dt * A) * h + dt * bs[:, :, i, None, :] * xs[:, :, i, :, None]  # [B, n_c, d, n]

    e = x.new_zeros(b, n_c, d, n)
    for i in range(chunk):  # 1. every chunk from zero
        e = step(e, i)
    decay = torch.exp(dts.sum(dim=2)[..., None] * A)  # P_c  [B, n_c, d, n]
    starts = [x.new_zeros(b, d, n) if state is None else state]  # s_0  [B, d, n]
    for c in range(n_c - 1):  # 2. carry the state across chunks
        starts.append(decay[:, c] * starts[-1] + e[:, c])
    h = torch.stack(starts, dim=1)  # [B, n_c, d, n]
    ys = []
    for i in range(chunk):  # 3. every chunk from its true start
        h = step(h, i)
        ys.append((h * cs[:, :, i, None, :]).sum(dim=-1))  # y = C . h  [B, n_c, d]
    y = torch.stack(ys, dim=2).reshape(b, n_c * chunk, d)[:, :t]  # [B, T, d]
    if D is not None:
        y = y + D * x
    return (y, h[:, -1]) if return_state else y


def selective_scan_step(
    x: Tensor,
    delta: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    D: Tensor | None = None,
    state: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """One step of the selective scan (generation): ``h = exp(delta A) h + delta B x``, ``y = C . h + D x``.

    Args:
        x, delta: ``[B, d]``. A: ``[d, n]``. B, C: ``[B, n]``. D: ``[d]`` or None.
        state: ``h [B, d, n]`` or None (zeros).
    Returns:
        ``(y [B, d], h [B, d, n])``.
    """
    if x.dim() != 2:
        raise ValueError(f"x must be [B, d] (one step), got shape {list(x.shape)}")
    _check_scan(x[:, None], delta[:, None], A, B[:, None], C[:, None], D)
    h = x.new_zeros(x.shape[0], x.shape[1], A.shape[1]) if state is None else state  # [B, d, n]
    dt = delta[:, :, None]  # [B, d, 1]
    h = torch.exp(dt * A) * h + dt * B[:, None, :] * x[:, :, None]  # [B, d, n]
    y = (h * C[:, None, :]).sum(dim=-1)  # [B, d]
    if D is not None:
        y = y + D * x
    return y, h
