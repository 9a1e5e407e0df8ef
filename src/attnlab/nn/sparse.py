"""Block-sparse attention: sliding windows, Longformer and strided patterns that skip the work.

SDPA with a boolean window mask still computes all ``T^2`` scores and throws most away. Here the
``[T_q, T_k]`` score matrix is cut into ``BLOCK_SIZE x BLOCK_SIZE`` tiles and each tile is one of
*empty* (skipped), *full* (computed without a mask) or *partial* (computed, then masked). The tile
classes come from the pattern's arithmetic (:func:`block_plan`, O(T^2 / BLOCK_SIZE^2) integers,
never a ``[T, T]`` mask), and the kernel is PyTorch's own ``flex_attention``, compiled once by
``torch.compile`` (with the system's C++ compiler on CPU; the first compile takes tens of seconds,
later processes reuse Inductor's cache under ``/tmp``). Every pattern and every length goes through
the same compiled kernel: the pattern's numbers are passed as tensors and the shapes are dynamic.

The rule (the same as :func:`attnlab.nn.masks.sparse_pattern_mask`): query ``i`` is position
``p = T_k - T_q + i``, ``d = p - j``, and ``M[i, j] = causal_ok & (|d| < window |
d mod stride == 0 | p or j global)``.

On CPU ``flex_attention`` has no backward pass, so the compiled forward is wrapped in an autograd
function whose backward recomputes, one row of query tiles at a time, the weights over only the
key tiles that the plan keeps (``P = softmax(S)``, ``dV += P^T dZ``, ``dS = P * (dP - rowsum(P * dP))``,
``dQ = dS K s``, ``dK += dS^T Q s``): the same skipped work, no ``[T, T]`` matrix. When compiling is
impossible (no compiler, an unsupported dtype) the tiled kernel :func:`attnlab.nn.flash_attention`
does the work instead, and the reason is logged once.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os

import torch
from torch import Tensor
from torch.fx.experimental import _config as fx_config

from attnlab._checks import choice, positive_int
from attnlab._compile import compiled
from attnlab.nn.flash import flash_attention
from attnlab.nn.masks import global_positions, sparse_pattern_mask

BLOCK_SIZE = 128  # tile edge (flex_attention's default sparse block)
KERNELS = ("auto", "tiled")  # auto: compiled flex_attention, else the tiled kernel; tiled: always tiled
COMPILED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

log = logging.getLogger(__name__)
_state: dict = {"kernel": None, "fallback": None}


@dataclasses.dataclass(frozen=True)
class Pattern:
    """A sparse pattern over ``t_q`` queries (the last of ``t_k`` positions) and ``t_k`` keys.

    ``reach``: |d| < reach is local (None = every key); ``stride``: d mod stride == 0 (or None);
    ``is_global``: bool ``[t_k + BLOCK_SIZE]`` (padding False) or None; ``causal``: d >= 0.
    """

    t_q: int
    t_k: int
    causal: bool
    reach: int | None
    stride: int | None
    is_global: Tensor | None = dataclasses.field(default=None, compare=False)

    @property
    def offset(self) -> int:
        return self.t_k - self.t_q


def make_pattern(t_q, t_k, *, causal=False, window=None, global_tokens=None, stride=None, device=None):
    """Validate the pattern arguments (one-line ``ValueError`` naming the bad one) into a
    :class:`Pattern` over ``[t_q, t_k]``."""
    reach = None if window is None else positive_int("window", window)
    if stride is not None:
        stride = positive_int("stride", stride)
        if stride % BLOCK_SIZE and BLOCK_SIZE % stride:
            raise ValueError(
                f"stride must divide the block size {BLOCK_SIZE} or be a multiple of it "
                f"(so the strided keys fall in whole tiles), got {stride}"
            )
        reach = stride if reach is None else reach
    is_global = None
    if global_tokens is not None:
        g = global_positions(global_tokens, t_k, device=device)
        is_global = torch.zeros(t_k + BLOCK_SIZE, dtype=torch.bool, device=device)
        is_global[g] = True
    return Pattern(t_q, t_k, bool(causal), reach, stride, is_global)


def _rule(pattern: Pattern, device):
    """``allowed(p, j)`` for integer position tensors, with every number of the pattern a tensor
    (so the compiled kernel sees inputs, not constants, and is shared by every pattern)."""
    big = pattern.t_q + pattern.t_k + 1  # "no limit": |d| < big always; d mod big == 0 only at d = 0
    reach = torch.tensor(pattern.reach or big, device=device)
    stride = torch.tensor(pattern.stride or big, device=device)
    causal = torch.tensor(pattern.causal, device=device)
    is_global = pattern.is_global
    if is_global is None:
        is_global = torch.zeros(pattern.t_k + BLOCK_SIZE, dtype=torch.bool, device=device)

    def allowed(p: Tensor, j: Tensor) -> Tensor:
        d = p - j
        ok = (d.abs() < reach) | (d % stride == 0) | is_global[p] | is_global[j]
        return ok & ((d >= 0) | ~causal)

    return allowed


def block_plan(pattern: Pattern, device=None) -> tuple[Tensor, Tensor]:
    """Classify the ``[n_q, n_k]`` tiles: ``(partial, full)`` bools; a tile in neither is skipped.

    From the range of ``d = p - j`` over a tile, ``[d_min, d_max]`` (every integer in it occurs):
    the tile may hold an allowed pair iff causality leaves some ``d >= 0`` and some ``d`` is local
    (``|d| < reach``), a multiple of the stride, or a query/key in the tile is global. It is full iff
    every pair is allowed: ``d_min >= 0`` (causal) and ``max |d| < reach`` or all its keys (or all
    its queries) are global. Partial tiles are masked by the rule, so a conservative "partial" is
    always correct; a "full" tile is always entirely allowed. A tile that is entirely allowed only
    because strided keys fill the gaps past the local band (e.g. one query at distance 128 with
    stride 128) is marked partial: one masked tile of work, never a wrong weight.
    """
    t_q, t_k, bs = pattern.t_q, pattern.t_k, BLOCK_SIZE
    n_q, n_k = -(-t_q // bs), -(-t_k // bs)
    r = torch.arange(n_q, device=device)[:, None]  # [n_q, 1]
    c = torch.arange(n_k, device=device)[None, :]  # [1, n_k]
    p_lo, p_hi = pattern.offset + r * bs, pattern.offset + torch.clamp((r + 1) * bs, max=t_q) - 1
    j_lo, j_hi = c * bs, torch.clamp((c + 1) * bs, max=t_k) - 1
    d_min, d_max = p_lo - j_hi, p_hi - j_lo  # [n_q, n_k]
    lo = d_min.clamp(min=0) if pattern.causal else d_min  # smallest d causality leaves
    maybe = d_max >= lo
    reach = pattern.reach or (t_q + t_k + 1)
    may_local = torch.maximum(lo, torch.full_like(lo, 1 - reach)) <= torch.clamp(d_max, max=reach - 1)
    all_local = torch.maximum(d_min.abs(), d_max.abs()) < reach
    may_stride = torch.zeros_like(maybe)
    if pattern.stride is not None:
        s = pattern.stride
        may_stride = torch.div(d_max, s, rounding_mode="floor") * s >= lo
    may_global = all_global = torch.zeros_like(maybe)
    if pattern.is_global is not None:
        g = pattern.is_global
        keys = torch.cat([g[:t_k], g.new_zeros(n_k * bs - t_k)]).reshape(n_k, bs)  # [n_k, bs]
        key_all = torch.cat([g[:t_k], g.new_ones(n_k * bs - t_k)]).reshape(n_k, bs)  # padding True
        pos = pattern.offset + torch.arange(n_q * bs, device=device)  # query positions  [n_q * bs]
        real = pos < pattern.offset + t_q
        queries = (g[pos] & real).reshape(n_q, bs)  # [n_q, bs]
        query_all = (g[pos] | ~real).reshape(n_q, bs)
        may_global = keys.any(-1)[None, :] | queries.any(-1)[:, None]  # [n_q, n_k]
        all_global = key_all.all(-1)[None, :] | query_all.all(-1)[:, None]
    keep = maybe & (may_local | may_stride | may_global)
    full = keep & (all_local | all_global)
    if pattern.causal:
        full = full & (d_min >= 0)
    return keep & ~full, full


def _block_mask(pattern: Pattern, device):
    from torch.nn.attention.flex_attention import BlockMask

    partial, full = block_plan(pattern, device)
    allowed = _rule(pattern, device)
    offset = torch.tensor(pattern.offset, device=device)

    def mask_mod(b, h, q_idx, kv_idx):
        return allowed(q_idx + offset, kv_idx)

    def lists(keep: Tensor):
        count = keep.sum(-1).to(torch.int32)[None, None]  # [1, 1, n_q]
        order = torch.argsort((~keep).to(torch.int8), dim=-1, stable=True).to(torch.int32)  # kept first
        return count, order[None, None]  # [1, 1, n_q], [1, 1, n_q, n_k]

    mask = BlockMask.from_kv_blocks(
        *lists(partial),
        *lists(full),
        BLOCK_SIZE=BLOCK_SIZE,
        mask_mod=mask_mod,
        seq_lengths=(pattern.t_q, pattern.t_k),
        compute_q_blocks=False,
    )
    for t in (mask.kv_num_blocks, mask.kv_indices, mask.full_kv_num_blocks, mask.full_kv_indices):
        for dim in range(2, t.dim()):  # the tile counts vary with T: one compiled kernel for all
            torch._dynamo.maybe_mark_dynamic(t, dim)
    return mask


def _kernel():
    if _state["kernel"] is None:
        from torch.nn.attention.flex_attention import flex_attention

        _state["kernel"] = compiled(flex_attention, dynamic=True)
    return _state["kernel"]


class BlockSparseFunction(torch.autograd.Function):
    """Compiled ``flex_attention`` forward; block-sparse recomputing backward (module docstring)."""

    @staticmethod
    def forward(ctx, q, k, v, pattern):
        """``q [B, h, T_q, d]``, ``k [B, h, T_k, d]``, ``v [B, h, T_k, d_v]`` -> ``Z [B, h, T_q, d_v]``
        through the compiled kernel; saves ``(q, k, v)`` for the recomputing backward."""
        block_mask = _block_mask(pattern, q.device)
        # No "duck" sizes: T_q == T_k must not become a guard, or T_q < T_k would compile again.
        with fx_config.patch(use_duck_shape=False):
            out = _kernel()(q.detach(), k.detach(), v.detach(), block_mask=block_mask)
        ctx.save_for_backward(q, k, v)
        ctx.pattern = pattern
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out):
        q, k, v = ctx.saved_tensors
        pattern = ctx.pattern
        partial, full = block_plan(pattern, q.device)
        keep = partial | full  # [n_q, n_k]
        allowed = _rule(pattern, q.device)
        scale = 1.0 / math.sqrt(q.shape[-1])
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        tile = torch.arange(BLOCK_SIZE, device=q.device)
        for r in range(keep.shape[0]):
            q_lo, q_hi = r * BLOCK_SIZE, min((r + 1) * BLOCK_SIZE, pattern.t_q)
            idx = (keep[r].nonzero()[:, :1] * BLOCK_SIZE + tile).flatten()  # kept key positions
            idx = idx[idx < pattern.t_k]  # [n]
            k_r, v_r = k[..., idx, :], v[..., idx, :]  # [B, h, n, d], [B, h, n, d_v]
            q_r, do_r = q[..., q_lo:q_hi, :], d_out[..., q_lo:q_hi, :]  # [B, h, bq, d], [B, h, bq, d_v]
            p_pos = torch.arange(q_lo, q_hi, device=q.device) + pattern.offset  # [bq]
            s = (q_r @ k_r.transpose(-1, -2)) * scale  # [B, h, bq, n]
            s = s.masked_fill(~allowed(p_pos[:, None], idx[None, :]), -math.inf)
            p = torch.softmax(s, dim=-1)  # P  [B, h, bq, n]
            dp = do_r @ v_r.transpose(-1, -2)  # dP = dZ V^T  [B, h, bq, n]
            ds = p * (dp - (p * dp).sum(dim=-1, keepdim=True))  # softmax backward
            dq[..., q_lo:q_hi, :] = (ds @ k_r) * scale
            dk.index_add_(-2, idx, (ds.transpose(-1, -2) @ q_r) * scale)
            dv.index_add_(-2, idx, p.transpose(-1, -2) @ do_r)
        return dq, dk, dv, None


def compile_fallback_reason() -> str | None:
    """Why the compiled kernel is not used for ``[B, h, T, d]`` inputs (logged once), or None."""
    return _state["fallback"]


def _fall_back(reason: str) -> None:
    if _state["fallback"] is None:
        _state["fallback"] = reason
        log.warning(
            "block_sparse_attention: cannot compile flex_attention (%s); using the tiled kernel "
            "attnlab.nn.flash_attention instead",
            reason,
        )


def _tiled(q, k, v, pattern: Pattern, window, global_tokens, stride):
    """The same attention through :func:`attnlab.nn.flash_attention` (a dense mask for patterns
    it has no tile rule for)."""
    if global_tokens is None and stride is None and (pattern.causal or window is None):
        return flash_attention(q, k, v, causal=pattern.causal, window=window if pattern.causal else None)
    mask = sparse_pattern_mask(
        pattern.t_q,
        pattern.t_k,
        causal=pattern.causal,
        window=window,
        global_tokens=global_tokens,
        stride=stride,
        device=q.device,
    )  # [T_q, T_k]
    return flash_attention(q, k, v, mask=mask)


def _check(q: Tensor, k: Tensor, v: Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor) or t.dim() != 4 or not t.is_floating_point():
            shape = list(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a floating [B, h, T, d] tensor, got {shape}")
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} contains NaN or infinite values (shape {list(t.shape)})")
    if k.shape[:2] != q.shape[:2] or v.shape[:3] != k.shape[:3] or k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"q, k, v must be [B, h, T_q, d], [B, h, T_k, d], [B, h, T_k, d_v]; "
            f"got {list(q.shape)}, {list(k.shape)}, {list(v.shape)}"
        )
    if k.shape[-2] < q.shape[-2]:
        raise ValueError(f"block_sparse_attention needs T_k >= T_q, got q {list(q.shape)}, k {list(k.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")


def block_sparse_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool = False,
    window: int | None = None,
    global_tokens=None,
    stride: int | None = None,
    kernel: str = "auto",
) -> Tensor:
    """softmax(Q K^T / sqrt(d) + M) V over only the tiles the sparse pattern M keeps; differentiable.

    ``M`` is :func:`attnlab.nn.masks.sparse_pattern_mask`: with query position ``p`` (the queries
    are the last ``T_q`` of the ``T_k`` positions) and ``d = p - j``, a key is seen iff causality
    allows (``d >= 0`` when ``causal``) and ``|d| < window`` (the window counts the query itself:
    causal, query ``i`` sees keys ``i - window + 1 .. i``), or ``d`` is a multiple of ``stride``
    (Child et al. 2019; the local part is then ``|d| < stride`` unless a window is given), or the
    query or the key is one of ``global_tokens`` (Longformer). No option: full attention.

    Args:
        q: ``[B, h, T_q, d]``. k: ``[B, h, T_k, d]``. v: ``[B, h, T_k, d_v]``; ``T_k >= T_q``.
        causal: lower-right aligned causal masking. window: positive int or None.
        global_tokens: key positions ``0 .. T_k - 1`` (list or 1-D tensor) or None.
        stride: divides ``BLOCK_SIZE`` (128) or is a multiple of it, or None.
        kernel: ``"auto"`` (compiled ``flex_attention``; the tiled kernel when compiling is
            impossible or the dtype is float64) or ``"tiled"`` (:func:`attnlab.nn.flash_attention`).
    Returns:
        ``Z [B, h, T_q, d_v]``.
    """
    _check(q, k, v)
    choice("kernel", kernel, KERNELS)
    t_q, t_k = q.shape[-2], k.shape[-2]
    pattern = make_pattern(
        t_q, t_k, causal=causal, window=window, global_tokens=global_tokens, stride=stride, device=q.device
    )
    if os.environ.get("ATTNLAB_NO_COMPILE") and _state["fallback"] is None:
        _fall_back("ATTNLAB_NO_COMPILE is set")
    if kernel == "auto" and _state["fallback"] is None and q.dtype in COMPILED_DTYPES:
        try:
            return BlockSparseFunction.apply(q, k, v, pattern)
        except Exception as err:  # no compiler, an Inductor limit: keep working, say why once
            _fall_back(
                f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
            )
    return _tiled(q, k, v, pattern, window, global_tokens, stride)
