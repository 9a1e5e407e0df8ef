"""Scores, scaling and softmax: what the attention weights are and are not."""

from __future__ import annotations

import math

import numpy as np

from attnlab import ref
from attnlab.lessons.myths._helpers import fmt
from attnlab.lessons.myths.registry import NOTES, PLAIN, myth


@myth(
    2,
    claim="Scaling by 1/sqrt(d_k) makes every attention row uniform.",
    source=f"{NOTES}, section 2, Dangerous Misconception; {PLAIN}, section 4, Mistakes",
    why_false=(
        "Scaling divides every logit of a row by the same positive number: magnitudes shrink, order "
        "stays, and unequal logits still give unequal weights."
    ),
)
def _scaling_uniform():
    d_k = 64
    q = np.zeros((1, d_k))
    q[0, 0] = 8.0
    k = np.zeros((2, d_k))
    k[0, 0] = 1.0  # raw dot products q.k = [8, 0]
    v = np.eye(2)
    _, w_scaled = ref.scaled_dot_product_attention(q, k, v)  # scores 8/sqrt(64) = [1, 0]
    _, w_raw = ref.scaled_dot_product_attention(q, k, v, scale=1.0)
    rng = np.random.default_rng(1)
    _, w_rand = ref.scaled_dot_product_attention(
        rng.normal(size=(4, d_k)), rng.normal(size=(6, d_k)), rng.normal(size=(6, 3))
    )  # [4, 6]
    spread = float((w_rand.max(axis=-1) - w_rand.min(axis=-1)).min())
    lines = [
        f"d_k={d_k}, raw scores q.k = [8, 0]",
        f"  unscaled softmax        = {fmt(w_raw[0], 4)}",
        f"  scaled by 1/sqrt(d_k)   -> scores [1, 0] -> weights {fmt(w_scaled[0])}",
        "The scaled weights are unequal and keep the order of the logits.",
        f"Random q, k at d_k={d_k}: smallest (max - min) weight within a row = {spread:.3f} (uniform would be 0)",
    ]
    return lines, {
        "unscaled": w_raw[0].tolist(),
        "scaled": w_scaled[0].tolist(),
        "min_row_spread_random": spread,
    }


@myth(
    3,
    claim="The attention output is a weighted sum of the keys.",
    source=f"{NOTES}, section 2, worked example; {PLAIN}, section 3, Mistakes",
    why_false=(
        "Keys only decide the weights (through q.k); the weighted sum is over the values, so the "
        "output has the values' width d_v."
    ),
)
def _sum_over_keys():
    q = np.array([[1.0]])  # d_k = 1
    k = np.array([[0.0], [0.0]])
    v = np.array([[1.0, 0.0], [0.0, 2.0]])
    z, w = ref.scaled_dot_product_attention(q, k, v)
    keys_mix = w @ k  # what a sum over keys would give  [1, d_k]
    lines = [
        "q = 1, k_1 = k_2 = 0, v_1 = [1, 0], v_2 = [0, 2] (the notes' example)",
        f"  scores [0, 0] -> weights {fmt(w[0], 1)}",
        f"  z = sum_j alpha_j v_j = {fmt(z[0], 1)}   (width d_v = 2, the values' width)",
        f"  a sum over keys would give {fmt(keys_mix[0], 1)} (width d_k = 1): not the output",
    ]
    return lines, {"weights": w[0].tolist(), "z": z[0].tolist(), "keys_mix": keys_mix[0].tolist()}


@myth(
    4,
    claim="Softmax normalises over the queries.",
    source=f"{PLAIN}, section 3, Mistakes; {NOTES}, section 2 (A is [T_q, T_k], rows sum to one)",
    why_false=(
        "Each query gets its own distribution over the keys: softmax runs along the key axis, "
        "so rows sum to one and columns need not."
    ),
)
def _softmax_over_queries():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    _, w = ref.scaled_dot_product_attention(q, k, v)  # [T_q=3, T_k=5]
    rows, cols = w.sum(axis=-1), w.sum(axis=0)
    lines = [
        f"T_q=3 queries, T_k=5 keys: weights {list(w.shape)} = [T_q, T_k]",
        f"  row sums (over keys, per query)  = {fmt(rows, 6)}",
        f"  column sums (over queries)       = {fmt(cols)}",
        "Softmax normalises each query's row over the keys; the columns need not sum to one.",
    ]
    return lines, {"row_sums": rows.tolist(), "column_sums": cols.tolist()}


@myth(
    12,
    claim="Dividing by sqrt(d_k) guarantees softmax never saturates.",
    source=f"{NOTES}, section 2, Mathematical formulation; {PLAIN}, section 4, Mistakes",
    why_false=(
        "The variance argument assumes independent unit-variance coordinates; trained projections need "
        "not obey it, and then scaled logits still spread far enough to saturate."
    ),
)
def _no_saturation():
    rng = np.random.default_rng(7)
    d_k, n = 64, 2000
    out = {}
    for sigma in (1.0, 4.0):  # sigma: per-coordinate std of q and k (trained projections need not give 1)
        q = sigma * rng.normal(size=(n, d_k))
        k = sigma * rng.normal(size=(n, 8, d_k))
        scores = np.einsum("nd,ntd->nt", q, k) / math.sqrt(d_k)  # [n, 8]
        w = ref.softmax(scores)  # [n, 8]
        grad = w * (1 - w)  # diagonal of the softmax Jacobian, d alpha_i / d e_i
        out[sigma] = {
            "scaled_std": float(scores.std()),
            "mean_max_weight": float(w.max(-1).mean()),
            "median_max_gradient": float(np.median(grad.max(-1))),
        }
    lines = [
        "Scaled scores q.k/sqrt(d_k) at d_k=64, 8 keys per query, 2000 queries:",
        "  coordinate std  scaled-score std  mean max weight  median max d(alpha)/d(e)",
    ]
    lines += [
        f"  {s:14.0f}  {r['scaled_std']:16.2f}  {r['mean_max_weight']:15.3f}  "
        f"{r['median_max_gradient']:25.4f}"
        for s, r in out.items()
    ]
    lines.append("When q, k are not unit-variance the scaled logits still spread and softmax saturates.")
    return lines, {"sigma_1": out[1.0], "sigma_4": out[4.0]}


@myth(
    13,
    claim="The row and the column input conventions give transposed outputs.",
    source=f"{NOTES}, section 2, Dangerous Misconception",
    why_false=(
        "Transposing the input matrices in the formula gives the same row-oriented output A V; only "
        "a column-oriented output would be transposed."
    ),
)
def _row_column_transpose():
    rng = np.random.default_rng(8)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    z_row, _ = ref.scaled_dot_product_attention(q, k, v)  # rows: Q [T_q, d_k] -> Z [T_q, d_v]
    qc, kc, vc = q.T, k.T, v.T  # the same data stored column-wise: [d_k, T_q], [d_k, T_k], [d_v, T_k]
    z_col, _ = ref.scaled_dot_product_attention(qc.T, kc.T, vc.T)  # transposing the inputs back
    diff = float(np.abs(z_row - z_col).max())
    lines = [
        "Q [3, 4], K [5, 4], V [5, 2] as rows; the same matrices stored as columns Q^T, K^T, V^T.",
        f"  row form softmax(Q K^T / 2) V             -> {list(z_row.shape)}",
        f"  column inputs transposed back, same rule  -> {list(z_col.shape)}, max difference {diff:.1e}",
        "Transposing the inputs leaves the row-oriented output A V unchanged; only a column-oriented",
        f"  output would be its transpose {list(z_row.T.shape)}.",
    ]
    return lines, {"row_shape": list(z_row.shape), "column_shape": list(z_col.shape), "max_difference": diff}


@myth(
    18,
    claim="Scaling is what makes each row sum to one (and it reshapes or adds parameters).",
    source=f"{NOTES}, section 2; {PLAIN}, section 4, Mistakes",
    why_false=(
        "Scaling is a fixed division: no parameters, no shape change, no normalisation. Softmax makes "
        "the rows sum to one."
    ),
)
def _scaling_normalises():
    q = np.array([[1.0, 2.0, 0.0, 1.0]])
    k = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [-1.0, 0.0, 0.0, -1.0]])
    raw = ref.luong_attention(q, k, "dot")[0]  # q.k  [1, 3]
    scaled = raw / math.sqrt(4)
    _, w = ref.scaled_dot_product_attention(q, k, np.eye(3))
    lines = [
        f"raw scores q.k = {fmt(raw[0], 1)}, shape {list(raw.shape)}",
        f"  / sqrt(d_k) = {fmt(scaled[0], 1)}: shape {list(scaled.shape)}, row sum {scaled.sum():.1f}, no parameters",
        f"  softmax     = {fmt(w[0])}: row sum {w.sum():.6f}",
        "Scaling only shrinks the logits; softmax is the step that makes each row a distribution.",
    ]
    return lines, {
        "scaled_row_sum": float(scaled.sum()),
        "softmax_row_sum": float(w.sum()),
        "shape_before": list(raw.shape),
        "shape_after": list(scaled.shape),
    }


@myth(
    26,
    claim="Subtracting the maximum logit changes the softmax.",
    source=f"{NOTES}, section 6",
    why_false=(
        "exp(e_i - m) / sum_j exp(e_j - m) equals the softmax (exp(-m) cancels); it only prevents overflow."
    ),
)
def _subtract_max():
    logits = np.array([1000.0, 999.0])
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.exp(logits) / np.exp(logits).sum()
    stable = ref.softmax(logits)
    small = np.array([1.0, 0.0])
    naive_small = np.exp(small) / np.exp(small).sum()
    same = float(np.abs(ref.softmax(small) - naive_small).max())
    lines = [
        f"logits [1000, 999]: exp without the shift -> {fmt(naive)}; attnlab.ref.softmax -> {fmt(stable)}",
        f"logits [1, 0]: with and without the shift differ by {same:.1e}",
        "Subtracting the max cancels in the ratio: same softmax, no overflow.",
    ]
    return lines, {
        "naive_is_nan": bool(np.isnan(naive).all()),
        "stable": stable.tolist(),
        "small_difference": same,
    }
