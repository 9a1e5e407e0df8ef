"""The "draw the block" warm-up and milestone: a small text format and its grader.

The learner writes one line per arrow, top to bottom, after two header lines::

    block: pre-norm                      # or post-norm
    sizes: B=2 T=5 d=48 h=4 d_ff=192     # chosen by `attnlab practice start block`
    x         -> [B, T, d]
    LayerNorm -> [B, T, d]
    attention -> [B, T, d]
    residual  -> [B, T, d]
    ...

A shape holds numbers or the symbols ``B T d h d_k d_ff`` with ``*`` and ``/`` (``4d``, ``4*d``,
``d/h``). ``#`` starts a comment. Components and their spellings are in :data:`ALIASES`; the
attention internals (Q, K, V, split heads, scores, weights, head outputs, concat) may be drawn too,
and are then checked one by one. The MLP is drawn as ``MLP`` or as ``Linear``, ``GELU``, ``Linear``.

The drawing is graded against :func:`attnlab.audit.shapes.audit_shapes` of the real module: a GPT
block (``attnlab.models``, pre-norm, GELU) for ``pre-norm``, the paper's encoder layer (post-norm,
ReLU) for ``post-norm``. Missing or misplaced components (the norm after the residual in a pre-norm
block, no residual around the MLP) and wrong shapes on an arrow are named, with their line numbers.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnlab.practice.grade import Report, Result

NORMS = ("pre-norm", "post-norm")
SIZE_NAMES = ("B", "T", "d", "h", "d_ff")

# spelling (lower case, spaces collapsed) -> component
ALIASES: dict[str, str] = {}
for _kind, _names in {
    "input": ("x", "input", "input x", "residual stream", "embeddings", "block input"),
    "layernorm": ("layernorm", "layer norm", "ln", "ln1", "ln2", "ln_1", "ln_2", "norm"),
    "attention": (
        "attention",
        "attn",
        "mha",
        "multi-head attention",
        "multihead attention",
        "self-attention",
        "masked self-attention",
        "causal self-attention",
        "w^o",
        "w_o",
        "wo",
    ),
    "residual": ("residual", "add", "+", "residual add", "add residual", "x + sublayer"),
    "mlp": ("mlp", "ffn", "feed-forward", "feed forward", "feedforward"),
    "linear": (
        "linear",
        "linear1",
        "linear2",
        "linear 1",
        "linear 2",
        "fc1",
        "fc2",
        "w1",
        "w2",
        "w_1",
        "w_2",
    ),
    "activation": ("gelu", "relu", "activation", "nonlinearity"),
    "q": ("q", "queries", "q = x w^q"),
    "k": ("k", "keys", "k = x w^k"),
    "v": ("v", "values", "v = x w^v"),
    "split": ("split heads", "heads split", "split", "q heads", "k heads", "v heads"),
    "scores": ("scores", "qk^t", "qk^t/sqrt(d_k)", "attention scores"),
    "weights": ("weights", "softmax", "attention weights"),
    "heads_out": ("head outputs", "heads out", "av", "per-head outputs"),
    "concat": ("concat", "merge heads", "concat heads"),
}.items():
    ALIASES.update(dict.fromkeys(_names, _kind))
DETAIL = ("q", "k", "v", "split", "scores", "weights", "heads_out", "concat")
# audit step label prefix -> detail component
_DETAIL_STEPS = {
    "Q = ": "q",
    "K = ": "k",
    "V = ": "v",
    "split heads Q": "split",
    "scores": "scores",
    "weights": "weights",
    "per-head outputs": "heads_out",
    "concat": "concat",
}
WORDS = {
    "input": "the block input x",
    "layernorm": "LayerNorm",
    "attention": "attention",
    "residual": "the residual add",
    "mlp": "MLP",
    "linear": "Linear",
    "activation": "the activation",
}


@dataclass
class Arrow:
    """One drawn arrow: its line number, the component and the shape (numbers)."""

    line: int
    name: str
    kind: str
    shape: tuple[int, ...]
    text: str


@dataclass
class Drawing:
    """A parsed block file: the declared norm placement, the sizes and the arrows in order."""

    norm: str
    sizes: dict[str, int]
    arrows: list[Arrow]


@dataclass
class Expected:
    """One arrow of the real block: component, measured shape, and what it is in words."""

    kind: str
    shape: tuple[int, ...]
    what: str


def _value(expr: str, sizes: dict[str, int], line: int) -> int:
    """``4d`` / ``4*d`` / ``d/h`` / ``48`` under ``sizes``; ``ValueError`` with the line otherwise."""
    env = {**sizes, "d_k": sizes["d"] // sizes["h"], "d_model": sizes["d"], "f": sizes["d_ff"]}
    text = expr.replace(" ", "")
    tokens = re.findall(r"\d+|[A-Za-z_]+|[*/]|.", text)
    value, op, expect_operand = None, "*", True
    for tok in tokens:
        if tok in "*/" and tok:
            if expect_operand:
                raise ValueError(f"line {line}: cannot read the dimension {expr!r}")
            op, expect_operand = tok, True
            continue
        if tok.isascii() and tok.isdigit():
            x = int(tok)
        elif tok in env:
            x = env[tok]
        else:
            raise ValueError(
                f"line {line}: unknown size {tok!r} in {expr!r}; use numbers or {', '.join(env)}"
            )
        if not expect_operand and value is not None:
            op = "*"  # 4d = 4 * d
        if value is not None and op == "/" and (x == 0 or value % x):
            what = "divides by 0" if x == 0 else f"is not a whole size ({value} / {x})"
            raise ValueError(f"line {line}: the dimension {expr.strip()!r} {what}")
        value = x if value is None else (value * x if op == "*" else value // x)
        expect_operand = False
    if value is None or expect_operand:
        raise ValueError(f"line {line}: cannot read the dimension {expr!r}")
    return value


MAX_DRAWING_CHARS = 1 << 20  # a drawing is a dozen lines; more is not one


def read_drawing(file: str, stdin=None) -> str:
    """The text of the drawing ``file`` (``'-'``: ``stdin``), read no further than
    :data:`MAX_DRAWING_CHARS`; ``ValueError`` (one line) for a missing or larger file."""
    if file == "-":
        text = stdin.read(MAX_DRAWING_CHARS + 1)
    else:
        if not Path(file).is_file():
            what = "is a folder, not a file" if Path(file).is_dir() else "does not exist"
            raise ValueError(f"block file {file!r} {what}")
        with open(file, encoding="utf-8", errors="replace") as f:
            text = f.read(MAX_DRAWING_CHARS + 1)
    if len(text) > MAX_DRAWING_CHARS:
        raise ValueError(f"block file {file!r} is longer than {MAX_DRAWING_CHARS} characters: not a drawing")
    return text


def parse_block(text: str) -> Drawing:
    """Read a block file; ``ValueError`` naming the line of the first syntax error."""
    norm, sizes, arrows, body = None, None, [], []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        head = line.split(":", 1)[0].strip().lower() if ":" in line and "->" not in line else None
        if head == "block":
            norm = line.split(":", 1)[1].strip().lower().replace(" ", "-")
            if norm in ("pre", "post"):
                norm += "-norm"
            if norm not in NORMS:
                raise ValueError(f"line {number}: block must be pre-norm or post-norm, got {norm!r}")
        elif head == "sizes":
            sizes = {}
            for item in re.split(r"[,\s]+", line.split(":", 1)[1].strip()):
                if not item:
                    continue
                key, eq, val = item.partition("=")
                if (
                    not eq
                    or key not in SIZE_NAMES
                    or not (val.isascii() and val.isdigit())
                    or not 1 <= int(val) <= 4096
                ):
                    raise ValueError(
                        f"line {number}: sizes must read B=.. T=.. d=.. h=.. d_ff=.. (1..4096), got {item!r}"
                    )
                sizes[key] = int(val)
            missing = [k for k in SIZE_NAMES if k not in sizes]
            if missing:
                raise ValueError(f"line {number}: sizes lacks {', '.join(missing)}")
            if sizes["d"] % sizes["h"]:
                raise ValueError(f"line {number}: d={sizes['d']} is not divisible by h={sizes['h']}")
        elif "->" in line:
            body.append((number, line))
        else:
            raise ValueError(f"line {number}: expected 'component -> [shape]', got {raw.strip()!r}")
    if norm is None:
        raise ValueError("the block file lacks a 'block: pre-norm' or 'block: post-norm' line")
    if sizes is None:
        raise ValueError("the block file lacks its 'sizes: B=.. T=.. d=.. h=.. d_ff=..' line")
    for number, line in body:
        name, _, shape = (s.strip() for s in line.partition("->"))
        kind = ALIASES.get(re.sub(r"\s+", " ", name.lower()))
        if kind is None:
            raise ValueError(
                f"line {number}: unknown component {name!r}; known: "
                + ", ".join(sorted(set(ALIASES.values())))
            )
        m = re.fullmatch(r"\[(.*)\]", shape)
        if m is None or not m.group(1).strip():
            raise ValueError(f"line {number}: the shape must be written like [B, T, d], got {shape!r}")
        dims = tuple(_value(part, sizes, number) for part in m.group(1).split(","))
        arrows.append(Arrow(number, name, kind, dims, line))
    if not arrows:
        raise ValueError("the block file draws no arrows ('component -> [shape]' lines)")
    return Drawing(norm, sizes, arrows)


def expected_block(norm: str, sizes: dict[str, int]) -> list[Expected]:
    """The real block's arrows, measured by :func:`attnlab.audit.shapes.audit_shapes`: every arrow
    graded is one the audit draws (the activation, a pre-norm block's last residual add included)."""
    from attnlab.audit.config import ModelSpec, Workload
    from attnlab.audit.shapes import audit_shapes, layer_norm_name

    common = dict(d_model=sizes["d"], heads=sizes["h"], d_ff=sizes["d_ff"])
    workload = Workload(seq=sizes["T"], batch=sizes["B"])
    if norm == "pre-norm":
        spec = ModelSpec.from_sizes("gpt", vocab=16, norm="pre", activation="gelu", **common)
        act = "GELU"
    else:
        spec = ModelSpec.from_sizes("encoder-layer", norm="post", activation="relu", **common)
        act = "ReLU"
    report = audit_shapes(spec, workload)
    layer = report["layer_output_names"][0]
    steps = [s for s in report["steps"] if s["layer"] == layer]
    out: list[Expected] = []
    sublayer = "attention"
    for i, s in enumerate(steps):
        label, shape = s["step"], tuple(s["shape"])
        if label.startswith("layer input") or (i == 0 and label == "input x"):
            out.append(Expected("input", shape, "the block input x (the residual stream)"))
        elif layer_norm_name(label):  # LN_1.. (the paper's layers), ln1, ln2 (a GPT block)
            where = (
                f"before the {sublayer}"
                if norm == "pre-norm"
                else f"after the residual around the {sublayer}"
            )
            out.append(Expected("layernorm", shape, f"LayerNorm {where}"))
            if norm == "post-norm":
                sublayer = "MLP"
        elif label.startswith("W^O output"):
            out.append(Expected("attention", shape, "attention (its output after W^O)"))
        elif label.startswith("add:"):
            out.append(Expected("residual", shape, f"the residual around the {sublayer}"))
            if norm == "pre-norm":
                sublayer = "MLP"
        elif label.startswith("FFN x W_1"):
            out.append(Expected("linear", shape, "the MLP's first Linear (d -> d_ff)"))
        elif label.startswith("FFN activation"):
            out.append(
                Expected("activation", shape, f"the MLP's activation ({act}) between its Linear layers")
            )
        elif label.startswith("FFN output"):
            out.append(Expected("linear", shape, "the MLP's second Linear (d_ff -> d)"))
        else:
            for prefix, kind in _DETAIL_STEPS.items():
                if label.startswith(prefix):
                    out.append(Expected(kind, shape, f"attention step {label}"))
    return out


def _shape_text(shape, sizes) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _coarse(expected: list[Expected], drawing: Drawing) -> list[Expected]:
    """The expected arrows at the learner's level of detail (MLP as one box or three)."""
    drawn = {a.kind for a in drawing.arrows}
    out = [e for e in expected if e.kind not in DETAIL]
    if "mlp" in drawn:
        merged, i = [], 0
        while i < len(out):
            if out[i].kind == "linear":
                merged.append(Expected("mlp", out[i + 2].shape, "the MLP (Linear, activation, Linear)"))
                i += 3
            else:
                merged.append(out[i])
                i += 1
        out = merged
    return out


def grade_block(text: str, file: str = "<block>") -> Report:
    """Grade a drawing (the text of a block file) against the real module: one result per expected
    arrow, plus one per extra or misplaced line. ``ValueError`` (one line) on a syntax error."""
    drawing = parse_block(text)
    sizes = drawing.sizes
    full = expected_block(drawing.norm, sizes)
    results: list[Result] = []

    # the attention internals, when drawn: each against the measured step of the same name
    details = {e.kind: e for e in reversed(full) if e.kind in DETAIL}
    for a in (a for a in drawing.arrows if a.kind in DETAIL):
        e = details[a.kind]
        ok = a.shape == e.shape
        msg = (
            ""
            if ok
            else f"line {a.line}: {a.name} has {_shape_text(a.shape, sizes)}; the real module gives "
            f"{_shape_text(e.shape, sizes)}"
        )
        results.append(Result(f"line-{a.line}", a.kind, f"{e.what} (line {a.line})", ok, msg))

    want = _coarse(full, drawing)
    got = [a for a in drawing.arrows if a.kind not in DETAIL]
    misplaced = _misplaced(drawing.norm, got)
    matcher = difflib.SequenceMatcher(None, [a.kind for a in got], [e.kind for e in want], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for a, e in zip(got[i1:i2], want[j1:j2]):
                ok = a.shape == e.shape
                msg = (
                    ""
                    if ok
                    else (
                        f"line {a.line}: {a.name} has {_shape_text(a.shape, sizes)}; the real module "
                        f"gives {_shape_text(e.shape, sizes)} here"
                    )
                )
                results.append(Result(f"line-{a.line}", e.kind, f"{e.what} (line {a.line})", ok, msg))
            continue
        for e in want[j1:j2]:
            placed = [a for a in got[i1:i2] if a.kind == e.kind and a.line in misplaced]
            msg = misplaced[placed[0].line] if placed else f"missing: {e.what} {_shape_text(e.shape, sizes)}"
            results.append(
                Result(f"missing-{e.kind}", e.kind, e.what, False, msg, "misplaced" if placed else "missing")
            )
        for a in got[i1:i2]:
            if a.line in misplaced and any(e.kind == a.kind for e in want[j1:j2]):
                continue  # already reported above as misplaced
            msg = misplaced.get(a.line, f"line {a.line}: {a.name} is not part of a {drawing.norm} block here")
            results.append(Result(f"line-{a.line}", a.kind, f"line {a.line}: {a.name}", False, msg, "extra"))
    if not all(r.passed for r in results):
        other = "post-norm" if drawing.norm == "pre-norm" else "pre-norm"
        if [a.kind for a in got] == [e.kind for e in _coarse(expected_block(other, sizes), drawing)]:
            text = (
                f"this drawing is a {other} block but it declares 'block: {drawing.norm}': "
                f"{'x = LN(x + Sublayer(x))' if other == 'post-norm' else 'x = x + Sublayer(LN(x))'}"
            )
            results.insert(0, Result("placement", "layernorm", "norm placement", False, text, "misplaced"))
    return Report(file, results)


def _misplaced(norm: str, got: list[Arrow]) -> dict[int, str]:
    """Lines whose LayerNorm sits on the wrong side of the residual for the declared placement.

    Pre-norm: every LayerNorm feeds a sublayer (the next arrow is attention or the MLP). Post-norm:
    every LayerNorm follows a residual add.
    """
    out = {}
    for i, a in enumerate(got):
        if a.kind != "layernorm":
            continue
        after = got[i + 1].kind if i + 1 < len(got) else None
        before = got[i - 1].kind if i else None
        if norm == "pre-norm" and after not in ("attention", "mlp", "linear"):
            out[a.line] = (
                f"line {a.line}: LayerNorm after the "
                + ("residual" if before == "residual" else "sublayer")
                + ", feeding no sublayer: in a pre-norm block each norm comes before attention or the MLP, "
                "inside the residual branch: x = x + Sublayer(LN(x))"
            )
        if norm == "post-norm" and before != "residual":
            out[a.line] = (
                f"line {a.line}: LayerNorm not after a residual add: in a post-norm block the norm follows "
                "the residual: x = LN(x + Sublayer(x))"
            )
    return out


def choose_sizes(seed: int | None = None) -> dict[str, int]:
    """Small sizes for a drawing, all different so a swapped dimension shows: B, T, d = h d_k, d_ff = 4d."""
    rng = np.random.default_rng(seed)
    h = int(rng.choice([2, 3, 4, 6]))
    d_k = int(rng.choice([8, 12, 16]))
    b, t = int(rng.integers(2, 5)), int(rng.integers(5, 10))
    return {"B": b, "T": t, "d": h * d_k, "h": h, "d_ff": 4 * h * d_k}


def block_starter(sizes: dict[str, int]) -> str:
    """The block file the learner fills in: the format, the sizes, no arrows."""
    size_line = " ".join(f"{k}={sizes[k]}" for k in SIZE_NAMES)
    return f"""# attnlab practice: draw the block from memory (the Week 19 warm-up and milestone)
#
# Draw a decoder-only transformer block (LayerNorm, attention, residual, MLP) with the tensor
# shape on every arrow: one line per arrow, top to bottom, 'component -> [shape]'.
# Components: x (the block input), LayerNorm, attention, residual, MLP (or Linear, GELU, Linear);
# optionally the attention steps Q, K, V, split heads, scores, weights, head outputs, concat.
# Shapes: numbers or the symbols B, T, d, h, d_k, d_ff with * and / (4d, d/h).
# Declare where the norms go: pre-norm (the course's GPT block) or post-norm (the paper's encoder).
# Then run: attnlab practice check block THIS_FILE

block: pre-norm
sizes: {size_line}

# your arrows here, for example the first one:
x -> [B, T, d]
"""
