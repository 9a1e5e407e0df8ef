"""Parameter audit: every learned number, by group, with its formula, checked against the module built.

The notes' count for one post-norm encoder layer with biases and affine LayerNorms is

    4d² + 2df + f + 9d   (weights only, the notes' sense: the weight matrices 4d² + 2df),

i.e. MHA 4d² + 4d, FFN 2df + f + d, two norms 4d. With GQA the key and value projections shrink
to d·h_kv·d_k weights each. Convention: a parameter is one learned scalar; tied weights count
once (PyTorch's ``parameters()`` yields a shared tensor once, and so do we); "without
embeddings" leaves out the token and learned-position tables; fixed sinusoidal positions add
no parameters.
"""

from __future__ import annotations

import dataclasses

from attnlab.audit.build import build, count_by_group
from attnlab.audit.config import ModelSpec, check_no_vocab
from attnlab.audit.formula import Poly
from attnlab.audit.render import describe, number, table
from attnlab.audit.spec import model_spec, preset_info

GROUPS = ("attention", "cross_attention", "ffn", "norms", "embeddings", "positions", "head")
# the layers' weight matrices: what the Week 1 notes' formula sheet calls "weights only" (4d² + 2df)
MATRIX_GROUPS = ("attention", "cross_attention", "ffn")
EMBEDDING_GROUPS = ("embeddings", "positions")
CONVENTION = (
    "one parameter = one learned scalar; weights and biases counted apart; tied weights count "
    "once; 'without embeddings' excludes token and learned-position tables; fixed sinusoidal "
    "positions have no parameters; LayerNorm has a scale γ (weight) and a shift β (bias), RMSNorm "
    "a scale only"
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


def _attention(a: ModelSpec, stack: str, group: str = "attention", label: str = "") -> list[Row]:
    """W^Q [d, h·d_k], W^K and W^V [d, h_kv·d_k], W^O [h·d_k, d]; biases as the block says."""
    gqa = a.h_kv != a.heads
    kv_w = Poly.term(1, "d", "h_kv", "d_k") if gqa else Poly.term(1, "d", "d")
    kv_b = Poly.term(1, "h_kv", "d_k") if gqa else Poly.term(1, "d")
    d2, d1 = Poly.term(1, "d", "d"), Poly.term(1, "d")
    qkv = (lambda p: p) if a.block.qkv_bias else (lambda p: Poly())
    out = d1 if a.block.out_bias else Poly()
    return [
        Row(group, f"{label}W^Q", d2, qkv(d1), stack),
        Row(group, f"{label}W^K", kv_w, qkv(kv_b), stack),
        Row(group, f"{label}W^V", kv_w, qkv(kv_b), stack),
        Row(group, f"{label}W^O", d2, out, stack),
    ]


def _ffn(a: ModelSpec, stack: str) -> list[Row]:
    """MLP: act(x W_1 + b_1) W_2 + b_2; GLU: (act(x W_1 + b_1) * (x W_3 + b_3)) W_2 + b_2; W_1, W_3 [d, f],
    W_2 [f, d]; ``ffn="none"``: no rows."""
    if a.block.ffn == "none":
        return []
    b = a.block.ffn_bias
    rows = [Row("ffn", "W_1", Poly.term(1, "d", "f"), Poly.term(1, "f") if b else Poly(), stack)]
    if a.block.ffn == "glu":
        rows.append(Row("ffn", "W_3 (up; W_1 is the gate)", Poly.term(1, "d", "f"), rows[0].biases, stack))
    rows.append(Row("ffn", "W_2", Poly.term(1, "d", "f"), Poly.term(1, "d") if b else Poly(), stack))
    return rows


def _norm(a: ModelSpec, name: str, stack: str | None) -> Row:
    """LayerNorm: scale γ [d] and shift β [d]; RMSNorm: scale γ [d] only."""
    shift = Poly.term(1, "d") if a.block.norm == "layer" else Poly()
    return Row("norms", name, Poly.term(1, "d"), shift, stack)


GPT_NORMS = ("ln1", "ln2", "ln_f")  # the Week 19 course page's `class Block` (ln1, ln2); nanoGPT's ln_f


def _encoder_layer(
    a: ModelSpec, stack: str = "layer", names: tuple[str, ...] = ("LN_1", "LN_2")
) -> list[Row]:
    """Self-attention, FFN and their norms, named ``names`` (the paper's LN_1, LN_2 for an encoder
    layer; a GPT block's are the course page's ``ln1``, ``ln2``: modules ``norm1``, ``norm3``)."""
    ffn = _ffn(a, stack)
    norms = [_norm(a, names[0], stack)] + ([_norm(a, names[1], stack)] if ffn else [])
    return [*_attention(a, stack), *ffn, *norms]


def _decoder_layer(a: ModelSpec, stack: str = "layer") -> list[Row]:
    ffn = _ffn(a, stack)
    return [
        *_attention(a, stack, label="self "),
        *_attention(a, stack, "cross_attention", "cross "),
        *ffn,
        _norm(a, "LN_1", stack),
        _norm(a, "LN_2", stack),
        *([_norm(a, "LN_3", stack)] if ffn else []),
    ]


def _prefixed(prefix: str, rows: list[Row]) -> list[Row]:
    return [dataclasses.replace(r, part=prefix + r.part) for r in rows]


def _table(part: str, group: str, *symbols: str) -> Row:
    return Row(group, part, Poly.term(1, *symbols), Poly())


def _positions(a: ModelSpec, label: str) -> Row:
    """A learned table [n_ctx, d]; fixed (sinusoidal) or relative (RoPE, ALiBi) positions: none."""
    if a.block.positions == "learned":
        return _table(f"{label} [n_ctx, d]", "positions", "n_ctx", "d")
    return Row("positions", f"{a.block.positions} (no parameters)", Poly(), Poly())


def rows_for(a: ModelSpec) -> list[Row]:
    """The parts of the model ``a.model`` (the architecture of the module :func:`build` makes)."""
    if a.model == "encoder-layer":
        return _encoder_layer(a)
    if a.model == "decoder-layer":
        return _decoder_layer(a)
    final = a.norm == "pre"  # pre-norm stacks end with a final norm
    if a.model == "transformer":  # sinusoidal positions; tables shared with the generator or not
        shared = a.share_embeddings
        return [
            _table(
                "shared embedding E [V, d] (source, target, generator)"
                if shared
                else "source token embedding E_src [V, d]",
                "embeddings",
                "V",
                "d",
            ),
            *([] if shared else [_table("target token embedding E_tgt [V, d]", "embeddings", "V", "d")]),
            _positions(a, "learned positions"),
            *_prefixed("encoder ", _encoder_layer(a, "encoder")),
            *([_norm(a, "encoder final LN", None)] if final else []),
            *_prefixed("decoder ", _decoder_layer(a, "decoder")),
            *([_norm(a, "decoder final LN", None)] if final else []),
            Row(
                "head",
                "generator W = E (shared: counted once) + b [V]" if shared else "generator W [d, V] + b [V]",
                Poly() if shared else Poly.term(1, "d", "V"),
                Poly.term(1, "V"),
            ),
        ]
    if a.model == "gpt":  # pre-norm, learned positions, final norm, head tied to the embedding or not
        return [
            _table("token embedding E [V, d]", "embeddings", "V", "d"),
            _positions(a, "learned positions P"),
            *_encoder_layer(a, names=GPT_NORMS[:2]),  # modules blocks.i.norm1, blocks.i.norm3
            *([_norm(a, f"{GPT_NORMS[2]} (final)", None)] if final else []),
            Row("head", "logits W = Eᵀ (tied: counted once)", Poly(), Poly())
            if a.tie_head
            else Row("head", "logits W [d, V] (untied)", Poly.term(1, "d", "V"), Poly()),
        ]
    # bert: word, position and token-type tables + embedding norm, post-norm layers, pooler
    return [
        _table("word embedding [V, d]", "embeddings", "V", "d"),
        _positions(a, "learned positions"),
        Row("embeddings", f"token types [{a.type_vocab}, d]", Poly.term(a.type_vocab, "d"), Poly()),
        _norm(a, "LN_emb", None),
        *_encoder_layer(a),
        *(
            [Row("head", "pooler W [d, d] (tanh on [CLS])", Poly.term(1, "d", "d"), Poly.term(1, "d"))]
            if a.pooler
            else []
        ),
    ]


def sizes(a: ModelSpec) -> dict[str, int]:
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


def audit_params(model="encoder-layer", *, build_module: bool = True) -> dict:
    """Count the parameters of ``model`` three ways: row by row, by the closed form, and by building it.

    ``model``: a :class:`~attnlab.audit.config.ModelSpec`, a :class:`~attnlab.nn.BlockConfig` (one
    encoder layer), a model config (``GPTConfig``, ``BertConfig``, ``TransformerConfig``) or a preset
    name (:data:`attnlab.audit.presets.PRESETS`, e.g. ``"gpt2"``); the bare string
    ``"encoder-layer"`` is the notes' base layer (d 512, h 8, f 2048).
    Formula (encoder layer, PyTorch's convention): ``4d² + 2df + f + 9d``; L layers: ``L(...)``.
    RMSNorm has no shift β, a GLU FFN has three matrices, each bias switch removes its biases.

    Returns a dict: "total" (sum of the rows), "formula" (the closed form in the notes' symbols),
    "formula_total" (its value), "module_total" (``sum(p.numel())`` over the module actually built,
    tied tensors once; ``None`` if ``build_module=False``), "module_by_group", "by_group"
    {group: count}, "rows" [{group, part, weights, biases, total, formula}], "total_without_embeddings",
    "weights_total", "biases_total", "sizes", "convention", "config" (and "preset" for a preset).
    Raises ``ValueError`` on bad sizes.
    """
    a = model_spec(model)
    check_no_vocab(a, "parameters")
    s = sizes(a)
    rows = rows_for(a)
    out_rows = []
    for r in rows:
        mult = a.layers if r.stack else 1
        w, b = r.weights.value(s) * mult, r.biases.value(s) * mult
        text = " + ".join(str(x) for x in (r.weights, r.biases) if x.terms) or "0"
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
        "config": a.to_dict(),
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
        "formula_weight_matrices": closed_form(
            [r for r in rows if r.group in MATRIX_GROUPS], weights_only=True
        )[0],
        "weight_matrices_total": sum(r["weights"] for r in out_rows if r["group"] in MATRIX_GROUPS),
        "per_head": {"W_Q_one_head": a.d_model * a.d_k, "W_O": a.heads * a.d_k * a.d_model},
        "module_total": None,
        "module_by_group": None,
        "convention": CONVENTION,
    }
    if preset_info(model) is not None:
        report["preset"] = preset_info(model)
    if build_module:
        module = build(a, device="meta")
        report["module_total"] = sum(p.numel() for p in module.parameters())
        report["module_by_group"] = count_by_group(module)
    return report


def render_params(report: dict) -> str:
    """The parameter table: group, part, weights, biases, total and formula, then the totals."""
    n = number
    out = [f"parameters of {report['model']}  ({describe(report['config'])})"]
    if "preset" in report:
        p = report["preset"]
        out.append(f"preset {p['name']}: {p['description']}; vocabulary: {p['vocab_note']}")
    out.append("")
    out += table(
        ("group", "part", "weights", "biases", "total", "formula"),
        [
            [r["group"], r["part"], n(r["weights"]), n(r["biases"]), n(r["total"]), r["formula"]]
            for r in report["rows"]
        ],
        left=(0, 1, 5),
    )
    published = report.get("preset", {}).get("published")
    out += [
        "",
        "by group:",
        *[f"  {g:<16} {n(v):>13}  {report['group_formulas'][g]}" for g, v in report["by_group"].items()],
        f"total                      {n(report['total'])}  "
        f"(weights {n(report['weights_total'])}, biases {n(report['biases_total'])})"
        + (f"; published: {published}" if published else ""),
        f"total without embeddings   {n(report['total_without_embeddings'])}",
        f"formula  {report['formula']} = {n(report['formula_total'])}  (L = {report['sizes']['L']})",
        f"weight matrices (the notes' 'weights only')  {report['formula_weight_matrices']} = "
        f"{n(report['weight_matrices_total'])}",
        f"all weights, biases left out (norm scales γ count)  {report['formula_weights_only']} = "
        f"{n(report['weights_total'])}",
        f"module built ({report['model']}): {n(report['module_total'])} parameters"
        + (
            ""
            if report["module_total"] is None
            else f"; equal to formula: {report['module_total'] == report['formula_total']}"
        ),
        f"one head's W^Q = d·d_k = {n(report['per_head']['W_Q_one_head'])}; "
        f"W^O = d² = {n(report['per_head']['W_O'])}",
        f"convention: {report['convention']}",
    ]
    return "\n".join(out)
