"""Tiled attention with the online softmax in PyTorch, with FlashAttention's backward pass.

The forward pass is the recurrence of :func:`attnlab.ref.flash_attention` (read its docstring
first): one ``[B_q, B_k]`` tile of scores at a time, a running max ``m`` and sum ``l`` per query,
the partial output rescaled by ``exp(m - m_new)`` whenever the max grows. It saves only Q, K, V,
the output Z and the log-sum-exp ``L = m + log l`` per query: ``O(T d)`` memory, not ``O(T^2)``.

The backward pass never stores the weights either. With ``D_i = rowsum(dZ_i * Z_i)`` it rebuilds
each tile from L and forms the gradients tile by tile::

    S_ij  = Q_i K_j^T * scale                 P_ij = exp(S_ij - L_i)        (exact weights)
    dV_j += P_ij^T dZ_i                       dP_ij = dZ_i V_j^T
    dS_ij = P_ij * (dP_ij - D_i)              (softmax backward; D_i = rowsum(P_i * dP_i) = rowsum(dZ_i Z_i))
    dQ_i += dS_ij K_j * scale                 dK_j += dS_ij^T Q_i * scale
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attnlab._checks import positive_int


def _key_range(q_lo: int, q_hi: int, t_k: int, offset: int, causal: bool, window: int | None):
    """Keys ``[lo, hi)`` any query ``q_lo .. q_hi - 1`` may see (query i is position offset + i)."""
    lo, hi = 0, t_k
    if causal:
        hi = min(t_k, max(0, offset + q_hi))
    if window is not None:
        lo = max(0, offset + q_lo - window + 1)
    return lo, hi


def _allowed(mask, q_lo, q_hi, k_lo, k_hi, offset, causal, window, device):
    """Boolean tile ``[..., bq, bk]`` (True = may attend), or None when every entry is allowed."""
    allowed = None
    straddles = causal and k_hi - 1 > offset + q_lo
    leaves_window = window is not None and k_lo <= offset + q_hi - 1 - window
    if straddles or leaves_window:
        p = torch.arange(q_lo, q_hi, device=device)[:, None] + offset  # query positions  [bq, 1]
        j = torch.arange(k_lo, k_hi, device=device)[None, :]  # key positions  [1, bk]
        allowed = j <= p
        if window is not None:
            allowed = allowed & (j > p - window)
    if mask is not None:
        tile = mask[..., q_lo:q_hi, k_lo:k_hi]  # [..., bq, bk]
        allowed = tile if allowed is None else tile & allowed
    return allowed


def _tiles(t_q, t_k, block_q, block_k, causal, window):
    """Yield ``(q_lo, q_hi, [(k_lo, k_hi), ...])``: the tiles that are not skipped."""
    offset = t_k - t_q
    for q_lo in range(0, t_q, block_q):
        q_hi = min(q_lo + block_q, t_q)
        k_begin, k_end = _key_range(q_lo, q_hi, t_k, offset, causal, window)
        starts = range((k_begin // block_k) * block_k, k_end, block_k)
        yield q_lo, q_hi, [(k_lo, min(k_lo + block_k, k_end)) for k_lo in starts]


class FlashAttentionFunction(torch.autograd.Function):
    """Autograd node: tiled forward saving ``(Q, K, V, Z, L)``; tiled recomputing backward."""

    @staticmethod
    def forward(ctx, q, k, v, mask, causal, window, block_q, block_k, scale):
        """Z = softmax(Q K^T * scale + M) V tile by tile, and L = m + log l per query.

        ``q [..., T_q, d_k]``, ``k [..., T_k, d_k]``, ``v [..., T_k, d_v]``, ``mask`` bool
        ``[..., T_q, T_k]`` or None (leading dims already broadcast by :func:`flash_attention`).
        Returns ``(Z [..., T_q, d_v], L [..., T_q])``; saves ``(Q, K, V, Z, L)`` for backward.
        """
        t_q, t_k = q.shape[-2], k.shape[-2]
        offset = t_k - t_q
        lead = q.shape[:-2]
        out = q.new_zeros(lead + (t_q, v.shape[-1]))  # Z  [..., T_q, d_v]
        lse = q.new_full(lead + (t_q,), -math.inf)  # L  [..., T_q]
        for q_lo, q_hi, k_tiles in _tiles(t_q, t_k, block_q, block_k, causal, window):
            q_i = q[..., q_lo:q_hi, :] * scale  # [..., bq, d_k]
            m = q.new_full(lead + (q_hi - q_lo, 1), -math.inf)  # running max  [..., bq, 1]
            l = q.new_zeros(lead + (q_hi - q_lo, 1))  # running sum  [..., bq, 1]
            acc = q.new_zeros(lead + (q_hi - q_lo, v.shape[-1]))  # unnormalised O  [..., bq, d_v]
            for k_lo, k_hi in k_tiles:
                allowed = _allowed(mask, q_lo, q_hi, k_lo, k_hi, offset, causal, window, q.device)
                s = q_i @ k[..., k_lo:k_hi, :].transpose(-1, -2)  # S_ij  [..., bq, bk]
                if allowed is not None:
                    s = s.masked_fill(~allowed, -math.inf)
                m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # [..., bq, 1]
                m_shift = m_new if allowed is None else m_new.masked_fill(m_new == -math.inf, 0.0)
                p = torch.exp(s - m_shift)  # P_ij  [..., bq, bk]
                rescale = torch.exp(m - m_shift)  # exp(m - m_new)  [..., bq, 1]
                l = rescale * l + p.sum(dim=-1, keepdim=True)
                acc = rescale * acc + p @ v[..., k_lo:k_hi, :]  # [..., bq, d_v]
                m = m_new
            seen = l > 0  # rows with at least one key  [..., bq, 1]
            out[..., q_lo:q_hi, :] = torch.where(seen, acc / torch.where(seen, l, 1.0), 0.0)  # Z_i = O / l
            lse[..., q_lo:q_hi] = torch.where(seen, m + torch.log(torch.where(seen, l, 1.0)), -math.inf)[
                ..., 0
            ]  # L_i = m + log l
        ctx.save_for_backward(q, k, v, out, lse, mask if mask is not None else torch.empty(0))
        ctx.has_mask = mask is not None
        ctx.opts = (causal, window, block_q, block_k, scale)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out, d_lse):
        q, k, v, out, lse, mask = ctx.saved_tensors
        mask = mask if ctx.has_mask else None
        causal, window, block_q, block_k, scale = ctx.opts
        t_q, t_k = q.shape[-2], k.shape[-2]
        offset = t_k - t_q
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        delta = (d_out * out).sum(dim=-1)  # D = rowsum(dZ * Z)  [..., T_q]
        lse_shift = lse.masked_fill(lse == -math.inf, math.inf)  # empty rows: P = exp(-inf) = 0
        for q_lo, q_hi, k_tiles in _tiles(t_q, t_k, block_q, block_k, causal, window):
            q_i = q[..., q_lo:q_hi, :]  # [..., bq, d_k]
            do_i = d_out[..., q_lo:q_hi, :]  # [..., bq, d_v]
            l_i = lse_shift[..., q_lo:q_hi, None]  # [..., bq, 1]
            d_i = delta[..., q_lo:q_hi, None]  # [..., bq, 1]
            dq_i = dq[..., q_lo:q_hi, :]  # a view: accumulated in place  [..., bq, d_k]
            for k_lo, k_hi in k_tiles:
                k_j, v_j = k[..., k_lo:k_hi, :], v[..., k_lo:k_hi, :]  # [..., bk, d_k], [..., bk, d_v]
                allowed = _allowed(mask, q_lo, q_hi, k_lo, k_hi, offset, causal, window, q.device)
                p = torch.exp((q_i @ k_j.transpose(-1, -2)) * scale - l_i)  # P_ij  [..., bq, bk]
                if allowed is not None:
                    p = p.masked_fill(~allowed, 0.0)
                dv[..., k_lo:k_hi, :] += p.transpose(-1, -2) @ do_i  # dV_j += P^T dZ_i
                ds = p * (do_i @ v_j.transpose(-1, -2) - d_i)  # dS = P * (dP - D)  [..., bq, bk]
                dq_i += (ds @ k_j) * scale
                dk[..., k_lo:k_hi, :] += (ds.transpose(-1, -2) @ q_i) * scale
        return dq, dk, dv, None, None, None, None, None, None


def _check(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() < 2:
            raise ValueError(f"{name} must be [..., T, d], got shape {list(t.shape)}")
        if not t.is_floating_point():
            raise ValueError(f"{name} must be a floating tensor, got dtype {t.dtype}")
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"k has d_k={k.shape[-1]} but q has d_k={q.shape[-1]} (q {list(q.shape)}, k {list(k.shape)})"
        )
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"v has T_k={v.shape[-2]} but k has T_k={k.shape[-2]} (k {list(k.shape)}, v {list(v.shape)})"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    shapes = [q.shape[:-2], k.shape[:-2], v.shape[:-2]]
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
        t_q, t_k = q.shape[-2], k.shape[-2]
        if (
            mask.dim() >= 2
            and (mask.shape[-2] not in (1, t_q) or mask.shape[-1] not in (1, t_k))
            or mask.dim() == 1
            and mask.shape[-1] not in (1, t_k)
        ):
            raise ValueError(
                f"mask of shape {list(mask.shape)} does not broadcast to the scores' "
                f"[..., T_q, T_k] = [..., {t_q}, {t_k}]"
            )
        shapes.append(mask.shape[:-2])
    try:
        return torch.broadcast_shapes(*shapes)
    except RuntimeError:
        raise ValueError(
            f"leading (batch/head) dims do not broadcast: q {list(q.shape)}, "
            f"k {list(k.shape)}, v {list(v.shape)}"
            + (f", mask {list(mask.shape)}" if mask is not None else "")
        ) from None


def flash_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    mask: Tensor | None = None,
    causal: bool = False,
    window: int | None = None,
    block_q: int = 128,
    block_k: int = 128,
    scale: float | None = None,
) -> Tensor:
    """Exact attention softmax(Q K^T * scale + M) V by tiles, differentiable (FlashAttention).

    Same recurrence and conventions as :func:`attnlab.ref.flash_attention`: causal is aligned to
    the lower right (query ``i`` is position ``T_k - T_q + i``, unlike PyTorch's ``is_causal``),
    ``window=w`` is the causal sliding window (keys ``p - w < j <= p``) and implies ``causal``;
    tiles above the diagonal or left of the window are skipped. A query with no key to attend to
    gets zeros (PyTorch's convention) and zero gradients. The backward pass recomputes each tile
    of weights from the saved log-sum-exp (see the module docstring), so neither pass stores a
    ``[T_q, T_k]`` matrix.

    Args:
        q: queries ``[B, h, T_q, d_k]`` (any ``[..., T_q, d_k]``).
        k: keys ``[B, h, T_k, d_k]``. v: values ``[B, h, T_k, d_v]`` (leading dims broadcast; a
            broadcast input gets its gradient summed back to its own shape).
        mask: bool broadcastable to ``[B, h, T_q, T_k]``, True = may attend, or None.
        causal: lower-right aligned causal attention. window: sliding-window width or None.
        block_q, block_k: tile sizes (any positive ints). scale: default ``1 / sqrt(d_k)``.
    Returns:
        ``Z [B, h, T_q, d_v]`` (the broadcast leading dims).
    """
    lead = _check(q, k, v, mask)
    for name, b in (("block_q", block_q), ("block_k", block_k)):
        positive_int(name, b)
    if window is not None:
        positive_int("window", window)
        causal = True
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    t_q, t_k = q.shape[-2], k.shape[-2]
    q_b = q.expand(lead + q.shape[-2:])  # [..., T_q, d_k] (views)
    k_b = k.expand(lead + k.shape[-2:])  # [..., T_k, d_k]
    v_b = v.expand(lead + v.shape[-2:])  # [..., T_k, d_v]
    mask_b = None if mask is None else mask.expand(lead + (t_q, t_k))  # [..., T_q, T_k] (a view)
    out, _ = FlashAttentionFunction.apply(
        q_b, k_b, v_b, mask_b, bool(causal), window, block_q, block_k, scale
    )
    return out
