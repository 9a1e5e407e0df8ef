"""Normalisation, the position-wise FFN, and whole encoder/decoder layers.

Post-norm (the original paper):  U = LN_1(X + MHA(X)),        Y = LN_2(U + FFN(U)).
Pre-norm (GPT-style):            U = X + MHA(LN_1(X)),        Y = U + FFN(LN_2(U)).
The decoder adds cross-attention between the two: masked self-attention, then attention over the
encoder memory, then the FFN, each in a residual branch.

Parameter dicts: ``ffn = {"W_1" [d, f], "b_1" [f], "W_2" [f, d], "b_2" [d]}`` (biases optional),
norms ``{"gamma" [d], "beta" [d]}``, attention as in :mod:`attnlab.ref.multihead`.
An encoder layer is ``{"attn", "ffn", "norm1", "norm2"}``; a decoder layer is
``{"self_attn", "cross_attn", "ffn", "norm1", "norm2", "norm3"}``.
"""

from __future__ import annotations

import math

import numpy as np

from attnlab.ref._checks import as_float, non_negative_float
from attnlab.ref.multihead import multi_head_attention

_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x, approximate: str = "none") -> np.ndarray:
    """GELU(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)); ``approximate="tanh"`` gives
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

    Args:
        x: ``[...]``, any shape (element-wise). approximate: ``"none"`` (exact erf) or ``"tanh"``.
    Returns:
        ``[...]``, the same shape and dtype as ``x``.
    """
    x = as_float("x", x)
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    if approximate != "none":
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    erf = np.asarray(_erf(x / math.sqrt(2.0)), dtype=np.float64)  # frompyfunc: 0-d input gives a float
    return np.asarray(0.5 * x * (1.0 + erf)).astype(x.dtype)


def relu(x) -> np.ndarray:
    """ReLU(x) = max(0, x), element-wise: ``x [...] -> [...]`` (same shape)."""
    x = as_float("x", x)
    return np.maximum(x, 0)


ACTIVATIONS = {"relu": relu, "gelu": gelu, "gelu_tanh": lambda x: gelu(x, approximate="tanh")}


def _check_denominator(fn: str, stat: np.ndarray, eps: float, kind: str) -> None:
    """With ``eps = 0`` a row whose statistic is 0 would divide by zero (NaN): name it instead."""
    if eps == 0 and np.any(stat == 0):
        idx = tuple(int(i) for i in np.argwhere(stat[..., 0] == 0)[0])
        raise ValueError(f"{fn}: x row {idx} is {kind} and eps=0, so it would divide by zero; pass eps > 0")


def _row_scale(x: np.ndarray) -> np.ndarray:
    """A power of two near ``max |x|`` of each row ``[..., 1]`` (dividing by it is exact), never
    below 1: only large rows need scaling, and small ones keep ``eps / s^2`` finite."""
    m = np.abs(x).max(axis=-1, keepdims=True)
    return np.exp2(np.floor(np.log2(np.maximum(m, 1.0)))).astype(x.dtype)


def layer_norm(x, gamma, beta, eps: float = 1e-5) -> np.ndarray:
    """LN(x) = gamma * (x - mu) / sqrt(sigma^2 + eps) + beta over the feature axis of each position.

    Args:
        x: ``[..., d]``; gamma, beta: ``[d]``. Uses the biased variance, as PyTorch does.
    Returns:
        ``[..., d]``.
    """
    x = as_float("x", x, min_ndim=1)
    eps = non_negative_float("eps", eps)
    gamma, beta = as_float("gamma", gamma, ndim=1), as_float("beta", beta, ndim=1)
    if gamma.shape[0] != x.shape[-1] or beta.shape[0] != x.shape[-1]:
        raise ValueError(
            f"gamma {list(gamma.shape)} / beta {list(beta.shape)} must match x's width {x.shape[-1]}"
        )
    # Computed on x / s, s = max |x| per row, so the mean and the squares cannot overflow at 1e308:
    # (x - mu) / sqrt(var + eps) = (x' - mu') / sqrt(var' + eps / s^2) exactly, with x' = x / s.
    s = _row_scale(x)  # [..., 1]
    xs = x / s
    mu = xs.mean(axis=-1, keepdims=True)  # [..., 1]
    var = ((xs - mu) ** 2).mean(axis=-1, keepdims=True)  # [..., 1]
    _check_denominator("layer_norm", var, eps, "constant")
    # a constant row is x - mu = 0 whatever its size: beta (for a huge one eps / s^2 underflows to 0
    # and the quotient would be 0/0; the mean of equal values can round, so test equality, not var)
    constant = x.max(axis=-1, keepdims=True) == x.min(axis=-1, keepdims=True)  # [..., 1]
    with np.errstate(under="ignore", over="ignore", invalid="ignore", divide="ignore"):
        normed = np.where(constant, 0.0, (xs - mu) / np.sqrt(var + eps / s**2))  # [..., d]
    return gamma * normed.astype(x.dtype) + beta


def rms_norm(x, gamma, eps: float = 1e-6) -> np.ndarray:
    """RMSNorm(x) = gamma * x / sqrt(mean(x^2) + eps): no centring, no beta.

    Args:
        x: ``[..., d]``; gamma: ``[d]``.
    Returns:
        ``[..., d]``.
    """
    x = as_float("x", x, min_ndim=1)
    eps = non_negative_float("eps", eps)
    gamma = as_float("gamma", gamma, ndim=1)
    if gamma.shape[0] != x.shape[-1]:
        raise ValueError(f"gamma {list(gamma.shape)} must match x's width {x.shape[-1]}")
    s = _row_scale(x)  # [..., 1]: x^2 of 1e200 would overflow; x / sqrt(ms + eps) is scale-free
    xs = x / s
    ms = (xs**2).mean(axis=-1, keepdims=True)  # [..., 1]
    _check_denominator("rms_norm", ms, eps, "all-zero")
    with np.errstate(under="ignore", over="ignore"):  # eps / s^2 -> 0 for huge rows: right
        return gamma * xs / np.sqrt(ms + eps / s**2)


def feed_forward(x, params: dict, activation: str = "relu") -> np.ndarray:
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2, applied to every position independently.

    Args:
        x: ``[..., d_model]``. params: ``W_1 [d_model, d_ff]``, ``W_2 [d_ff, d_model]``, optional
            ``b_1 [d_ff]``, ``b_2 [d_model]``. activation: ``"relu"``, ``"gelu"`` or ``"gelu_tanh"``.
    Returns:
        ``[..., d_model]``.
    """
    x = as_float("x", x, min_ndim=1)
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    for key in ("W_1", "W_2"):
        if key not in params:
            raise ValueError(f"params is missing {key!r} (has {sorted(params)})")
    W_1 = as_float("params['W_1']", params["W_1"], ndim=2)
    W_2 = as_float("params['W_2']", params["W_2"], ndim=2)
    if W_1.shape[0] != x.shape[-1]:
        raise ValueError(f"W_1 has shape {list(W_1.shape)} but x {list(x.shape)} has d_model={x.shape[-1]}")
    if W_2.shape[0] != W_1.shape[1]:
        raise ValueError(
            f"W_2 has shape {list(W_2.shape)} but W_1 {list(W_1.shape)} gives d_ff={W_1.shape[1]}"
        )
    b_1 = None if params.get("b_1") is None else as_float("params['b_1']", params["b_1"], ndim=1)
    b_2 = None if params.get("b_2") is None else as_float("params['b_2']", params["b_2"], ndim=1)
    if b_1 is not None and b_1.shape[0] != W_1.shape[1]:
        raise ValueError(
            f"b_1 has shape {list(b_1.shape)} but W_1 {list(W_1.shape)} gives d_ff={W_1.shape[1]}"
        )
    if b_2 is not None and b_2.shape[0] != W_2.shape[1]:
        raise ValueError(
            f"b_2 has shape {list(b_2.shape)} but W_2 {list(W_2.shape)} has width {W_2.shape[1]}"
        )
    hid = x @ W_1  # [..., d_ff]
    if b_1 is not None:
        hid = hid + b_1
    out = ACTIVATIONS[activation](hid) @ W_2  # [..., d_model]
    return out + b_2 if b_2 is not None else out


def _require(params, keys: tuple[str, ...], where: str = "params") -> None:
    """A ``ValueError`` naming the first missing group (not a bare ``KeyError``)."""
    if not isinstance(params, dict):
        raise ValueError(f"{where} must be a dict, got {type(params).__name__}")
    for key in keys:
        if key not in params:
            raise ValueError(f"{where} is missing {key!r} (has {sorted(params)})")


def _norm(x: np.ndarray, p: dict, eps: float, name: str = "norm") -> np.ndarray:
    _require(p, ("gamma",), f"params[{name!r}]")
    if p.get("beta") is None:
        return rms_norm(x, p["gamma"], eps)
    return layer_norm(x, p["gamma"], p["beta"], eps)


def _check_norm(norm: str) -> None:
    if norm not in ("post", "pre"):
        raise ValueError(f"norm must be 'post' or 'pre', got {norm!r}")


def encoder_layer(
    x,
    params: dict,
    num_heads: int,
    *,
    norm: str = "post",
    activation: str = "relu",
    mask=None,
    eps: float = 1e-5,
    num_kv_heads: int | None = None,
    empty_rows: str = "error",
) -> np.ndarray:
    """One Transformer encoder layer.

    post: U = LN_1(X + MHA(X)), Y = LN_2(U + FFN(U));  pre: U = X + MHA(LN_1(X)), Y = U + FFN(LN_2(U)).

    Args:
        x: ``[B, T, d_model]``. params: ``{"attn", "ffn", "norm1", "norm2"}``.
        mask: bool broadcastable to ``[B, T, T]`` (e.g. :func:`padding_mask`).
        empty_rows: a query row the mask leaves with no key: ``"error"`` or ``"zero"``
            (the one policy, docs/reference.md#empty-rows; as :func:`scaled_dot_product_attention`).
    Returns:
        ``[B, T, d_model]``: the layer preserves the shape.
    """
    _check_norm(norm)
    x = as_float("x", x, ndim=3)
    _require(params, ("attn", "ffn", "norm1", "norm2"))

    def attn(z):
        kw = dict(num_kv_heads=num_kv_heads, mask=mask, empty_rows=empty_rows)
        return multi_head_attention(z, z, params["attn"], num_heads, **kw)[0]

    if norm == "post":
        u = _norm(x + attn(x), params["norm1"], eps, "norm1")  # [B, T, d]
        return _norm(u + feed_forward(u, params["ffn"], activation), params["norm2"], eps, "norm2")
    u = x + attn(_norm(x, params["norm1"], eps, "norm1"))  # [B, T, d]
    return u + feed_forward(_norm(u, params["norm2"], eps, "norm2"), params["ffn"], activation)


def decoder_layer(
    y,
    memory,
    params: dict,
    num_heads: int,
    *,
    norm: str = "post",
    activation: str = "relu",
    self_mask=None,
    memory_mask=None,
    eps: float = 1e-5,
    num_kv_heads: int | None = None,
    empty_rows: str = "error",
) -> np.ndarray:
    """One Transformer decoder layer: masked self-attention, cross-attention over ``memory``, FFN.

    post: A = LN_1(Y + SelfAttn(Y)), C = LN_2(A + CrossAttn(A, M)), Z = LN_3(C + FFN(C));
    pre:  A = Y + SelfAttn(LN_1(Y)), C = A + CrossAttn(LN_2(A), M), Z = C + FFN(LN_3(C)).

    Args:
        y: ``[B, T_tgt, d_model]``. memory: ``[B, T_src, d_model]`` (encoder output).
        self_mask: bool broadcastable to ``[B, T_tgt, T_tgt]`` (usually :func:`causal_mask`).
        memory_mask: bool broadcastable to ``[B, T_tgt, T_src]`` (source padding).
        empty_rows: ``"error"`` or ``"zero"`` for a query row left with no key, in both attentions.
    Returns:
        ``[B, T_tgt, d_model]``.
    """
    _check_norm(norm)
    y = as_float("y", y, ndim=3)
    memory = as_float("memory", memory, ndim=3)
    _require(params, ("self_attn", "cross_attn", "ffn", "norm1", "norm2", "norm3"))

    def self_attn(z):
        kw = dict(num_kv_heads=num_kv_heads, mask=self_mask, empty_rows=empty_rows)
        return multi_head_attention(z, z, params["self_attn"], num_heads, **kw)[0]

    def cross_attn(z):
        kw = dict(num_kv_heads=num_kv_heads, mask=memory_mask, empty_rows=empty_rows)
        return multi_head_attention(z, memory, params["cross_attn"], num_heads, **kw)[0]

    n1, n2, n3 = params["norm1"], params["norm2"], params["norm3"]
    if norm == "post":
        a = _norm(y + self_attn(y), n1, eps, "norm1")  # [B, T_tgt, d]
        c = _norm(a + cross_attn(a), n2, eps, "norm2")  # [B, T_tgt, d]
        return _norm(c + feed_forward(c, params["ffn"], activation), n3, eps, "norm3")
    a = y + self_attn(_norm(y, n1, eps, "norm1"))
    c = a + cross_attn(_norm(a, n2, eps, "norm2"))
    return c + feed_forward(_norm(c, n3, eps, "norm3"), params["ffn"], activation)
