"""Parameter audit: every learned number, by group, with its formula, checked against the module built.

The notes' count for one post-norm encoder layer with biases and affine LayerNorms is

    4d² + 2df + f + 9d   (weights only: 4d² + 2df),

i.e. MHA 4d² + 4d, FFN 2df + f + d, two norms 4d. With GQA the key and value projections shrink
to d·h_kv·d_k weights each. Convention: a parameter is one learned scalar; tied weights count
once (PyTorch's ``parameters()`` yields a shared tensor once, and so do we); "without
embeddings" leaves out the token and learned-position tables; fixed sinusoidal positions add
no parameters.
"""

from __future__ import annotations

import dataclasses

from attnlab.audit.config import Arch
from attnlab.audit.formula import Poly

GROUPS = ("attention", "cross_attention", "ffn", "norms", "embeddings", "positions", "head")
EMBEDDING_GROUPS = ("embeddings", "positions")
CONVENTION = (
    "one parameter = one learned scalar; weights and biases counted apart; tied weights count "
    "once; 'without embeddings' excludes token and learned-position tables; fixed sinusoidal "
    "positions have no parameters; LayerNorm has a scale γ (weight) and a shift β (bias)"
)


@dataclasses.dataclass(frozen=True)
class Row:
    """One part of the model: ``weights`` and ``biases`` are polys in the notes' symbols.

    ``per_layer`` rows are repeated in each of ``stack`` layers (``None`` for parts outside stacks).
    """

    group: str
    part: str
    weights: Poly
    biases: Poly
    stack: str | None = None


def _attention(a: Arch, stack: str, group: str = "attention", label: str = "") -> list[Row]:
    """W^Q [d, h·d_k], W^K and W^V [d, h_kv·d_k], W^O [h·d_k, d], each with an optional bias."""
    gqa = a.h_kv != a.heads
    kv_w = Poly.term(1, "d", "h_kv", "d_k") if gqa else Poly.term(1, "d", "d")
    kv_b = Poly.term(1, "h_kv", "d_k") if gqa else Poly.term(1, "d")
    d2, d1 = Poly.term(1, "d", "d"), Poly.term(1, "d")
    b = (lambda p: p) if a.bias else (lambda p: Poly())
    return [
        Row(group, f"{label}W^Q", d2, b(d1), stack),
        Row(group, f"{label}W^K", kv_w, b(kv_b), stack),
        Row(group, f"{label}W^V", kv_w, b(kv_b), stack),
        Row(group, f"{label}W^O", d2, b(d1), stack),
    ]


def _ffn(a: Arch, stack: str) -> list[Row]:
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2 with W_1 [d, f], W_2 [f, d]."""
    b = a.bias
    return [
        Row("ffn", "W_1", Poly.term(1, "d", "f"), Poly.term(1, "f") if b else Poly(), stack),
        Row("ffn", "W_2", Poly.term(1, "d", "f"), Poly.term(1, "d") if b else Poly(), stack),
    ]


def _norm(name: str, stack: str | None, bias: bool = True) -> Row:
    """LayerNorm: scale γ [d] and (with a bias) shift β [d]."""
    return Row("norms", name, Poly.term(1, "d"), Poly.term(1, "d") if bias else Poly(), stack)


def _encoder_layer(a: Arch, stack: str = "layer") -> list[Row]:
    return [*_attention(a, stack), *_ffn(a, stack), _norm("LN_1", stack), _norm("LN_2", stack)]


def _decoder_layer(a: Arch, stack: str = "layer") -> list[Row]:
    return [
        *_attention(a, stack, label="self "),
        *_attention(a, stack, "cross_attention", "cross "),
        *_ffn(a, stack),
        _norm("LN_1", stack),
        _norm("LN_2", stack),
        _norm("LN_3", stack),
    ]


def _prefixed(prefix: str, rows: list[Row]) -> list[Row]:
    return [dataclasses.replace(r, part=prefix + r.part) for r in rows]


def _table(part: str, group: str, *symbols: str) -> Row:
    return Row(group, part, Poly.term(1, *symbols), Poly())


def rows_for(a: Arch) -> list[Row]:
    """The parts of the model ``a.model`` (the architecture of the module :func:`build` makes)."""
    if a.model == "encoder-layer":
        return _encoder_layer(a)
    if a.model == "decoder-layer":
        return _decoder_layer(a)
    if a.model == "transformer":  # separate source/target tables, sinusoidal positions, untied head
        return [
            _table("source token embedding E_src [V, d]", "embeddings", "V", "d"),
            _table("target token embedding E_tgt [V, d]", "embeddings", "V", "d"),
            Row("positions", "sinusoidal (fixed, no parameters)", Poly(), Poly()),
            *_prefixed("encoder ", _encoder_layer(a, "encoder")),
            *([_norm("encoder final LN", None)] if a.norm == "pre" else []),
            *_prefixed("decoder ", _decoder_layer(a, "decoder")),
            *([_norm("decoder final LN", None)] if a.norm == "pre" else []),
            Row("head", "generator W [d, V] + b [V]", Poly.term(1, "d", "V"), Poly.term(1, "V")),
        ]
    if a.model == "gpt":  # pre-norm, learned positions, final LayerNorm, head tied to the embedding
        return [
            _table("token embedding E [V, d]", "embeddings", "V", "d"),
            _table("learned positions P [n_ctx, d]", "positions", "n_ctx", "d"),
            *_encoder_layer(a),
            _norm("LN_f (final)", None),
            Row("head", "logits W = Eᵀ (tied: counted once)", Poly(), Poly()),
        ]
    # bert: word, position and token-type tables + embedding LayerNorm, post-norm layers, pooler
    return [
        _table("word embedding [V, d]", "embeddings", "V", "d"),
        _table("learned positions [n_ctx, d]", "positions", "n_ctx", "d"),
        Row("embeddings", "token types [2, d]", Poly.term(2, "d"), Poly()),
        _norm("LN_emb", None),
        *_encoder_layer(a),
        Row("head", "pooler W [d, d] (tanh on [CLS])", Poly.term(1, "d", "d"), Poly.term(1, "d")),
    ]


def sizes(a: Arch) -> dict[str, int]:
    """The symbols' values: ``d, f, h_kv, d_k, L, V, n_ctx``."""
    return {
        "d": a.d_model,
        "f": a.d_ff,
        "h_kv": a.h_kv,
        "d_k": a.d_k,
        "L": a.layers,
        "V": a.vocab or 0,
        "n_ctx": a.max_len,
    }


def _times_l(text: str) -> str:
    """``L·(a + b)``, or ``L·a`` for a single term."""
    return f"L·({text})" if " + " in text else f"L·{text}"


def closed_form(rows: list[Row], weights_only: bool = False) -> tuple[str, Poly]:
    """The whole model as one formula: ``L·(per-layer poly) + ...`` and the poly it stands for.

    ``weights_only`` leaves out biases (the notes' ``4d² + 2df`` for one encoder layer; the
    LayerNorm scales γ stay, as they are weights).
    """
    stacks: dict[str, Poly] = {}
    rest = Poly()
    for r in rows:
        p = r.weights if weights_only else r.weights + r.biases
        if r.stack is None:
            rest = rest + p
        else:
            stacks[r.stack] = stacks.get(r.stack, Poly()) + p
    texts = [_times_l(str(p)) for p in stacks.values()] + ([str(rest)] if rest.terms else [])
    poly = rest
    for p in stacks.values():
        poly = poly + p.times("L")
    return " + ".join(texts) or "0", poly


def audit_params(
    model: str = "encoder-layer",
    d_model: int = 512,
    heads: int = 8,
    d_ff: int = 2048,
    layers: int = 1,
    kv_heads: int | None = None,
    norm: str = "post",
    bias: bool = True,
    activation: str = "relu",
    vocab: int | None = None,
    max_len: int = 512,
    build_module: bool = True,
) -> dict:
    """Count the parameters of ``model`` three ways: row by row, by the closed form, and by building it.

    Formula (encoder layer, PyTorch's convention): ``4d² + 2df + f + 9d``; L layers: ``L(...)``.

    Returns a dict: "total" (sum of the rows), "formula" (the closed form in the notes' symbols),
    "formula_total" (its value), "module_total" (``sum(p.numel())`` over the module actually built,
    tied tensors once; ``None`` if ``build_module=False``), "module_by_group", "by_group"
    {group: count}, "rows" [{group, part, weights, biases, total, formula}], "total_without_embeddings",
    "weights_total", "biases_total", "sizes", "convention", "config". Raises ``ValueError`` on bad sizes.
    """
    a = Arch(
        model=model,
        d_model=d_model,
        heads=heads,
        d_ff=d_ff,
        layers=layers,
        kv_heads=kv_heads,
        norm=norm,
        bias=bias,
        activation=activation,
        vocab=vocab,
        max_len=max_len,
    )
    s = sizes(a)
    rows = rows_for(a)
    out_rows = []
    for r in rows:
        mult = a.layers if r.stack else 1
        w, b = r.weights.value(s) * mult, r.biases.value(s) * mult
        text = str(r.weights) + (f" + {r.biases}" if r.biases.terms else "")
        out_rows.append(
            {
                "group": r.group,
                "part": r.part,
                "weights": w,
                "biases": b,
                "total": w + b,
                "formula": (_times_l(text) if r.stack and mult > 1 else text),
            }
        )
    by_group = {
        g: sum(r["total"] for r in out_rows if r["group"] == g)
        for g in GROUPS
        if any(r["group"] == g for r in out_rows) or g in ("attention", "ffn", "norms")
    }
    text, poly = closed_form(rows)
    total = sum(r["total"] for r in out_rows)
    report = {
        "model": a.model,
        "config": dataclasses.asdict(a),
        "sizes": s,
        "rows": out_rows,
        "by_group": by_group,
        "group_formulas": {g: closed_form([r for r in rows if r.group == g])[0] for g in by_group},
        "total": total,
        "weights_total": sum(r["weights"] for r in out_rows),
        "biases_total": sum(r["biases"] for r in out_rows),
        "total_without_embeddings": total - sum(by_group.get(g, 0) for g in EMBEDDING_GROUPS),
        "formula": text,
        "formula_total": poly.value(s),
        "formula_weights_only": closed_form(rows, weights_only=True)[0],
        "per_head": {"W_Q_one_head": a.d_model * a.d_k, "W_O": a.heads * a.d_k * a.d_model},
        "module_total": None,
        "module_by_group": None,
        "convention": CONVENTION,
    }
    if build_module:
        from attnlab.audit.build import build, count_by_group

        module = build(a, device="meta")
        report["module_total"] = sum(p.numel() for p in module.parameters())
        report["module_by_group"] = count_by_group(module)
    return report


def _n(x: int | None) -> str:
    return "-" if x is None else f"{x:,}"


def render_params(report: dict) -> str:
    """The parameter table: group, part, weights, biases, total and formula, then the totals."""
    head = ("group", "part", "weights", "biases", "total", "formula")
    lines = [
        [r["group"], r["part"], _n(r["weights"]), _n(r["biases"]), _n(r["total"]), r["formula"]]
        for r in report["rows"]
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]
    fmt = lambda cells: "  ".join(
        c.ljust(w) if i in (0, 1, 5) else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
    ).rstrip()
    out = [
        f"parameters of {report['model']}  ({_describe(report['config'])})",
        "",
        fmt(head),
        fmt(["-" * w for w in widths]),
    ]
    out += [fmt(line) for line in lines]
    out += [
        "",
        "by group:",
        *[f"  {g:<16} {_n(v):>13}  {report['group_formulas'][g]}" for g, v in report["by_group"].items()],
        f"total                      {_n(report['total'])}  "
        f"(weights {_n(report['weights_total'])}, biases {_n(report['biases_total'])})",
        f"total without embeddings   {_n(report['total_without_embeddings'])}",
        f"formula  {report['formula']} = {_n(report['formula_total'])}  (L = {report['sizes']['L']})",
        f"weights only (norm scales γ are weights)  {report['formula_weights_only']} = "
        f"{_n(report['weights_total'])}",
        f"module built ({report['model']}): {_n(report['module_total'])} parameters"
        + (
            ""
            if report["module_total"] is None
            else f"; equal to formula: {report['module_total'] == report['formula_total']}"
        ),
        f"one head's W^Q = d·d_k = {_n(report['per_head']['W_Q_one_head'])}; "
        f"W^O = d² = {_n(report['per_head']['W_O'])}",
        f"convention: {report['convention']}",
    ]
    return "\n".join(out)


def _describe(cfg: dict) -> str:
    keys = (
        "d_model",
        "heads",
        "kv_heads",
        "d_ff",
        "layers",
        "norm",
        "bias",
        "activation",
        "vocab",
        "max_len",
    )
    return ", ".join(f"{k}={cfg[k]}" for k in keys if cfg.get(k) is not None)
