"""Cost audit: FLOPs term by term, score entries, activation memory, KV cache, training FLOPs.

Conventions (printed with every report):

- A MAC is one multiply-accumulate; a matmul ``[m, k] @ [k, n]`` is ``m·k·n`` MACs and
  FLOPs = 2·MACs. Bias additions, residual additions, norms and activations are O(T·d) and are
  not counted, as in the notes' estimates.
- Softmax (with the 1/√d_k scale) is not a matmul: 5 FLOPs per attended score entry
  (scale, max, subtract-and-exp, sum, divide), 0 MACs.
- "Attended" entries respect the mask: dense T², causal T(T+1)/2, causal sliding window of W keys
  Σ_i min(i+1, W). A dense kernel still computes all T² and masks them (see ``executed``).

The notes' estimates per layer and sequence: FLOPs_attn ≈ 4n²d (QKᵀ + AV), FLOPs_MLP ≈ 16nd²
(FFN with f = 4d). Training FLOPs per token follow PaLM (Chowdhery et al. 2022, appendix B):
6N + 12·L·h·d_k·T, N = non-embedding parameters plus the logit matrix, attention counted dense.
"""

from __future__ import annotations

import dataclasses

from attnlab.audit.config import Arch, positive_int
from attnlab.audit.params import audit_params

CONVENTION = (
    "FLOPs = 2·MACs for matmuls ([m,k]@[k,n] = m·k·n MACs); softmax incl. 1/sqrt(d_k) scale = "
    "5 FLOPs per attended score entry, 0 MACs; bias/residual/norm/activation element-wise work "
    "not counted; training per token = PaLM's 6N + 12·L·h·d_k·T (N = non-embedding parameters "
    "+ logit matrix, attention dense)"
)
SOFTMAX_FLOPS_PER_ENTRY = 5


def attended_entries(seq: int, causal: bool = False, window: int | None = None) -> int:
    """Score entries one head of one sequence actually uses: T², T(T+1)/2, or Σ_i min(i+1, W)."""
    if window is not None:
        w = min(window, seq)
        return w * (w + 1) // 2 + (seq - w) * w
    return seq * (seq + 1) // 2 if causal else seq * seq


def kv_cache_bytes(
    layers: int, kv_heads: int, d_head: int, bytes_per_value: int = 4, tokens: int = 1, batch: int = 1
) -> int:
    """KV-cache size: 2·L·h_kv·d_h·bytes per token (a K and a V vector per layer and KV head).

    Args: layers ``L``, kv_heads ``h_kv``, d_head ``d_h``, bytes_per_value (4 for float32, 2 for
    bf16), tokens cached per sequence, batch sequences. Returns bytes (an int).
    """
    for name, v in (
        ("layers", layers),
        ("kv_heads", kv_heads),
        ("d_head", d_head),
        ("bytes_per_value", bytes_per_value),
        ("tokens", tokens),
        ("batch", batch),
    ):
        positive_int(name, v)
    return 2 * layers * kv_heads * d_head * bytes_per_value * tokens * batch


def _terms(a: Arch, seq: int, batch: int, causal: bool, window: int | None) -> list[dict]:
    """Per-model forward terms (all layers) with MACs and FLOPs."""
    B, T, d, h, d_k, f, L = batch, seq, a.d_model, a.heads, a.d_k, a.d_ff, a.layers
    kv = a.h_kv * d_k
    A = attended_entries(T, causal, window)
    mm = lambda name, macs, formula: {"term": name, "macs": macs, "flops": 2 * macs, "formula": formula}
    gqa = a.h_kv != a.heads
    rows = [
        mm("Q projection", L * B * T * d * d, "L·B·T·d²"),
        mm("K projection", L * B * T * d * kv, "L·B·T·d·h_kv·d_k" if gqa else "L·B·T·d²"),
        mm("V projection", L * B * T * d * kv, "L·B·T·d·h_kv·d_k" if gqa else "L·B·T·d²"),
        mm("QKᵀ", L * B * h * A * d_k, "L·B·h·A·d_k"),
        {
            "term": "softmax",
            "macs": 0,
            "flops": SOFTMAX_FLOPS_PER_ENTRY * L * B * h * A,
            "formula": "5·L·B·h·A",
        },
        mm("AV", L * B * h * A * d_k, "L·B·h·A·d_k"),
        mm("W^O", L * B * T * d * d, "L·B·T·d²"),
        mm("FFN", L * B * T * 2 * d * f, "2·L·B·T·d·f"),
    ]
    if a.vocab:
        rows.append(mm("logits", B * T * d * a.vocab, "B·T·d·V"))
    return rows


def _activations(a: Arch, seq: int, batch: int) -> list[dict]:
    """Tensors one layer's forward pass materialises on the explicit path, as entries."""
    B, T, d, h, f = batch, seq, a.d_model, a.heads, a.d_ff
    kv = a.h_kv * a.d_k
    return [
        {"tensor": "layer input x", "shape": [B, T, d], "entries": B * T * d},
        {"tensor": "Q", "shape": [B, T, d], "entries": B * T * d},
        {"tensor": "K", "shape": [B, T, kv], "entries": B * T * kv},
        {"tensor": "V", "shape": [B, T, kv], "entries": B * T * kv},
        {"tensor": "scores QKᵀ/√d_k", "shape": [B, h, T, T], "entries": B * h * T * T},
        {"tensor": "weights softmax", "shape": [B, h, T, T], "entries": B * h * T * T},
        {"tensor": "concat(heads)", "shape": [B, T, d], "entries": B * T * d},
        {"tensor": "W^O output", "shape": [B, T, d], "entries": B * T * d},
        {"tensor": "add & norm 1", "shape": [B, T, d], "entries": B * T * d},
        {"tensor": "FFN hidden xW_1+b_1", "shape": [B, T, f], "entries": B * T * f},
        {"tensor": "FFN activation", "shape": [B, T, f], "entries": B * T * f},
        {"tensor": "FFN output", "shape": [B, T, d], "entries": B * T * d},
        {"tensor": "add & norm 2", "shape": [B, T, d], "entries": B * T * d},
    ]


def audit_cost(
    d_model: int = 512,
    heads: int = 8,
    d_ff: int = 2048,
    seq: int = 128,
    batch: int = 1,
    layers: int = 1,
    kv_heads: int | None = None,
    causal: bool = False,
    window: int | None = None,
    training: bool = False,
    vocab: int | None = None,
    bytes_per_value: int = 4,
    model: str = "encoder-layer",
    max_len: int | None = None,
    measure: bool = False,
    path: str = "sdpa",
) -> dict:
    """Analytic cost of a stack of ``L`` self-attention layers (and the logits if ``vocab``).

    Per layer: projections B·T·d·(d + 2h_kv·d_k) + B·T·d² MACs, QKᵀ and AV B·h·A·d_k MACs each with
    A attended entries per head, FFN 2·B·T·d·f MACs; logits B·T·d·V. FLOPs = 2·MACs.

    Args: sizes as in the notes; ``seq`` T, ``batch`` B; ``causal``; ``window`` W (a causal sliding
    window, W ≤ T); ``training`` adds the training FLOPs; ``bytes_per_value`` for memory;
    ``model`` "encoder-layer" or "gpt" (gpt is causal and needs ``vocab``).
    Returns a dict with "terms" [{term, macs, flops, formula}], "total_macs", "total_flops",
    "flops_per_token", "score_entries" (B·h·T² per layer), "attended_entries", "executed" (dense
    kernel), "notes_check", "activations", "kv_cache", "growth" (T → 2T), "training", "convention";
    with ``measure`` also "measured": the reconciliation with FlopCounterMode on the attnlab module
    (``path`` "sdpa" or "explicit"), see :mod:`attnlab.audit.measure`.
    """
    if model not in ("encoder-layer", "gpt"):
        raise ValueError(f"model for the cost audit must be encoder-layer or gpt; got {model!r}")
    seq, batch = positive_int("seq", seq), positive_int("batch", batch)
    bytes_per_value = positive_int("bytes_per_value", bytes_per_value)
    if window is not None:
        window = positive_int("window", window)
        if window > seq:
            raise ValueError(f"window={window} is larger than the sequence seq={seq}")
    if model == "gpt" or window is not None:  # GPT is causal; the sliding window is a causal window
        causal = True
    a = Arch(
        model=model if model == "gpt" else "encoder-layer",
        d_model=d_model,
        heads=heads,
        d_ff=d_ff,
        layers=layers,
        kv_heads=kv_heads,
        vocab=vocab,
        max_len=max_len or max(seq, 1),
    )
    terms = _terms(a, seq, batch, causal, window)
    A = attended_entries(seq, causal, window)
    B, T, d, h, L = batch, seq, a.d_model, a.heads, a.layers
    total_flops = sum(t["flops"] for t in terms)
    dense = _terms(a, seq, batch, False, None)
    acts = _activations(a, seq, batch)
    per_layer = sum(x["entries"] for x in acts)
    fused = per_layer - 2 * B * h * T * T
    logits_entries = B * T * a.vocab if a.vocab else 0
    cached = min(seq, window) if window else seq
    report = {
        "model": a.model,
        "config": {
            **dataclasses.asdict(a),
            "seq": seq,
            "batch": batch,
            "causal": causal,
            "window": window,
            "training": training,
            "bytes_per_value": bytes_per_value,
        },
        "terms": terms,
        "total_macs": sum(t["macs"] for t in terms),
        "total_flops": total_flops,
        "flops_per_token": total_flops / (B * T),
        "score_entries": B * h * T * T,
        "score_entries_all_layers": L * B * h * T * T,
        "attended_entries": B * h * A,
        "executed": {
            "note": "a dense kernel computes every score and masks it afterwards",
            "total_flops": sum(t["flops"] for t in dense),
            "terms": dense,
        },
        "notes_check": {
            "attn_4n2d_per_layer_per_sequence": 4 * T * T * d,
            "attn_measured_by_terms": 2 * 2 * T * T * d,
            "mlp_16nd2_per_layer_per_sequence": 16 * T * d * d,
            "mlp_by_terms": 2 * 2 * T * d * a.d_ff,
        },
        "activations": {
            "per_layer": acts,
            "per_layer_entries": per_layer,
            "per_layer_bytes": per_layer * bytes_per_value,
            "all_layers_bytes": L * per_layer * bytes_per_value,
            "fused_attention_all_layers_bytes": L * fused * bytes_per_value,
            "logits_bytes": logits_entries * bytes_per_value,
            "note": "the main tensors one layer's forward pass produces (what training keeps for backward "
            "without recomputation); a fused kernel (SDPA/flash) never stores the two [B, h, T, T] tensors",
        },
        "kv_cache": {
            "bytes_per_token": kv_cache_bytes(L, a.h_kv, a.d_k, bytes_per_value),
            "bytes_per_sequence": kv_cache_bytes(L, a.h_kv, a.d_k, bytes_per_value, tokens=cached),
            "bytes_batch": kv_cache_bytes(L, a.h_kv, a.d_k, bytes_per_value, tokens=cached, batch=B),
            "tokens_cached": cached,
            "formula": "2·L·h_kv·d_h·bytes per token",
        },
        "growth": _growth(a, seq, batch, causal, window),
        "convention": CONVENTION,
    }
    if training:
        report["training"] = _training(a, seq, total_flops / (B * T))
    if measure:
        from attnlab.audit.measure import measure_model, reconcile

        report["measured"] = reconcile(report, measure_model(a, seq, batch, causal, window, path=path))
    return report


def _growth(a: Arch, seq: int, batch: int, causal: bool, window: int | None) -> list[dict]:
    """How every term changes when T doubles (the window, if any, stays fixed)."""
    now = _terms(a, seq, batch, causal, window)
    doubled = _terms(a, 2 * seq, batch, causal, window)
    return [
        {
            "term": x["term"],
            "flops_T": x["flops"],
            "flops_2T": y["flops"],
            "ratio": y["flops"] / x["flops"] if x["flops"] else None,
        }
        for x, y in zip(now, doubled)
    ]


def _training(a: Arch, seq: int, forward_per_token: float) -> dict:
    """PaLM's training FLOPs per token, 6N + 12·L·h·d_k·T, beside 3 × our forward count."""
    p = audit_params(
        model=a.model,
        d_model=a.d_model,
        heads=a.heads,
        d_ff=a.d_ff,
        layers=a.layers,
        kv_heads=a.kv_heads,
        vocab=a.vocab,
        max_len=a.max_len,
        build_module=False,
    )
    # non-embedding parameters (layers, final norm) + the logit matrix, which multiplies every token
    n = p["total_without_embeddings"] - p["by_group"].get("head", 0) + (a.d_model * a.vocab if a.vocab else 0)
    attn = 12 * a.layers * a.heads * a.d_k * seq
    return {
        "N": n,
        "six_N": 6 * n,
        "attention_term": attn,
        "flops_per_token": 6 * n + attn,
        "three_times_forward": 3 * forward_per_token,
        "convention": "PaLM (Chowdhery et al. 2022, app. B): 6N + 12·L·h·d_k·T per token; backward ≈ "
        "2× forward, so training ≈ 3× forward",
    }


def _f(x: float | int | None) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:,.2f}"
    return f"{int(x):,}"


def _bytes(n: int) -> str:
    """``n`` bytes as ``"12.00 KiB (12,288 B)"``."""
    x, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            break
        x /= 1024
    return f"{n:,} B" if unit == "B" else f"{x:,.2f} {unit} ({n:,} B)"


def table(header: tuple[str, ...], rows: list[list[str]], left: tuple[int, ...] = (0,)) -> list[str]:
    """Aligned text table lines (columns in ``left`` are left-aligned, the rest right-aligned)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    fmt = lambda cells: "  ".join(
        str(c).ljust(w) if i in left else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
    ).rstrip()
    return [fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def render_cost(report: dict) -> str:
    """The cost report as text: terms, totals, scores, memory, KV cache, growth, training."""
    c = report["config"]
    mask = f"causal sliding window W={c['window']}" if c["window"] else ("causal" if c["causal"] else "dense")
    out = [
        f"cost of {c['layers']} layer(s), d={c['d_model']}, h={c['heads']}, "
        f"h_kv={c['kv_heads'] or c['heads']}, "
        f"f={c['d_ff']}, T={c['seq']}, B={c['batch']}, {mask}" + (f", V={c['vocab']}" if c["vocab"] else ""),
        "",
    ]
    out += table(
        ("term", "MACs", "FLOPs", "formula"),
        [[t["term"], _f(t["macs"]), _f(t["flops"]), t["formula"]] for t in report["terms"]],
        left=(0, 3),
    )
    out += [
        "",
        f"total forward: {_f(report['total_macs'])} MACs, {_f(report['total_flops'])} FLOPs "
        f"({_f(report['flops_per_token'])} FLOPs per token)",
        f"dense kernel executes: {_f(report['executed']['total_flops'])} FLOPs",
        f"score entries B·h·T² per layer: {_f(report['score_entries'])} "
        f"(attended {_f(report['attended_entries'])}; all layers {_f(report['score_entries_all_layers'])})",
    ]
    n = report["notes_check"]
    out += [
        f"notes, per layer and sequence: 4n²d = {_f(n['attn_4n2d_per_layer_per_sequence'])} "
        f"(QKᵀ + AV dense: {_f(n['attn_measured_by_terms'])}); 16nd² = "
        f"{_f(n['mlp_16nd2_per_layer_per_sequence'])} (FFN with f = {c['d_ff']}: {_f(n['mlp_by_terms'])})"
    ]
    m = report["activations"]
    out += [
        "",
        f"activation memory per layer: {_f(m['per_layer_entries'])} values = {_bytes(m['per_layer_bytes'])}; "
        f"all layers {_bytes(m['all_layers_bytes'])}; with fused attention "
        f"{_bytes(m['fused_attention_all_layers_bytes'])}"
        + (f"; logits {_bytes(m['logits_bytes'])}" if m["logits_bytes"] else ""),
    ]
    k = report["kv_cache"]
    out += [
        f"KV cache ({k['formula']}): {_bytes(k['bytes_per_token'])} per token, "
        f"{_bytes(k['bytes_per_sequence'])} per sequence of {k['tokens_cached']} tokens, "
        f"{_bytes(k['bytes_batch'])} for the batch",
        "",
        "when T doubles:",
    ]
    out += table(
        ("term", "FLOPs at T", "FLOPs at 2T", "ratio"),
        [
            [
                g["term"],
                _f(g["flops_T"]),
                _f(g["flops_2T"]),
                "-" if g["ratio"] is None else f"×{g['ratio']:.3f}",
            ]
            for g in report["growth"]
        ],
    )
    if "training" in report:
        t = report["training"]
        out += [
            "",
            f"training FLOPs per token (PaLM): 6N + 12·L·h·d_k·T = {_f(t['six_N'])} + "
            f"{_f(t['attention_term'])} = {_f(t['flops_per_token'])} (N = {_f(t['N'])}); "
            f"3 × forward = {_f(t['three_times_forward'])}",
        ]
    if "measured" in report:
        from attnlab.audit.measure import render_measured

        out += ["", *render_measured(report["measured"])]
    out += ["", f"convention: {report['convention']}"]
    return "\n".join(out)
