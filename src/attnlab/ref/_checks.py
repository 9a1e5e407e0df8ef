"""Input checks shared by the reference: every bad input becomes a ``ValueError`` naming the argument.

The array checks (dtype, rank, finiteness, mask broadcasting) live here; the scalar checks are
attnlab's one set (:mod:`attnlab._checks`, pure Python), re-exported so ``ref`` and ``nn`` raise the
same messages (``"<name> must be a positive integer, got 0"``).
"""

from __future__ import annotations

import numpy as np

from attnlab._checks import (
    EMPTY_ROWS,
    choice,
    linear_attention_shapes,
    memory_bytes,
    non_negative_float,
    positive_float,
    positive_int,
)

__all__ = [
    "as_float",
    "as_mask",
    "check_fits",
    "non_negative_float",
    "positive_float",
    "positive_int",
    "result_dtype",
]


def as_float(name: str, x, *, min_ndim: int = 0, ndim: int | None = None) -> np.ndarray:
    """Return ``x`` as a float array (float64 unless it already is float32/float64).

    Raises ``ValueError`` naming ``name`` if the rank is wrong or any entry is NaN/inf.
    """
    a = np.asarray(x)
    if np.iscomplexobj(a):  # astype(float64) would drop the imaginary part without a word
        raise ValueError(f"{name} must be a real array, got dtype {a.dtype}")
    if a.dtype not in (np.float32, np.float64):
        if a.dtype == bool or not np.issubdtype(a.dtype, np.number):
            raise ValueError(f"{name} must be a numeric array, got dtype {a.dtype}")
        a = a.astype(np.float64)
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must have rank {ndim}, got shape {list(a.shape)}")
    if a.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {list(a.shape)}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinite values (shape {list(a.shape)})")
    return a


def check_qkv(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """Queries ``[..., T_q, d_k]``, keys ``[..., T_k, d_k]`` and values ``[..., T_k, d_v]`` that fit
    together: the same d_k (not 0) for q and k, the same T_k for k and v; else a ``ValueError`` with
    the shapes."""
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"k has d_k={k.shape[-1]} but q has d_k={q.shape[-1]} (q {list(q.shape)}, k {list(k.shape)})"
        )
    if q.shape[-1] == 0:
        raise ValueError(f"q and k have d_k=0: no feature to compare (q {list(q.shape)}, k {list(k.shape)})")
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"v has T_k={v.shape[-2]} but k has T_k={k.shape[-2]} (k {list(k.shape)}, v {list(v.shape)})"
        )


def as_mask(name: str, mask, target_shape: tuple[int, ...]) -> np.ndarray:
    """Return ``mask`` as a boolean array broadcast to ``target_shape``.

    ``True`` means "may attend". Raises ``ValueError`` if it is not boolean or does not broadcast.
    """
    m = np.asarray(mask)
    if m.dtype != bool:
        raise ValueError(f"{name} must be boolean (True = may attend), got dtype {m.dtype}")
    try:
        return np.broadcast_to(m, target_shape)
    except ValueError:
        raise ValueError(
            f"{name} of shape {list(m.shape)} does not broadcast to the scores' shape {list(target_shape)}"
        ) from None


def result_dtype(*arrays: np.ndarray) -> np.dtype:
    """float32 only if every input is float32; float64 otherwise."""
    return np.result_type(*arrays)


def check_fits(what: str, n_elements: int, itemsize: int = 8) -> None:
    """Refuse, before allocating, an array that would take more than half of this machine's memory:
    ``ValueError`` naming ``what`` and the GiB it would need (never a raw ``MemoryError``)."""

    need = int(n_elements) * itemsize
    have = memory_bytes()
    if need > have // 2:
        raise ValueError(
            f"{what} would need {need / 2**30:,.1f} GiB; this machine has {have / 2**30:,.1f} GiB"
        )


# ------------------------------------------------------------------------------ attention's inputs
# Each attention function of ``ref`` validates its arguments with one call below, so that its body
# is the equation. The messages name the argument and the shapes involved.


def broadcast_lead(name_a: str, a: np.ndarray, name_b: str, b: np.ndarray) -> None:
    """A ``ValueError`` unless the leading (batch/head) dims of ``a`` and ``b`` (all but the last
    two) broadcast together."""
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(
            f"leading (batch/head) dims of {name_a} {list(a.shape)} and {name_b} {list(b.shape)} "
            f"do not broadcast"
        ) from None


def check_attention(q, k, v, scale, bias, empty_rows: str):
    """The arguments of :func:`attnlab.ref.scaled_dot_product_attention`, checked: returns ``(q, k,
    v, scale, bias)`` with ``q [..., T_q, d_k]``, ``k [..., T_k, d_k]``, ``v [..., T_k, d_v]`` float
    arrays that fit together (at least one key), ``scale`` a float or None and ``bias`` None or a
    float array (in the scores' dtype) broadcastable to the scores ``[..., T_q, T_k]``."""
    q, k, v = as_float("q", q, min_ndim=2), as_float("k", k, min_ndim=2), as_float("v", v, min_ndim=2)
    check_qkv(q, k, v)
    broadcast_lead("q", q, "k", k)
    broadcast_lead("k", k, "v", v)
    choice("empty_rows", empty_rows, EMPTY_ROWS)  # checked here too: without a mask it is never consulted
    if k.shape[-2] == 0:
        raise ValueError(f"k has T_k=0: there is no key to attend to (q {list(q.shape)}, k {list(k.shape)})")
    if scale is not None:
        if (
            isinstance(scale, bool)
            or not isinstance(scale, (int, float, np.number))
            or not np.isfinite(scale)
        ):
            raise ValueError(f"scale must be a finite number, got {scale!r}")
        scale = float(scale)  # a Python float keeps float32 inputs float32 (np.float64 would promote)
    if bias is not None:
        scores_shape = (*np.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2])
        bias = as_float("bias", bias).astype(np.result_type(q, k), copy=False)
        try:
            np.broadcast_shapes(bias.shape, scores_shape)
        except ValueError:
            raise ValueError(
                f"bias of shape {list(bias.shape)} does not broadcast to the scores' shape "
                f"{list(scores_shape)}"
            ) from None
    return q, k, v, scale, bias


def check_scores(scores: np.ndarray, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``scores`` unless finite ``q`` and ``k`` overflowed it (a ``ValueError`` naming their size)."""
    if not np.all(np.isfinite(scores)):
        big = float(max(np.abs(q).max(), np.abs(k).max()))
        raise ValueError(
            f"the scores q.k^T overflow {scores.dtype} (q and k reach {big:.3g}): every input is finite but "
            "their products are not; scale q or k down"
        )
    return scores


def check_additive(s_prev, h, W_a, U_a, v_a):
    """The arguments of :func:`attnlab.ref.additive_attention` as float arrays: ``s_prev [...,
    T_tgt, d_s]``, ``h [..., T_src, d_h]``, ``W_a [d_s, d_a]``, ``U_a [d_h, d_a]``, ``v_a [d_a]``."""
    s_prev, h = as_float("s_prev", s_prev, min_ndim=2), as_float("h", h, min_ndim=2)
    W_a, U_a = as_float("W_a", W_a, ndim=2), as_float("U_a", U_a, ndim=2)
    v_a = as_float("v_a", v_a, ndim=1)
    if W_a.shape[0] != s_prev.shape[-1]:
        raise ValueError(f"W_a has {W_a.shape[0]} rows but s_prev has d_s={s_prev.shape[-1]}")
    if U_a.shape[0] != h.shape[-1]:
        raise ValueError(f"U_a has {U_a.shape[0]} rows but h has d_h={h.shape[-1]}")
    if not (W_a.shape[1] == U_a.shape[1] == v_a.shape[0]):
        raise ValueError(
            f"attention widths differ: W_a {list(W_a.shape)}, U_a {list(U_a.shape)}, "
            f"v_a {list(v_a.shape)} (need a common d_a)"
        )
    broadcast_lead("s_prev", s_prev, "h", h)
    return s_prev, h, W_a, U_a, v_a


def check_luong(s, h, kind: str, W, v):
    """The arguments of :func:`attnlab.ref.luong_attention` as float arrays: ``s [..., T_tgt, d_s]``,
    ``h [..., T_src, d_h]``, and what ``kind`` needs: nothing (dot: d_s == d_h), ``W [d_s, d_h]``
    (general), ``W [d_s + d_h, d_a]`` and ``v [d_a]`` (concat)."""
    s, h = as_float("s", s, min_ndim=2), as_float("h", h, min_ndim=2)
    broadcast_lead("s", s, "h", h)
    d_s, d_h = s.shape[-1], h.shape[-1]
    if kind == "dot":
        if d_s != d_h:
            raise ValueError(f"dot score needs equal widths, but s has d_s={d_s} and h has d_h={d_h}")
    elif kind == "general":
        if W is None:
            raise ValueError("kind='general' needs W of shape [d_s, d_h]")
        W = as_float("W", W, ndim=2)
        if W.shape != (d_s, d_h):
            raise ValueError(f"W has shape {list(W.shape)} but general needs [d_s, d_h] = [{d_s}, {d_h}]")
    elif kind == "concat":
        if W is None or v is None:
            raise ValueError("kind='concat' needs W [d_s + d_h, d_a] and v [d_a]")
        W, v = as_float("W", W, ndim=2), as_float("v", v, ndim=1)
        if W.shape[0] != d_s + d_h or W.shape[1] != v.shape[0]:
            raise ValueError(
                f"concat needs W [d_s + d_h, d_a] = [{d_s + d_h}, d_a] and v [d_a]; "
                f"got W {list(W.shape)}, v {list(v.shape)}"
            )
    else:
        raise ValueError(f"kind must be 'dot', 'general' or 'concat', got {kind!r}")
    return s, h, W, v


def _mha_params(params: dict, d_q: int, d_kv: int, num_heads: int, num_kv_heads: int) -> dict:
    """Validate the projection matrices and biases; return them as float arrays (NaN rejected)."""
    for key in ("W_q", "W_k", "W_v", "W_o"):
        if key not in params:
            raise ValueError(f"params is missing {key!r} (has {sorted(params)})")
    p = {k: as_float(f"params[{k!r}]", params[k], ndim=2) for k in ("W_q", "W_k", "W_v", "W_o")}
    W_q, W_k, W_v, W_o = p["W_q"], p["W_k"], p["W_v"], p["W_o"]
    if W_q.shape[0] != d_q:
        raise ValueError(f"W_q has shape {list(W_q.shape)} but x_q has d_model={d_q}")
    if W_k.shape[0] != d_kv or W_v.shape[0] != d_kv:
        raise ValueError(f"W_k {list(W_k.shape)} / W_v {list(W_v.shape)} need {d_kv} rows (x_kv width)")
    if W_q.shape[1] % num_heads:
        raise ValueError(
            f"d_model: W_q {list(W_q.shape)} gives width {W_q.shape[1]}, which is not "
            f"divisible by num_heads={num_heads}"
        )
    d_k = W_q.shape[1] // num_heads
    if W_k.shape[1] != num_kv_heads * d_k:
        raise ValueError(
            f"W_k {list(W_k.shape)} has width {W_k.shape[1]} but num_kv_heads*d_k = "
            f"{num_kv_heads}*{d_k} = {num_kv_heads * d_k}"
        )
    if W_v.shape[1] % num_kv_heads:
        raise ValueError(
            f"W_v {list(W_v.shape)} has width {W_v.shape[1]}, which is not divisible by "
            f"num_kv_heads={num_kv_heads}"
        )
    d_v = W_v.shape[1] // num_kv_heads
    if W_o.shape[0] != num_heads * d_v:
        raise ValueError(
            f"W_o has shape {list(W_o.shape)} but Concat(heads) has width h*d_v = "
            f"{num_heads}*{d_v} = {num_heads * d_v}"
        )
    for b, w in (("b_q", W_q), ("b_k", W_k), ("b_v", W_v), ("b_o", W_o)):
        if params.get(b) is not None:
            p[b] = as_float(f"params[{b!r}]", params[b], ndim=1)
            if p[b].shape[0] != w.shape[1]:
                raise ValueError(f"{b} has shape {list(p[b].shape)} but its matrix has width {w.shape[1]}")
    return p


def check_multi_head(x_q, x_kv, params: dict, num_heads, num_kv_heads, positions, mask):
    """The arguments of :func:`attnlab.ref.multi_head_attention`, checked: returns ``(x_q [B, T_q,
    d_model], x_kv [B, T_k, d_kv] (x_q for self-attention), params (float arrays), num_kv_heads (an
    int dividing num_heads), mask (None, or bool with a head axis: [B, 1, T_q, T_k] from 3-D))``."""
    x_q = as_float("x_q", x_q, ndim=3)
    x_kv = x_q if x_kv is None else as_float("x_kv", x_kv, ndim=3)
    if x_kv.shape[0] != x_q.shape[0]:
        raise ValueError(f"x_kv has batch {x_kv.shape[0]} but x_q has batch {x_q.shape[0]}")
    num_heads = positive_int("num_heads", num_heads)
    num_kv_heads = num_heads if num_kv_heads is None else positive_int("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    params = _mha_params(params, x_q.shape[-1], x_kv.shape[-1], num_heads, num_kv_heads)
    if positions not in (None, "rope", "alibi"):
        raise ValueError(f"positions must be None, 'rope' or 'alibi', got {positions!r}")
    if mask is not None:
        mask = np.asarray(mask)
        scores_shape = (x_q.shape[0], x_q.shape[1], x_kv.shape[1])  # [B, T_q, T_k]
        if mask.ndim <= 3:
            try:
                np.broadcast_shapes(mask.shape, scores_shape)
            except ValueError:
                raise ValueError(
                    f"mask of shape {list(mask.shape)} does not broadcast to "
                    f"[B, T_q, T_k] = {list(scores_shape)}"
                ) from None
        if mask.ndim == 3:
            mask = mask[:, None]  # [B, 1, T_q, T_k]: the same for every head
    return x_q, x_kv, params, num_kv_heads, mask


def check_linear(q, k, v, causal: bool):
    """The arguments of :func:`attnlab.ref.linear_attention` as float arrays: ``q [..., T_q, d]``,
    ``k [..., T_k, d]``, ``v [..., T_k, d_v]`` with d >= 1, T_k >= 1 and, when causal, T_k >= T_q."""
    q, k, v = as_float("q", q, min_ndim=2), as_float("k", k, min_ndim=2), as_float("v", v, min_ndim=2)
    linear_attention_shapes(q.shape, k.shape, v.shape, causal)
    return q, k, v
