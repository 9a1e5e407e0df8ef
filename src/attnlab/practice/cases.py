"""The checks of the attention exercise: inputs and the oracle's expected output.

Small worked cases first, with the numbers of the Week 1 notes and their plain-language version
(softmax of the scores [2, 0] is [0.881, 0.119]; Q = K = V = I with d_k = 2; raw scores [8, 0] at
d_k = 64 give [0.731, 0.269] scaled and [0.9997, 0.0003] unscaled; q = 1, k_1 = k_2 = 0,
v = [1, 0], [0, 2] gives z = [0.5, 1]; heads [1, 2] and [3, 4] concatenate to [1, 2, 3, 4]), then
random shapes from a seeded generator: batch and heads, T_q != T_k, d_k != d_v, padding masks,
causal masks with T_q < T_k, float32 and float64, and logits of +-1e4.

Oracles: attention outputs come from ``torch.nn.functional.scaled_dot_product_attention``; the
weights, softmax, masks, head splits and multi-head attention from :mod:`attnlab.ref`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from attnlab import ref

F32 = (1e-5, 1e-4)  # (atol, rtol) for float32 inputs
F64 = (1e-8, 1e-6)  # for float64: loose enough for any order of summation


@dataclass
class Check:
    """One check: call ``function(*args, **kwargs)`` and compare with ``expected``.

    ``expected`` is one array or, for attention, ``(out [..., T_q, d_v], weights [..., T_q, T_k])``;
    ``oracle`` names where it came from; ``tol`` is ``(atol, rtol)``.
    """

    id: str
    function: str
    title: str
    args: tuple
    expected: object
    oracle: str
    kwargs: dict = field(default_factory=dict)
    tol: tuple[float, float] = F64


def _torch_sdpa(q, k, v, mask=None) -> np.ndarray:
    """softmax(Q K^T / sqrt(d_k) + M) V by torch's fused kernel, in the inputs' dtype."""
    import torch
    import torch.nn.functional as F

    t = lambda a: torch.from_numpy(np.array(a))  # a writable copy
    m = None if mask is None else t(np.broadcast_to(mask, q.shape[:-1] + (k.shape[-2],)))
    return F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=m).numpy()


def _sdpa(cid: str, title: str, q, k, v, mask=None) -> Check:
    _, weights = ref.scaled_dot_product_attention(q, k, v, mask)
    tol = F32 if q.dtype == np.float32 else F64
    return Check(
        cid,
        "scaled_dot_product_attention",
        title,
        (q, k, v),
        (_torch_sdpa(q, k, v, mask), weights.astype(q.dtype)),
        "torch SDPA (out), attnlab.ref (weights)",
        {"mask": mask},
        tol,
    )


def _padding(rng: np.random.Generator, b: int, t_k: int) -> tuple[np.ndarray, list[int]]:
    lengths = [int(x) for x in rng.integers(1, t_k + 1, size=b)]
    lengths[0] = t_k - 1 if t_k > 1 else 1  # at least one sequence really padded
    return ref.padding_mask(lengths, t_k)[:, None], lengths  # [B, 1, 1, T_k]


def _mha(cid: str, title: str, rng, x_q, x_kv, h: int, mask=None, dtype=np.float64) -> Check:
    d = x_q.shape[-1]
    w = {n: (rng.normal(size=(d, d)) / np.sqrt(d)).astype(dtype) for n in ("W_q", "W_k", "W_v", "W_o")}
    out, _ = ref.multi_head_attention(x_q, x_kv, dict(w), h, mask=mask)
    args = (x_q, x_kv, w["W_q"], w["W_k"], w["W_v"], w["W_o"], h)
    tol = F32 if dtype == np.float32 else F64
    return Check(
        cid, "multi_head_attention", title, args, out.astype(dtype), "attnlab.ref", {"mask": mask}, tol
    )


# The cases of the exercise, in the order the learner meets them: each draws its random inputs from
# the one seeded generator, in this order (so a seed always gives the same checks).
Case = Callable[[np.random.Generator], list[Check]]
CASES: list[Case] = []


def case(fn: Case) -> Case:
    """Register ``fn(rng) -> [Check, ...]`` as the next case of the exercise."""
    CASES.append(fn)
    return fn


def attention_checks(seed: int = 0) -> list[Check]:
    """Every check of the attention exercise, worked cases first; random inputs from ``seed``."""
    rng = np.random.default_rng(seed)
    return [check for make in CASES for check in make(rng)]


def _normal(rng: np.random.Generator, *shape: int, dtype=np.float64) -> np.ndarray:
    return rng.normal(size=shape).astype(dtype)


def _ref_check(cid: str, function: str, title: str, args: tuple, expected, **kwargs) -> Check:
    """A check whose oracle is :mod:`attnlab.ref` (``expected`` computed by the caller from it)."""
    return Check(cid, function, title, args, expected, "attnlab.ref", kwargs)


# ------------------------------------------------------------------------------------- softmax
@case
def _softmax(rng):
    e = np.array([2.0, 0.0])
    x, cols = _normal(rng, 2, 3, 5), _normal(rng, 4, 3)
    large = np.array([[1e4, 0.0, -1e4], [-1e4, -1e4 + 1.0, -1e4 + 2.0]])
    return [
        _ref_check(
            "softmax-worked",
            "softmax",
            "softmax of the plain-language notes' scores [2, 0] is [0.881, 0.119]",
            (e,),
            ref.softmax(e),
        ),
        _ref_check(
            "softmax-random",
            "softmax",
            "softmax over the last axis of [2, 3, 5]",
            (x,),
            ref.softmax(x, axis=-1),
            axis=-1,
        ),
        _ref_check(
            "softmax-axis0",
            "softmax",
            "softmax(x, axis=0) of [4, 3] (columns sum to 1)",
            (cols,),
            ref.softmax(cols, axis=0),
            axis=0,
        ),
        _ref_check(
            "softmax-large",
            "softmax",
            "softmax of logits of +-1e4 (no overflow)",
            (large,),
            ref.softmax(large),
            axis=-1,
        ),
    ]


# ------------------------------------------------------------------------------------- masks
@case
def _causal_masks(rng):
    return [
        _ref_check(
            f"causal-{t_q}x{t_k}",
            "causal_mask",
            f"causal_mask({t_q}, {t_k})" + (": T_q < T_k, aligned to the lower right" if t_q < t_k else ""),
            (t_q, t_k),
            ref.causal_mask(t_q, t_k),
        )
        for t_q, t_k in ((4, 4), (3, 5))
    ]


# ------------------------------------------------------------------------------------- attention
@case
def _sdpa_worked(rng):
    """The worked examples: Q = K = V = I and the 1/sqrt(d_k) scale (the plain-language notes), a sum
    of values (the Week 1 notes)."""
    eye = np.eye(2)[None]  # [1, T=2, d_k=2]
    q_scale = np.ones((1, 1, 64))  # [1, T_q=1, d_k=64]
    k_scale = np.stack([np.full(64, 8 / 64), np.zeros(64)])[None]  # [1, 2, 64]: raw scores [8, 0]
    q_one, k_zero = np.ones((1, 1, 1)), np.zeros((1, 2, 1))
    v = np.array([[[1.0, 0.0], [0.0, 2.0]]])  # [1, 2, d_v=2]
    return [
        _sdpa(
            "sdpa-worked-identity",
            "the plain-language notes' example Q = K = V = I (d_k = 2): "
            "weights [[0.670, 0.330], [0.330, 0.670]]",
            eye,
            eye,
            eye,
        ),
        _sdpa(
            "sdpa-worked-scale",
            "the plain-language notes' raw scores [8, 0] at d_k = 64: "
            "weights [0.731, 0.269], not [0.9997, 0.0003]",
            q_scale,
            k_scale,
            np.eye(2)[None],
        ),
        _sdpa(
            "sdpa-worked-values",
            "the Week 1 notes' q = 1, k = 0, v = [1, 0], [0, 2]: z = [0.5, 1] (a sum of values)",
            q_one,
            k_zero,
            v,
        ),
    ]


@case
def _sdpa_random(rng):
    """Batch and heads, T_q != T_k, d_k != d_v, padding, causal with T_q < T_k, float32."""
    b, h, f32 = 2, 3, np.float32
    n = lambda *shape, dtype=np.float64: _normal(rng, *shape, dtype=dtype)
    checks = [
        _sdpa(
            "sdpa-random",
            f"random [B={b}, h={h}, T=4, d=8], no mask",
            n(b, h, 4, 8),
            n(b, h, 4, 8),
            n(b, h, 4, 8),
        ),
        _sdpa(
            "sdpa-shapes", "T_q=3 != T_k=6 and d_k=8 != d_v=5", n(b, h, 3, 8), n(b, h, 6, 8), n(b, h, 6, 5)
        ),
    ]
    mask, lengths = _padding(rng, b, 6)
    title = f"padding mask [B, 1, 1, T_k] (lengths {lengths} of 6)"
    checks.append(_sdpa("sdpa-padding", title, n(b, h, 4, 8), n(b, h, 6, 8), n(b, h, 6, 5), mask))
    title = "causal mask with T_q=3 < T_k=6 (aligned to the lower right)"
    checks.append(
        _sdpa("sdpa-causal", title, n(b, h, 3, 8), n(b, h, 6, 8), n(b, h, 6, 8), ref.causal_mask(3, 6))
    )
    q, k, v = (n(b, h, 5, 8, dtype=f32) for _ in range(3))
    checks.append(
        _sdpa("sdpa-float32", "float32 inputs with a causal mask (T=5)", q, k, v, ref.causal_mask(5, 5))
    )
    return checks


@case
def _sdpa_large(rng):
    """d_k = 1: scores q k_j of +-1e4, the largest of them masked."""
    v = _normal(rng, 1, 4, 3)
    mask = np.array([[False, True, True, True], [True, True, False, True]])
    q, k = np.array([[[100.0]]]), np.array([[[100.0], [99.0], [0.0]]])  # scores [1e4, 9900, 0]
    checks = [
        _sdpa(
            "sdpa-large-scores",
            "logits of 1e4 without a mask (exp(1e4) overflows)",
            q,
            k,
            _normal(rng, 1, 3, 2),
        )
    ]
    q = np.array([[[100.0], [-100.0]]])  # [1, T_q=2, 1]
    k = np.array([[[100.0], [0.0], [-100.0], [1.0]]])  # [1, T_k=4, 1]
    checks.append(
        _sdpa("sdpa-large-logits", "logits of +-1e4 with masked keys among the largest", q, k, v, mask)
    )
    q, k = np.array([[[100.0]]]), np.array([[[-200.0], [-150.0], [50.0]]])  # scores [-2e4, -1.5e4, 5000]
    checks.append(
        _sdpa(
            "sdpa-very-negative",
            "real scores of -2e4 and -1.5e4, a masked one of 5000 (a finite -1e4 fill would win)",
            q,
            k,
            _normal(rng, 1, 3, 2),
            np.array([True, True, False]),
        )
    )
    return checks


# ------------------------------------------------------------------------------------- heads
@case
def _heads(rng):
    x = _normal(rng, 2, 5, 12)
    heads = np.array([[[[1.0, 2.0]], [[3.0, 4.0]]]])  # [B=1, h=2, T=1, d_k=2]
    y = _normal(rng, 2, 3, 5, 4)
    return [
        _ref_check(
            "split-heads",
            "split_heads",
            "split_heads([2, 5, 12], 3) -> [2, 3, 5, 4]",
            (x, 3),
            ref.split_heads(x, 3),
        ),
        _ref_check(
            "merge-worked",
            "merge_heads",
            "the Week 1 notes' heads [1, 2] and [3, 4] concatenate to [1, 2, 3, 4]",
            (heads,),
            ref.merge_heads(heads),
        ),
        _ref_check(
            "merge-heads", "merge_heads", "merge_heads([2, 3, 5, 4]) -> [2, 5, 12]", (y,), ref.merge_heads(y)
        ),
    ]


@case
def _multi_head(rng):
    """Self-attention, cross-attention with padding, causal float32."""
    x = _normal(rng, 2, 5, 12)
    checks = [_mha("mha-self", "self-attention [2, 5, 12], 3 heads", rng, x, x, 3)]
    mask, lengths = _padding(rng, 2, 7)
    title = f"cross-attention T_q=4, T_k=7, 4 heads, padding (lengths {lengths})"
    checks.append(_mha("mha-cross", title, rng, _normal(rng, 2, 4, 16), _normal(rng, 2, 7, 16), 4, mask))
    x = _normal(rng, 2, 6, 8, dtype=np.float32)
    title = "causal self-attention, float32 [2, 6, 8], 2 heads"
    checks.append(
        _mha("mha-causal-float32", title, rng, x, x, 2, ref.causal_mask(6, 6)[None, None], np.float32)
    )
    return checks
