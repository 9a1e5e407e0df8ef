"""Check-yourself questions in the style of the notes' worked checks, with random (seeded) numbers.

Every question is drawn by a topic generator from a NumPy ``Generator``; its correct answer is
computed by attnlab's own functions and never stored: shapes by running :mod:`attnlab.ref`'s
layers, weights and contexts with ``softmax`` / ``additive_attention`` /
``scaled_dot_product_attention`` / ``merge_heads``, RoPE angles and YaRN's factor with
``rope_frequencies``, ALiBi slopes with ``alibi_slopes``, parameter counts with
:func:`attnlab.audit.params.audit_params`, FLOPs and KV-cache bytes with
:mod:`attnlab.audit.cost`. Each question
carries a worked solution, step by step. The ``concepts`` topic is the exception: the course
documents' own conceptual questions (:mod:`attnlab.lessons.quiz_concepts`), multiple choice, each
quoting its document by name, the answer and its explanation the documents' own.

Answers are read tolerantly (:func:`parse_answer`): ``1,152``, ``1152``, ``1.152e3``, ``[0.5, 1]``,
``0.5 1``, ``(50, 512)``, ``50x512``, ``1/2``, ``8.59 billion``, ``8.59 x 10^9``. Integer answers
must be exact, except the large counts of FLOPs and KV-cache bytes, which count within
:data:`LARGE_TOL` (0.5%: three significant figures, in any notation) and say so in the question;
real-valued ones within 0.005 + 0.5% (hand arithmetic rounds intermediate values). One quiz never
asks the same question twice (while its topic has questions left to draw).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from attnlab import ref
from attnlab._checks import did_you_mean
from attnlab.lessons.quiz_concepts import BANK


@dataclass(frozen=True)
class Question:
    """One question. ``data`` holds the drawn numbers (so an answer can be recomputed
    independently), ``answer`` the value computed by attnlab, ``integer`` whether it is exact."""

    topic: str
    variant: str
    text: str
    answer: float | tuple[float, ...]
    steps: list[str]
    data: dict = field(default_factory=dict)
    integer: bool = False
    rel_tol: float = 0.0  # an integer answer counts within this fraction of it (0: exact)
    choices: tuple[str, ...] = ()  # multiple choice: the options, A, B, ...; ``answer`` is 1-based

    @property
    def letters(self) -> str:
        """The options' letters, ``"A-D"``."""
        return f"A-{chr(ord('A') + len(self.choices) - 1)}"

    @property
    def is_vector(self) -> bool:
        return isinstance(self.answer, tuple)

    def format_answer(self) -> str:
        if self.choices:
            i = int(self.answer)
            return f"{chr(ord('A') + i - 1)}) {self.choices[i - 1]}"
        return format_value(self.answer, self.integer)

    def tolerance(self) -> str:
        """What counts as right, in words (``""`` when the answer is exact or the usual 3 decimals)."""
        if not self.rel_tol:
            return ""
        return f"within {self.rel_tol:.1%}: 3 significant figures will do, e.g. 1.23e9 or 1.23 billion"


LARGE_TOL = 0.005  # large counts (FLOPs, bytes): three significant figures are enough


def format_value(value, integer: bool) -> str:
    """``1,152`` / ``0.731`` / ``[0.5, 1]`` / ``[4, 12, 512]``."""
    if isinstance(value, tuple):
        return "[" + ", ".join(_num(v, integer) for v in value) + "]"
    return _num(value, integer)


def _num(x: float, integer: bool) -> str:
    if integer:
        return f"{int(round(x)):,}"
    s = f"{x:.3f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _vec(a, digits: int = 3) -> str:
    return (
        "["
        + ", ".join(_num(float(x), False) if digits == 3 else f"{float(x):.{digits}f}" for x in np.ravel(a))
        + "]"
    )


def _m(a) -> str:
    """A matrix or vector of small numbers as nested lists, integers without ``.0``."""
    a = np.asarray(a)
    if a.ndim == 1:
        return "[" + ", ".join(f"{float(x):g}" for x in a) + "]"
    return "[" + ", ".join(_m(row) for row in a) + "]"


# --------------------------------------------------------------------------- parsing and grading

_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?")
_WORDS = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_POWER = re.compile(r"(.+?)[x\u00d7*]10(?:\^|\*\*)([+-]?\d{1,3})", re.IGNORECASE)


def _scalar(token: str) -> float:
    t = token.strip().replace("_", "").replace("\u2212", "-")
    word = re.fullmatch(r"(.+?)\s*(thousand|million|billion|trillion)", t, re.IGNORECASE)
    if word:  # 8.59 billion
        return _scalar(word[1]) * _WORDS[word[2].lower()]
    power = _POWER.fullmatch(t)
    if power:  # 8.59 x 10^9
        return _scalar(power[1]) * 10.0 ** int(power[2])
    if _THOUSANDS.fullmatch(t):
        t = t.replace(",", "")
    if "/" in t:
        num, _, den = t.partition("/")
        value = _scalar(num) / _scalar(den) if _scalar(den) != 0 else math.nan
    else:
        value = float(t)
    if not math.isfinite(value):
        raise ValueError(token)
    return value


def parse_answer(text: str, vector: bool):
    """Read an answer: a number (``1,152``, ``1152``, ``1.152e3``, ``1/2``, ``8.59 billion``,
    ``8.59 x 10^9``) or, when ``vector``,
    a list (``[0.5, 1]``, ``0.5 1``, ``(50, 512)``, ``50x512``).

    Raises:
        ValueError: with a message that quotes the text, if it is not a number / list of numbers.
    """
    raw = text.strip()
    if not raw:
        raise ValueError("no answer given: type a number (or q to quit)")
    try:
        if not vector:
            return _scalar(raw.replace(" ", ""))
        inner = raw.strip("[]() ")
        parts = [p for p in re.split(r"[,;\s]+|(?<=\d)[x\u00d7](?=\d)", inner) if p]
        if not parts:
            raise ValueError(raw)
        return tuple(_scalar(p) for p in parts)
    except (ValueError, ZeroDivisionError):
        kind = "a list of numbers like [0.5, 1]" if vector else "a number like 1152, 1,152 or 0.731"
        raise ValueError(f"could not read {raw!r} as {kind}") from None


def read_answer(question: Question, text: str):
    """Read an answer to ``question``: a choice's letter or number (``B``, ``b``, ``2``, ``B) ...``)
    for a multiple-choice question as its 1-based number, otherwise :func:`parse_answer`.

    Raises:
        ValueError: quoting the text, if it is not an answer of that kind.
    """
    if not question.choices:
        return parse_answer(text, question.is_vector)
    raw = text.strip()
    m = re.match(r"([A-Za-z]|\d+)(?:[).:]|\s|$)", raw)
    n = len(question.choices)
    if m is None:
        if not raw:
            raise ValueError(f"no answer given: type a letter {question.letters} (or q to quit)")
        raise ValueError(f"could not read {raw!r} as a choice {question.letters}")
    token = m.group(1)
    index = int(token) if token.isdigit() else ord(token.upper()) - ord("A") + 1
    if not 1 <= index <= n:
        raise ValueError(f"could not read {raw!r} as a choice {question.letters}")
    return float(index)


def grade(question: Question, given) -> bool:
    """True if ``given`` (already parsed) matches the computed answer: exact for integer answers
    (within ``question.rel_tol`` of it where the question states one), within 0.005 + 0.5% for
    real-valued ones; vectors must match in length and every entry."""
    want = question.answer if question.is_vector else (question.answer,)
    got = given if isinstance(given, tuple) else (given,)
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if question.integer and question.rel_tol:
            if abs(g - w) > question.rel_tol * abs(w) * (1 + 1e-9):
                return False
        elif question.integer:
            if g != round(w):
                return False
        elif abs(g - w) > 0.005 + 0.005 * abs(w):
            return False
    return True


# --------------------------------------------------------------------------- helpers for the generators


def _choice(rng: np.random.Generator, options):
    return options[int(rng.integers(len(options)))]


def _random_params(rng: np.random.Generator, d: int, f: int) -> dict:
    def mha():
        return {k: rng.normal(size=(d, d)) / math.sqrt(d) for k in ("W_q", "W_k", "W_v", "W_o")}

    return {
        "attn": mha(),
        "ffn": {"W_1": rng.normal(size=(d, f)) / math.sqrt(d), "W_2": rng.normal(size=(f, d)) / math.sqrt(f)},
        "norm1": {"gamma": np.ones(d), "beta": np.zeros(d)},
        "norm2": {"gamma": np.ones(d), "beta": np.zeros(d)},
    }


# --------------------------------------------------------------------------- topics


def _q_shapes(rng: np.random.Generator) -> Question:
    variant = _choice(rng, ["heads", "weights", "concat", "layers", "volume"])
    if variant in ("heads", "weights", "concat"):
        b, t = int(rng.integers(2, 9)), int(rng.integers(5, 51))
        d = _choice(rng, [64, 128, 256, 512])
        h = _choice(rng, [2, 4, 8])
        x = np.zeros((b, t, d))  # [B, T, d_model]
        heads = ref.split_heads(x, h)  # [B, h, T, d_k]
        data = {"B": b, "T": t, "d_model": d, "h": h}
        if variant == "heads":
            shape = heads.shape
            text = (
                f"X is [B, T, d_model] = [{b}, {t}, {d}] and multi-head attention has h = {h} heads. "
                f"What is the shape of the per-head queries [B, h, T, d_k]?"
            )
            steps = [
                f"d_k = d_model / h = {d} / {h} = {d // h}",
                f"split the last axis into h heads and move heads forward: [{b}, {h}, {t}, {d // h}]",
            ]
        elif variant == "concat":
            shape = ref.merge_heads(heads).shape
            text = (
                f"{h} heads each output [B, T, d_v] = [{b}, {t}, {d // h}]. "
                f"What is the shape of their concatenation Concat(H_1, ..., H_h)?"
            )
            steps = [
                f"concatenation joins the feature axes: h * d_v = {h} * {d // h} = {h * d // h}",
                f"shape [{b}, {t}, {d}], ready for W^O [{d}, {d}]",
            ]
        else:
            params = _random_params(rng, d, 4)  # W^Q etc. [d, d]; the FFN is not used here
            shape = ref.multi_head_attention(x, None, params["attn"], h)[1].shape  # [B, h, T, T]
            text = (
                f"Self-attention over X [{b}, {t}, {d}] with h = {h} heads. "
                f"What is the shape of the attention-weight tensor?"
            )
            steps = [
                "each head scores every query against every key: [B, h, T_q, T_k]",
                f"T_q = T_k = T = {t}: [{b}, {h}, {t}, {t}] (independent of d_model)",
            ]
        return Question("shapes", variant, text, tuple(float(s) for s in shape), steps, data, True)
    if variant == "layers":
        t, d, n = int(rng.integers(5, 41)), _choice(rng, [32, 64, 128, 256]), int(rng.integers(2, 7))
        params = _random_params(rng, d, 4 * d)
        y = rng.normal(size=(1, t, d))  # [1, T, d_model]
        for _ in range(n):
            y = ref.encoder_layer(y, params, 4)  # [1, T, d_model]
        shape = y.shape[1:]
        text = (
            f"A sequence of T = {t} token vectors of width d_model = {d} ([T, d_model]) passes through "
            f"{n} post-norm encoder layers (d_ff = {4 * d}). What is the output shape [T, d_model]?"
        )
        steps = [
            "attention, the FFN (back to d_model) and the residual additions all preserve [T, d_model]",
            f"so after {n} layers the shape is still [{t}, {d}]",
        ]
        return Question(
            "shapes",
            variant,
            text,
            tuple(float(s) for s in shape),
            steps,
            {"T": t, "d_model": d, "layers": n},
            True,
        )
    b, t, d = int(rng.integers(2, 9)), _choice(rng, [10, 16, 20, 32]), _choice(rng, [16, 32, 64])
    params = _random_params(rng, d, 2 * d)
    out = ref.encoder_layer(rng.normal(size=(b, t, d)), params, 2)  # [B, T, d]
    text = (
        f"{b} sentences are padded to {t} tokens and encoded with d_model = {d}. "
        f"How many numbers does the encoder output hold?"
    )
    steps = [f"the output is [B, T, d_model] = [{b}, {t}, {d}]", f"{b} * {t} * {d} = {out.size:,}"]
    return Question("shapes", "volume", text, float(out.size), steps, {"B": b, "T": t, "d_model": d}, True)


def _q_params(rng: np.random.Generator) -> Question:
    from attnlab.audit.config import ModelSpec
    from attnlab.audit.params import audit_params  # imports torch: only when a count is asked

    variant = _choice(rng, ["head_wq", "wo", "mha", "encoder"])
    d = _choice(rng, [256, 512, 768, 1024])
    h = _choice(rng, [4, 8, 16])
    bias = bool(rng.integers(2))
    f = 4 * d
    report = audit_params(
        ModelSpec.from_sizes("encoder-layer", d_model=d, heads=h, d_ff=f, bias=bias), build_module=False
    )
    rows = {r["part"]: r for r in report["rows"]}
    if variant == "head_wq":
        n = report["per_head"]["W_Q_one_head"]
        text = f"d_model = {d}, h = {h} heads. How many weights are in ONE head's W^Q (no bias)?"
        steps = [
            f"d_k = {d} / {h} = {d // h}; one head's W^Q is [d_model, d_k] = [{d}, {d // h}]",
            f"{d} * {d // h} = {n:,}",
        ]
        return Question("params", variant, text, float(n), steps, {"d_model": d, "h": h}, True)
    if variant == "wo":
        n = rows["W^O"]["weights"]
        text = f"d_model = {d} and h * d_v = d_model. How many weights does W^O hold (no bias)?"
        steps = [f"W^O maps Concat [h*d_v] = [{d}] back to d_model = {d}: [{d}, {d}]", f"{d}^2 = {n:,}"]
        return Question("params", variant, text, float(n), steps, {"d_model": d}, True)
    what = "with biases" if bias else "weights only (no biases)"
    if variant == "mha":
        n = report["by_group"]["attention"]
        text = (
            f"Multi-head self-attention with d_model = {d}, h = {h} (h*d_k = d_model), {what}: "
            f"how many parameters?"
        )
        steps = [f"W^Q, W^K, W^V, W^O: each h * d * (d/h) = d^2; 4 * {d}^2 = {4 * d * d:,}"]
        if bias:
            steps.append(f"four biases: 4 * d = {4 * d:,}")
        steps.append(f"total {n:,} (independent of h)")
        return Question("params", variant, text, float(n), steps, {"d_model": d, "bias": bias}, True)
    if bias:
        n = report["total"]
        what = "with biases and two affine LayerNorms (PyTorch's convention)"
        steps = [
            f"attention 4d^2 + 4d = {report['by_group']['attention']:,}",
            f"FFN 2df + f + d = {report['by_group']['ffn']:,}",
            f"two LayerNorms (gamma and beta) 4d = {report['by_group']['norms']:,}",
            f"total 4d^2 + 2df + f + 9d = {n:,}",
        ]
    else:
        n = sum(r["weights"] for r in report["rows"] if r["group"] in ("attention", "ffn"))
        what = "counting only the weight matrices (no biases, no LayerNorm)"
        steps = [
            f"attention 4d^2 = 4 * {d}^2 = {4 * d * d:,}",
            f"FFN 2df = 2 * {d} * {f} = {2 * d * f:,}",
            f"total 4d^2 + 2df = {n:,}",
        ]
    text = f"One encoder layer with d_model = {d}, d_ff = {f}, {what}: how many parameters?"
    return Question("params", variant, text, float(n), steps, {"d_model": d, "d_ff": f, "bias": bias}, True)


def _q_scores(rng: np.random.Generator) -> Question:
    variant = _choice(rng, ["count", "entry"])
    if variant == "count":
        b, h, t = int(rng.integers(1, 9)), _choice(rng, [1, 2, 4, 8, 12]), int(rng.integers(4, 65))
        d = 2 * h
        params = _random_params(rng, d, 2)["attn"]
        _, w = ref.multi_head_attention(rng.normal(size=(b, t, d)), None, params, h)  # [B, h, T, T]
        text = f"Dense self-attention with B = {b}, h = {h}, T = {t}: how many scalar entries has the score tensor?"
        steps = [f"scores are [B, h, T, T] = [{b}, {h}, {t}, {t}]", f"{b} * {h} * {t}^2 = {w.size:,}"]
        return Question("scores", variant, text, float(w.size), steps, {"B": b, "h": h, "T": t}, True)
    d_k = _choice(rng, [1, 4])
    q = rng.integers(-2, 3, size=(2, d_k)).astype(float)
    k = rng.integers(-2, 3, size=(3, d_k)).astype(float)
    i, j = int(rng.integers(2)), int(rng.integers(3))
    dots = ref.luong_attention(q, k, "dot")[0]  # q_i . k_j  [2, 3]
    value = float(dots[i, j] / math.sqrt(d_k))
    text = (
        f"Q = {_m(q)} (rows are queries), K = {_m(k)} (rows are keys), d_k = {d_k}. "
        f"What is entry ({i + 1}, {j + 1}) of Q K^T / sqrt(d_k)?"
    )
    prods = " + ".join(f"({q[i, c]:g})({k[j, c]:g})" for c in range(d_k))
    steps = [
        f"q_{i + 1} . k_{j + 1} = {prods} = {dots[i, j]:g}",
        f"divide by sqrt({d_k}) = {math.sqrt(d_k):g}: {_num(value, False)}",
    ]
    return Question(
        "scores", variant, text, value, steps, {"Q": q.tolist(), "K": k.tolist(), "i": i, "j": j, "d_k": d_k}
    )


def _q_additive(rng: np.random.Generator) -> Question:
    s = rng.integers(-1, 3, size=2).astype(float)  # s_{t-1}
    h = rng.integers(-1, 3, size=(3, 2)).astype(float)  # h_1..h_3
    w_a = rng.integers(-1, 2, size=(2, 2)).astype(float)
    u_a = rng.integers(-1, 2, size=(2, 2)).astype(float)
    v_a = rng.integers(1, 3, size=2).astype(float)
    i = int(rng.integers(3))
    scores, _, _ = ref.additive_attention(s[None], h, w_a, u_a, v_a)  # [1, 3]
    value = float(scores[0, i])
    a, b = s @ w_a, h[i] @ u_a
    text = (
        f"Additive attention e_i = v_a^T tanh(s W_a + h_i U_a) (row convention). s = {_m(s)}, "
        f"h = {_m(h)}, W_a = {_m(w_a)}, U_a = {_m(u_a)}, v_a = {_m(v_a)}. "
        f"What is the score e_{i + 1} (3 decimals)?"
    )
    steps = [
        f"s W_a = {_vec(a)}",
        f"h_{i + 1} U_a = {_vec(b)}",
        f"sum = {_vec(a + b)}",
        f"tanh(sum) = {_vec(np.tanh(a + b), 4)}",
        f"v_a . tanh(...) = {_num(value, False)}",
    ]
    return Question(
        "additive",
        "score",
        text,
        value,
        steps,
        {
            "s": s.tolist(),
            "h": h.tolist(),
            "W_a": w_a.tolist(),
            "U_a": u_a.tolist(),
            "v_a": v_a.tolist(),
            "i": i,
        },
    )


def _q_softmax(rng: np.random.Generator) -> Question:
    variant = _choice(rng, ["plain", "scaled"])
    if variant == "plain":
        e = rng.integers(-2, 4, size=int(rng.integers(2, 5))).astype(float)
        w = ref.softmax(e)
        text = f"Scores e = {_vec(e)}. What are the softmax weights (3 decimals)?"
        ex = np.exp(e - e.max())
        steps = [
            f"subtract the max {e.max():g}: {_vec(e - e.max())}",
            f"exponentiate: {_vec(ex, 4)}",
            f"divide by their sum {ex.sum():.4f}: {_vec(w)} (sums to 1)",
        ]
        return Question("softmax", variant, text, tuple(float(x) for x in w), steps, {"e": e.tolist()})
    d_k = _choice(rng, [4, 16, 64])
    raw = (rng.integers(0, 5, size=2) * math.sqrt(d_k) / 2).astype(float)  # scaled scores are halves
    _, w = ref.scaled_dot_product_attention(
        np.ones((1, 1)), raw[:, None], np.eye(2), scale=1 / math.sqrt(d_k)
    )  # weights of q.k_j = raw_j
    text = f"Raw dot products q.k = {_vec(raw)} with d_k = {d_k}. Softmax weights after scaling (3 decimals)?"
    scaled = raw / math.sqrt(d_k)
    steps = [f"divide by sqrt({d_k}) = {math.sqrt(d_k):g}: {_vec(scaled)}", f"softmax: {_vec(w[0])}"]
    return Question(
        "softmax", variant, text, tuple(float(x) for x in w[0]), steps, {"raw": raw.tolist(), "d_k": d_k}
    )


def _q_context(rng: np.random.Generator) -> Question:
    variant = _choice(rng, ["scores", "weights", "self"])
    if variant == "scores":
        e = rng.integers(-1, 3, size=int(rng.integers(2, 4))).astype(float)
        h = rng.integers(0, 3, size=(e.size, 2)).astype(float)
        ctx, w = ref.scaled_dot_product_attention(np.ones((1, 1)), e[:, None], h, scale=1.0)
        text = (
            f"Alignment scores e = {_vec(e)} over encoder states h = {_m(h)}. "
            f"What is the context vector c = sum_i alpha_i h_i (3 decimals)?"
        )
        steps = [
            f"alpha = softmax(e) = {_vec(w[0])}",
            "c = " + " + ".join(f"{_num(a, False)}*{_vec(r)}" for a, r in zip(w[0], h)),
            f"c = {_vec(ctx[0])}",
        ]
        return Question(
            "context",
            variant,
            text,
            tuple(float(x) for x in ctx[0]),
            steps,
            {"e": e.tolist(), "h": h.tolist()},
        )
    if variant == "weights":
        raw = rng.integers(1, 5, size=4).astype(float)
        alpha = raw / raw.sum()
        alpha = np.round(alpha, 2)
        alpha[-1] = round(1 - alpha[:-1].sum(), 2)
        v = rng.integers(0, 3, size=(4, 2)).astype(float)
        # log-weights as scores: softmax(log alpha) = alpha
        z, _ = ref.scaled_dot_product_attention(np.ones((1, 1)), np.log(alpha)[:, None], v, scale=1.0)
        text = (
            f"Attention weights alpha = {_vec(alpha, 2)} over values v = {_m(v)}. "
            f"What is the output z = sum_j alpha_j v_j?"
        )
        steps = ["z = " + " + ".join(f"{a:.2f}*{_vec(r)}" for a, r in zip(alpha, v)), f"z = {_vec(z[0])}"]
        return Question(
            "context",
            variant,
            text,
            tuple(float(x) for x in z[0]),
            steps,
            {"alpha": alpha.tolist(), "v": v.tolist()},
        )
    x = rng.integers(0, 3, size=(2, 2)).astype(float)
    while np.all(x == 0):
        x = rng.integers(0, 3, size=(2, 2)).astype(float)
    tok = int(rng.integers(2))
    eye = {k: np.eye(2) for k in ("W_q", "W_k", "W_v", "W_o")}
    out, w = ref.multi_head_attention(x[None], None, eye, 1)  # [1, 2, 2], [1, 1, 2, 2]
    text = (
        f"Self-attention with W^Q = W^K = W^V = W^O = I (a teaching shortcut), d_k = 2, "
        f"X = {_m(x)} (rows are tokens). What is the output z_{tok + 1} (3 decimals)?"
    )
    dots = x @ x[tok]
    steps = [
        f"scores of token {tok + 1}: x_{tok + 1} . x_j = {_vec(dots)}; / sqrt(2) = {_vec(dots / math.sqrt(2))}",
        f"weights = softmax = {_vec(w[0, 0, tok])}",
        f"z_{tok + 1} = sum_j alpha_j x_j = {_vec(out[0, tok])}",
    ]
    return Question(
        "context", variant, text, tuple(float(v) for v in out[0, tok]), steps, {"X": x.tolist(), "token": tok}
    )


def _q_wo(rng: np.random.Generator) -> Question:
    heads = rng.integers(0, 6, size=(2, 2)).astype(float)  # two heads' outputs for one token
    w_o = rng.integers(-1, 3, size=(4, 2)).astype(float)
    concat = ref.merge_heads(heads[None, :, None, :])  # [1, h=2, T=1, 2] -> [1, 1, 4]
    out = concat[0, 0] @ w_o  # [2]
    text = (
        f"Two heads output {_vec(heads[0])} and {_vec(heads[1])} for one token. "
        f"W^O = {_m(w_o)} (rows = the 4 concatenated features). What is Concat(H_1, H_2) W^O?"
    )
    steps = [
        f"Concat = {_vec(concat[0, 0])} (a row [1, 4])",
        *(
            f"column {c + 1}: "
            + " + ".join(f"{a:g}*{b:g}" for a, b in zip(concat[0, 0], w_o[:, c]))
            + f" = {out[c]:g}"
            for c in range(2)
        ),
        f"result {_vec(out)} (W^O multiplies the row on the right)",
    ]
    return Question(
        "wo",
        "project",
        text,
        tuple(float(x) for x in out),
        steps,
        {"heads": heads.tolist(), "W_o": w_o.tolist()},
        True,
    )


def _q_flops(rng: np.random.Generator) -> Question:
    from attnlab.audit.config import ModelSpec, Workload
    from attnlab.audit.cost import audit_cost  # imports torch: only when FLOPs are asked

    variant = _choice(rng, ["qk", "approx_attn", "approx_mlp", "projections"])
    if variant == "qk":
        b, h, t, d_k = (
            int(rng.integers(1, 5)),
            _choice(rng, [4, 8, 12]),
            _choice(rng, [128, 256, 512, 1024]),
            64,
        )
        terms = {
            r["term"]: r
            for r in audit_cost(
                ModelSpec.from_sizes(d_model=h * d_k, heads=h, d_ff=4 * h * d_k), Workload(seq=t, batch=b)
            )["terms"]
        }
        n = terms["QK\u1d40"]["flops"]
        text = (
            f"B = {b}, h = {h}, T = {t}, d_k = {d_k}. How many FLOPs does Q K^T take "
            f"(1 multiply-add = 2 FLOPs)?"
        )
        steps = [
            f"each of the B*h*T*T = {b * h * t * t:,} scores is a {d_k}-term dot product",
            f"2 * {b} * {h} * {t}^2 * {d_k} = {n:,}",
        ]
        data = {"B": b, "h": h, "T": t, "d_k": d_k}
        return Question("flops", variant, text, float(n), steps, data, True, LARGE_TOL)
    n_tok, d = _choice(rng, [512, 1024, 2048, 4096]), _choice(rng, [512, 768, 1024])
    report = audit_cost(ModelSpec.from_sizes(d_model=d, heads=8, d_ff=4 * d), Workload(seq=n_tok, batch=1))
    if variant == "approx_attn":
        val = report["notes_check"]["attn_4n2d_per_layer_per_sequence"]
        text = (
            f"Using FLOPs_attn ~ 4 n^2 d per layer (QK^T and AV, 2 FLOPs per multiply-add), "
            f"n = {n_tok}, d = {d}: how many FLOPs?"
        )
        steps = [f"QK^T: 2 n^2 d; AV: 2 n^2 d; sum 4 n^2 d = 4 * {n_tok}^2 * {d} = {val:,}"]
    elif variant == "approx_mlp":
        val = report["notes_check"]["mlp_16nd2_per_layer_per_sequence"]
        text = (
            f"Using FLOPs_MLP ~ 16 n d^2 per layer (two d x 4d matrices, 2 FLOPs per multiply-add), "
            f"n = {n_tok}, d = {d}: how many FLOPs?"
        )
        steps = [
            f"each matrix: 2 * n * d * 4d = 8 n d^2; two of them: 16 n d^2 = 16 * {n_tok} * {d}^2 = {val:,}"
        ]
    else:
        terms = {r["term"]: r["flops"] for r in report["terms"]}
        val = sum(terms[k] for k in ("Q projection", "K projection", "V projection", "W^O"))
        text = f"n = {n_tok} tokens, d_model = {d}: FLOPs of the four projections Q, K, V, O (no bias)?"
        steps = [f"each projection: 2 * n * d^2 = {2 * n_tok * d * d:,}", f"four of them: 8 n d^2 = {val:,}"]
    return Question("flops", variant, text, float(val), steps, {"n": n_tok, "d": d}, True, LARGE_TOL)


def _q_kvcache(rng: np.random.Generator) -> Question:
    from attnlab.audit.cost import kv_cache_bytes

    layers = _choice(rng, [12, 24, 32, 80])
    heads = _choice(rng, [8, 16, 32, 64])
    kv = _choice(rng, [heads, heads // 4, heads // 8, 1])
    d_head, nbytes = _choice(rng, [64, 128]), _choice(rng, [2, 4])
    tokens, batch = _choice(rng, [1, 1024, 4096]), _choice(rng, [1, 4])
    n = kv_cache_bytes(layers, kv, d_head, nbytes, tokens=tokens, batch=batch)
    per_token = kv_cache_bytes(layers, kv, d_head, nbytes)
    kind = "MHA" if kv == heads else ("MQA" if kv == 1 else "GQA")
    text = (
        f"A decoder with L = {layers} layers, {heads} query heads and {kv} key/value head{'s' if kv != 1 else ''} ({kind}), "
        f"d_head = {d_head}, {nbytes} bytes per value. KV-cache size in bytes for a "
        f"context of {tokens} token{'s' if tokens > 1 else ''} and batch {batch}?"
    )
    steps = [
        "per token and layer: K and V, each h_kv * d_head values: 2 * h_kv * d_head",
        f"2 * {layers} * {kv} * {d_head} * {nbytes} bytes = {per_token:,} per token",
        f"* {tokens} token(s) * batch {batch} = {n:,} bytes ({n / 2**20:,.2f} MiB)",
    ]
    return Question(
        "kvcache",
        kind.lower(),
        text,
        float(n),
        steps,
        {
            "layers": layers,
            "heads": heads,
            "kv_heads": kv,
            "d_head": d_head,
            "bytes": nbytes,
            "tokens": tokens,
            "batch": batch,
        },
        True,
        LARGE_TOL,
    )


def _q_positions(rng: np.random.Generator) -> Question:
    variant = _choice(rng, ["angle", "pi_angle", "alibi", "alibi_bias", "yarn"])
    if variant in ("angle", "pi_angle"):
        d, base = _choice(rng, [64, 128]), _choice(rng, [10000.0, 500000.0])
        i, p = _choice(rng, [0, 1, 2, 4, 8, d // 8, d // 4]), int(rng.integers(1, 4097))
        scaling, train_len, s = None, None, 1.0
        if variant == "pi_angle":
            train_len, s = _choice(rng, [2048, 4096, 8192]), float(_choice(rng, [2, 4, 8]))
            scaling = {"rope_type": "linear", "factor": s}
        inv_freq, _ = ref.rope_frequencies(d, base, scaling)  # [d/2]
        theta = p * float(inv_freq[i])
        text = f"RoPE with d = {d} per head and base {base:g}: through what angle (radians, not reduced mod 2 pi) is pair i = {i} rotated at position p = {p}"
        steps = [f"w_i = base^(-2i/d) = {base:g}^(-{2 * i}/{d}) = {base ** (-2 * i / d):.6g}"]
        if variant == "pi_angle":
            text += f", after position interpolation from L = {train_len} to {int(s * train_len)} tokens"
            steps.append(f"PI divides every frequency by s = {int(s * train_len)} / {train_len} = {s:g}")
        steps.append(f"theta = p * w_i{' / s' if scaling else ''} = {theta:.4f}")
        return Question(
            "positions", variant, text + "?", theta, steps, {"d": d, "base": base, "i": i, "p": p, "s": s}
        )
    if variant in ("alibi", "alibi_bias"):
        heads = _choice(rng, [4, 8, 12, 16])
        slopes = ref.alibi_slopes(heads)  # [H]
        h = int(rng.integers(1, int(np.sum(slopes >= 1 / 32)) + 1))  # 1-based, a slope >= 1/32
        m = float(slopes[h - 1])
        steps = [
            f"the slopes start at 2^(-8/n) and are its powers, n = {heads} rounded down to a power of 2"
            + (
                ""
                if heads & (heads - 1) == 0
                else f" ({2 ** int(math.log2(heads))}), then every other slope of 2n"
            ),
            f"m_{h} = {m:.6g}",
        ]
        data = {"H": heads, "h": h}
        if variant == "alibi":
            text = (
                f"ALiBi with H = {heads} heads: what is the slope m_h of head h = {h} (heads counted from 1)?"
            )
            return Question("positions", variant, text, m, steps, data)
        dist = int(rng.integers(2, 65))
        steps.append(f"bias = -m_h * (i - j) = -{m:.6g} * {dist} = {-m * dist:.4f}")
        text = (
            f"ALiBi with H = {heads} heads: what bias does head h = {h} (counted from 1) add to the score "
            f"of a query at position i for the key {dist} positions before it?"
        )
        return Question("positions", variant, text, -m * dist, steps, {**data, "dist": dist})
    s = float(_choice(rng, [2, 4, 8, 16, 32]))
    _, factor = ref.rope_frequencies(
        64, 10000.0, {"rope_type": "yarn", "factor": s, "original_max_position_embeddings": 4096}
    )
    text = f"YaRN extends a RoPE model's context by s = {s:g}: what attention factor multiplies cos and sin?"
    steps = [f"factor = 0.1 ln(s) + 1 = 0.1 * ln({s:g}) + 1 = {factor:.4f} (the logits grow by its square)"]
    return Question("positions", variant, text, factor, steps, {"s": s})


def _q_concepts(rng: np.random.Generator) -> Question:
    """One of the course documents' conceptual questions, its options in a drawn order."""
    c = BANK[int(rng.integers(len(BANK)))]
    options = [c.right, *c.wrong]
    options = [options[i] for i in rng.permutation(len(options))]
    answer = options.index(c.right) + 1
    lettered = " ".join(f"{chr(ord('A') + i)}) {o}." for i, o in enumerate(options))
    ask = c.ask or "Which is right?"
    text = f'{c.document[0].upper()}{c.document[1:]} ({c.where}): "{c.quote}" {lettered} {ask}'
    data = {"key": c.key, "document": c.document, "quote": c.quote, "right": c.right, "options": options}
    return Question(
        "concepts", c.key, text, float(answer), list(c.explanation), data, True, choices=tuple(options)
    )


TOPICS: dict[str, tuple[str, Callable[[np.random.Generator], Question]]] = {
    "shapes": ("shapes through a layer", _q_shapes),
    "params": ("parameter counts with and without biases", _q_params),
    "scores": ("score-tensor entries", _q_scores),
    "additive": ("additive (Bahdanau) scores", _q_additive),
    "softmax": ("softmax weights, scaled and unscaled", _q_softmax),
    "context": ("context vectors and attention outputs", _q_context),
    "wo": ("the W^O projection", _q_wo),
    "flops": ("FLOPs of attention, MLP and projections", _q_flops),
    "kvcache": ("KV-cache bytes (MHA, GQA, MQA)", _q_kvcache),
    "positions": (
        "RoPE angles (plain and interpolated), ALiBi slopes and biases, YaRN's factor",
        _q_positions,
    ),
    "concepts": ("the documents' conceptual questions (why, what for), multiple choice", _q_concepts),
}


def iter_quiz(topic: str | None = None, seed: int = 0, count: int = 5) -> Iterator[Question]:
    """Yield ``count`` questions on ``topic`` (None = all topics, in shuffled rounds) drawn with
    ``seed``, one at a time (a question that needs torch imports it only when it is reached).

    Raises:
        ValueError: unknown topic (the message lists the topics) or a non-positive count.
    """
    if topic is not None and topic not in TOPICS:
        hint = did_you_mean(topic, TOPICS)
        raise ValueError(f"unknown topic {topic!r}: choose one of {', '.join(TOPICS)}{hint}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer, got {count!r}")
    return _generate(topic, seed, count)


_REDRAWS = 50  # draws of a topic before a repeat is allowed (its questions have run out)


def _generate(topic: str | None, seed: int, count: int) -> Iterator[Question]:
    rng = np.random.default_rng(seed)
    names = [topic] if topic else list(TOPICS)
    order: list[str] = []
    while len(order) < count:
        order += [names[i] for i in rng.permutation(len(names))]
    asked: set[str] = set()
    for name in order[:count]:
        for _ in range(_REDRAWS):  # never the same question twice in one quiz
            q = TOPICS[name][1](rng)
            if q.text not in asked:
                break
        asked.add(q.text)
        yield q


def make_quiz(topic: str | None = None, seed: int = 0, count: int = 5) -> list[Question]:
    """All questions of :func:`iter_quiz` as a list."""
    return list(iter_quiz(topic, seed, count))
