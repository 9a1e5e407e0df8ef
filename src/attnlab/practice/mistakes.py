"""The known mistakes of the attention exercise, each one a runnable wrong solution.

The grader diagnoses a failed check by running every mistake on the check's inputs and comparing
the learner's output with each mistake's output: the one that matches (within the check's
tolerance) is named. The list comes from the Week 1 notes on attention (sections 2-3 and their
"Dangerous Misconception" items), their plain-language version ("Mistakes people make") and the
Week 19 course page.

:class:`Baseline` is the six exercise functions written plainly in NumPy, so a mistake is one
overridden method and it propagates the way the learner's would (a softmax over the wrong axis
also spoils attention and multi-head attention). The baseline is never the oracle: checks compare
against ``torch.nn.functional.scaled_dot_product_attention`` and :mod:`attnlab.ref`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnlab._checks import did_you_mean


class Baseline:
    """The exercise's six functions, one plain NumPy line or two each (signatures of the starter)."""

    def softmax(self, x, axis=-1):
        """softmax(x)_i = exp(x_i - max x) / sum_j exp(x_j - max x) over ``axis``."""
        z = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return z / z.sum(axis=axis, keepdims=True)

    def causal_mask(self, t_q, t_k):
        """bool ``[t_q, t_k]``: query i (absolute position t_k - t_q + i) may see keys 0..that position."""
        return np.tril(np.ones((t_q, t_k), dtype=bool), k=t_k - t_q)

    def scores(self, q, k):
        """Q K^T / sqrt(d_k): ``[..., T_q, d_k] x [..., T_k, d_k] -> [..., T_q, T_k]``."""
        return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])

    def masked(self, s, mask):
        """s + M with M = -inf where ``mask`` is False."""
        return s if mask is None else np.where(mask, s, -np.inf)

    def scaled_dot_product_attention(self, q, k, v, mask=None):
        """(softmax(Q K^T / sqrt(d_k) + M) V, weights)."""
        w = self.softmax(self.masked(self.scores(q, k), mask), axis=-1)
        return self.combine(w, k, v), w

    def combine(self, w, k, v):
        """A V: ``[..., T_q, T_k] x [..., T_k, d_v] -> [..., T_q, d_v]``."""
        return w @ v

    def split_heads(self, x, num_heads):
        """``[B, T, d] -> [B, h, T, d/h]``."""
        b, t, d = x.shape
        return x.reshape(b, t, num_heads, d // num_heads).transpose(0, 2, 1, 3)  # [B, h, T, d/h]

    def merge_heads(self, x):
        """``[B, h, T, d_k] -> [B, T, h d_k]``."""
        b, h, t, dk = x.shape
        return x.transpose(0, 2, 1, 3).reshape(b, t, h * dk)  # [B, T, h*d_k]

    def project(self, x, w):
        """x W with ``W [d_in, d_out]``."""
        return x @ w

    def output(self, concat, w_o):
        """Concat(heads) W^O."""
        return concat @ w_o

    def multi_head_attention(self, x_q, x_kv, W_q, W_k, W_v, W_o, num_heads, mask=None):
        """Concat(head_1..head_h) W^O, head_i = Attention(X_q W_i^Q, X_kv W_i^K, X_kv W_i^V)."""
        q = self.split_heads(self.project(x_q, W_q), num_heads)  # [B, h, T_q, d_k]
        k = self.split_heads(self.project(x_kv, W_k), num_heads)  # [B, h, T_k, d_k]
        v = self.split_heads(self.project(x_kv, W_v), num_heads)  # [B, h, T_k, d_v]
        heads, _ = self.scaled_dot_product_attention(q, k, v, mask)
        return self.output(self.merge_heads(heads), W_o)  # [B, T_q, d]


class SoftmaxOverQueries(Baseline):
    def scaled_dot_product_attention(self, q, k, v, mask=None):
        w = self.softmax(self.masked(self.scores(q, k), mask), axis=-2)  # columns sum to 1
        return self.combine(w, k, v), w


class SoftmaxIgnoresAxis(Baseline):
    def softmax(self, x, axis=-1):
        return super().softmax(x, axis=0)


class NoScale(Baseline):
    def scores(self, q, k):
        return q @ np.swapaxes(k, -1, -2)


class ScaleByDk(Baseline):
    def scores(self, q, k):
        return q @ np.swapaxes(k, -1, -2) / q.shape[-1]


class ScaleByDv(Baseline):
    def scaled_dot_product_attention(self, q, k, v, mask=None):
        s = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
        w = self.softmax(self.masked(s, mask), axis=-1)
        return w @ v, w


class MaskAfterSoftmax(Baseline):
    def scaled_dot_product_attention(self, q, k, v, mask=None):
        w = self.softmax(self.scores(q, k), axis=-1)
        w = w if mask is None else np.where(mask, w, 0.0)  # zeroed, never renormalised
        return w @ v, w


class FiniteMask(Baseline):
    def masked(self, s, mask):
        return s if mask is None else np.where(mask, s, s - 1e4)  # s + (-1e4): leaks at large logits


class FiniteMaskFill(Baseline):
    def masked(self, s, mask):
        return s if mask is None else np.where(mask, s, -1e4)  # masked_fill(-1e4)


class MaskIgnored(Baseline):
    def masked(self, s, mask):
        return s


class MaskInverted(Baseline):
    def masked(self, s, mask):
        return s if mask is None else np.where(mask, -np.inf, s)


class CausalUpperLeft(Baseline):
    def causal_mask(self, t_q, t_k):
        return np.tril(np.ones((t_q, t_k), dtype=bool))


class CausalInverted(Baseline):
    def causal_mask(self, t_q, t_k):
        return ~super().causal_mask(t_q, t_k)


class CausalStrict(Baseline):
    def causal_mask(self, t_q, t_k):
        return np.tril(np.ones((t_q, t_k), dtype=bool), k=t_k - t_q - 1)


class UnstableSoftmax(Baseline):
    def softmax(self, x, axis=-1):
        with np.errstate(over="ignore", invalid="ignore"):
            z = np.exp(x)
            return z / z.sum(axis=axis, keepdims=True)


class KeysNotValues(Baseline):
    def combine(self, w, k, v):
        return w @ k


class SplitWithoutTranspose(Baseline):
    def split_heads(self, x, num_heads):
        b, t, d = x.shape
        return x.reshape(b, num_heads, t, d // num_heads)  # [B, h, T, d/h] but the wrong numbers


class MergeWithoutTranspose(Baseline):
    def merge_heads(self, x):
        b, h, t, dk = x.shape
        return x.reshape(b, t, h * dk)


class WoOnTheLeft(Baseline):
    def output(self, concat, w_o):
        return concat @ w_o.T  # (W^O concat^T)^T


class ProjectionsTransposed(Baseline):
    def project(self, x, w):
        return x @ w.T


@dataclass(frozen=True)
class Mistake:
    """One known mistake: ``key``, the sentence the grader prints, and its wrong solution."""

    key: str
    explanation: str
    solution: type[Baseline]


MISTAKES: tuple[Mistake, ...] = (
    Mistake(
        "softmax-over-queries",
        "softmax over the wrong axis: over the queries, so each column of the weights sums to 1 "
        "instead of each row (normalise over the keys, the last axis)",
        SoftmaxOverQueries,
    ),
    Mistake(
        "softmax-ignores-axis",
        "softmax ignores its axis argument and always normalises over axis 0",
        SoftmaxIgnoresAxis,
    ),
    Mistake(
        "no-scale",
        "no 1/sqrt(d_k): the scores are sqrt(d_k) times too large, so the weights are too peaked "
        "by exactly that factor",
        NoScale,
    ),
    Mistake("scale-by-d_k", "scores divided by d_k instead of sqrt(d_k): weights too flat", ScaleByDk),
    Mistake("scale-by-d_v", "scores divided by sqrt(d_v) instead of sqrt(d_k) (the key width)", ScaleByDv),
    Mistake(
        "mask-after-softmax",
        "mask applied after the softmax: masked weights are zeroed but the rows no longer sum to 1",
        MaskAfterSoftmax,
    ),
    Mistake(
        "finite-mask",
        "finite mask value (-1e4) instead of -inf: at logits of 1e4 the masked keys still get weight",
        FiniteMask,
    ),
    Mistake(
        "finite-mask-fill",
        "masked scores set to a finite -1e4 instead of -inf: at logits of -1e4 and below the masked "
        "keys get as much weight as the real ones",
        FiniteMaskFill,
    ),
    Mistake("mask-ignored", "the mask argument is ignored: masked keys still get weight", MaskIgnored),
    Mistake(
        "mask-inverted",
        "mask convention inverted: True means 'may attend' (as in torch SDPA), not 'hidden'",
        MaskInverted,
    ),
    Mistake(
        "causal-upper-left",
        "causal mask aligned to the upper left (np.tril without an offset): with T_q < T_k the "
        "queries are the LAST T_q positions, so query i sees keys 0..T_k - T_q + i",
        CausalUpperLeft,
    ),
    Mistake("causal-inverted", "causal mask inverted: True must mean 'may attend'", CausalInverted),
    Mistake(
        "causal-strict",
        "causal mask hides the diagonal: a query may attend to its own position",
        CausalStrict,
    ),
    Mistake(
        "unstable-softmax",
        "unstable softmax: exp overflows at large logits (subtract the row maximum first; it does "
        "not change the result)",
        UnstableSoftmax,
    ),
    Mistake(
        "keys-not-values",
        "output is a weighted sum of the keys instead of the values (out = A V, not A K)",
        KeysNotValues,
    ),
    Mistake(
        "split-without-transpose",
        "heads split by a reshape without the transpose: reshape to [B, T, h, d/h], then swap T and h",
        SplitWithoutTranspose,
    ),
    Mistake(
        "merge-without-transpose",
        "heads merged by a reshape without the transpose: swap h and T back before reshaping",
        MergeWithoutTranspose,
    ),
    Mistake(
        "wo-on-the-left",
        "W^O applied on the left (W^O Concat^T, i.e. Concat W^O^T): with row vectors it multiplies on "
        "the right, Concat W^O",
        WoOnTheLeft,
    ),
    Mistake(
        "projections-transposed",
        "projections applied as x W^T: W is [d_in, d_out] and is applied as x @ W",
        ProjectionsTransposed,
    ),
)

MISTAKE_KEYS = tuple(m.key for m in MISTAKES)


def get_mistake(key: str) -> Mistake:
    """The mistake named ``key``; ``ValueError`` naming the known keys otherwise."""
    for m in MISTAKES:
        if m.key == key:
            return m
    hint = did_you_mean(key, MISTAKE_KEYS)
    raise ValueError(f"unknown mistake {key!r}: choose one of {', '.join(MISTAKE_KEYS)}{hint}")
