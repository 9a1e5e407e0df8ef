"""Learner files for the grader tests: a correct solution written independently of attnlab (plain
NumPy, einsum for the scores) and the seeded mistakes as edits of its text.

Test modules get them through the ``learner_file`` fixture (tests cannot import each other under
--import-mode=importlib); each file is written into the test's own tmp folder.
"""

import glob

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


def overriding(bodies: dict[str, str], prelude: str = "") -> str:
    """The correct solution (and ``prelude``) with ``bodies`` (function name -> source of a
    replacement ``def``) appended, so the replacements win; attention and multi-head attention keep
    private working copies of softmax, split_heads and merge_heads, so only the replaced functions'
    checks fail."""
    text = CORRECT.replace("softmax(scores, axis=-1)", "_softmax(scores)") + prelude
    text = text.replace("= split_heads(", "= _split(").replace("merge_heads(heads)", "_merge(heads)")
    text += "\n\ndef _softmax(x):\n    e = np.exp(x - x.max(-1, keepdims=True))\n"
    text += "    return e / e.sum(-1, keepdims=True)\n"
    text += "\n\ndef _split(x, h):\n    b, t, d = x.shape\n"
    text += "    return x.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)\n"
    text += "\n\ndef _merge(x):\n    b, h, t, dk = x.shape\n"
    text += "    return x.transpose(0, 2, 1, 3).reshape(b, t, h * dk)\n"
    return text + "".join(f"\n\n{body.strip()}\n" for body in bodies.values())


def workers_of(path) -> list[int]:
    """Processes whose command line names the learner's file (the worker and anything it forked)."""
    pids = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(cmdline, "rb") as f:
                if str(path).encode() in f.read():
                    pids.append(int(cmdline.split("/")[2]))
        except OSError:
            continue  # ended meanwhile
    return pids


@pytest.fixture
def learner_file(tmp_path):
    """``learner_file(text=None, mistake=None, name=...)``: write a learner's file, return its path.
    ``learner_file.overriding(bodies)`` is the text of a file with some functions replaced and
    ``learner_file.workers_of(path)`` the processes running a file (see the functions here)."""

    def write(text: str | None = None, mistake: str | None = None, name: str = "attention.py"):
        path = tmp_path / name
        path.write_text(text if text is not None else seeded(mistake) if mistake else CORRECT)
        return path

    write.SEEDED = SEEDED
    write.CORRECT = CORRECT
    write.overriding = overriding
    write.workers_of = workers_of
    return write
