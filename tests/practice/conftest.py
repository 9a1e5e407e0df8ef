"""Learner files for the grader tests: a correct solution written independently of attnlab (plain
NumPy, einsum for the scores) and the seeded mistakes as edits of its text.

Test modules get them through the ``learner_file`` fixture (tests cannot import each other under
--import-mode=importlib); each file is written into the test's own tmp folder.
"""

import pytest

CORRECT = """import numpy as np


def softmax(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def causal_mask(t_q, t_k):
    rows = np.arange(t_q)[:, None] + (t_k - t_q)
    cols = np.arange(t_k)[None, :]
    return cols <= rows


def scaled_dot_product_attention(q, k, v, mask=None):
    d_k = q.shape[-1]
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(d_k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return np.einsum("...qk,...kd->...qd", weights, v), weights


def split_heads(x, num_heads):
    b, t, d = x.shape
    return x.reshape(b, t, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    b, h, t, dk = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * dk)


def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, num_heads, mask=None):
    q = split_heads(x_q @ W_q, num_heads)
    k = split_heads(x_kv @ W_k, num_heads)
    v = split_heads(x_kv @ W_v, num_heads)
    heads, _ = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(heads) @ W_o
"""

# mistake key the grader must name -> (text of the correct solution, what the learner wrote instead)
SEEDED = {
    "softmax-over-queries": ("weights = softmax(scores, axis=-1)", "weights = softmax(scores, axis=-2)"),
    "no-scale": (" / np.sqrt(d_k)", ""),
    "scale-by-d_k": ("/ np.sqrt(d_k)", "/ d_k"),
    "mask-after-softmax": (
        "    if mask is not None:\n        scores = np.where(mask, scores, -np.inf)\n"
        "    weights = softmax(scores, axis=-1)\n",
        "    weights = softmax(scores, axis=-1)\n    if mask is not None:\n"
        "        weights = weights * mask\n",
    ),
    "finite-mask": ("np.where(mask, scores, -np.inf)", "scores + np.where(mask, 0.0, -1e4)"),
    "mask-inverted": ("np.where(mask, scores, -np.inf)", "np.where(mask, -np.inf, scores)"),
    "causal-upper-left": ("np.arange(t_q)[:, None] + (t_k - t_q)", "np.arange(t_q)[:, None]"),
    "causal-strict": ("cols <= rows", "cols < rows"),
    "split-without-transpose": (
        "x.reshape(b, t, num_heads, d // num_heads).transpose(0, 2, 1, 3)",
        "x.reshape(b, num_heads, t, d // num_heads)",
    ),
    "merge-without-transpose": ("x.transpose(0, 2, 1, 3).reshape(b, t, h * dk)", "x.reshape(b, t, h * dk)"),
    "wo-on-the-left": (
        "merge_heads(heads) @ W_o",
        "(W_o @ np.swapaxes(merge_heads(heads), -1, -2)).swapaxes(-1, -2)",
    ),
    "unstable-softmax": ("shifted = x - np.max(x, axis=axis, keepdims=True)", "shifted = x"),
    "keys-not-values": ('"...qk,...kd->...qd", weights, v)', '"...qk,...kd->...qd", weights, k)'),
    "projections-transposed": (
        "(x_q @ W_q, num_heads)\n    k = split_heads(x_kv @ W_k, num_heads)\n    v = split_heads(x_kv @ W_v,",
        "(x_q @ W_q.T, num_heads)\n    k = split_heads(x_kv @ W_k.T, num_heads)\n"
        "    v = split_heads(x_kv @ W_v.T,",
    ),
}


def seeded(key: str) -> str:
    """The correct solution with the one mistake ``key`` written in."""
    old, new = SEEDED[key]
    assert CORRECT.count(old) == 1, key
    return CORRECT.replace(old, new)


@pytest.fixture
def learner_file(tmp_path):
    """``learner_file(text=None, mistake=None, name=...)``: write a learner's file, return its path."""

    def write(text: str | None = None, mistake: str | None = None, name: str = "attention.py"):
        path = tmp_path / name
        path.write_text(text if text is not None else seeded(mistake) if mistake else CORRECT)
        return path

    write.SEEDED = SEEDED
    write.CORRECT = CORRECT
    return write
