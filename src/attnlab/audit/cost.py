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

from attnlab.audit.config import MODELS, Arch, positive_int
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


CROSS_MODELS = ("decoder-layer", "transformer")  # models with cross-attention over a source of length S


def _mm(name: str, macs: int, formula: str) -> dict:
    return {"term": name, "macs": macs, "flops": 2 * macs, "formula": formula}


def _self_attention(a: Arch, pre: str, L: int, B: int, T: int, A: int, tok: str, att: str) -> list[dict]:
    """Q/K/V projections, QKᵀ, softmax, AV and W^O of ``L`` self-attention layers over ``T`` tokens."""
    d, h, d_k = a.d_model, a.heads, a.d_k
    kv = a.h_kv * d_k
    kv_formula = f"L·B·{tok}·d·h_kv·d_k" if a.h_kv != a.heads else f"L·B·{tok}·d²"
    return [
        _mm(f"{pre}Q projection", L * B * T * d * d, f"L·B·{tok}·d²"),
        _mm(f"{pre}K projection", L * B * T * d * kv, kv_formula),
        _mm(f"{pre}V projection", L * B * T * d * kv, kv_formula),
        _mm(f"{pre}QKᵀ", L * B * h * A * d_k, f"L·B·h·{att}·d_k"),
        {
            "term": f"{pre}softmax",
            "macs": 0,
            "flops": SOFTMAX_FLOPS_PER_ENTRY * L * B * h * A,
            "formula": f"5·L·B·h·{att}",
        },
        _mm(f"{pre}AV", L * B * h * A * d_k, f"L·B·h·{att}·d_k"),
        _mm(f"{pre}W^O", L * B * T * d * d, f"L·B·{tok}·d²"),
    ]


def _cross_attention(a: Arch, pre: str, L: int, B: int, T: int, S: int) -> list[dict]:
    """Cross-attention of ``L`` layers: queries from ``T`` target tokens, K/V of the ``S``-token memory
    (projected once per layer), ``T·S`` score entries per head (never masked by causality)."""
    d, h, d_k = a.d_model, a.heads, a.d_k
    kv = a.h_kv * d_k
    kv_formula = "L·B·S·d·h_kv·d_k" if a.h_kv != a.heads else "L·B·S·d²"
    return [
        _mm(f"{pre}cross Q projection", L * B * T * d * d, "L·B·T·d²"),
        _mm(f"{pre}cross K projection", L * B * S * d * kv, f"{kv_formula} (memory, once per layer)"),
        _mm(f"{pre}cross V projection", L * B * S * d * kv, f"{kv_formula} (memory, once per layer)"),
        _mm(f"{pre}cross QKᵀ", L * B * h * T * S * d_k, "L·B·h·T·S·d_k"),
        {
            "term": f"{pre}cross softmax",
            "macs": 0,
            "flops": SOFTMAX_FLOPS_PER_ENTRY * L * B * h * T * S,
            "formula": "5·L·B·h·T·S",
        },
        _mm(f"{pre}cross AV", L * B * h * T * S * d_k, "L·B·h·T·S·d_k"),
        _mm(f"{pre}cross W^O", L * B * T * d * d, "L·B·T·d²"),
    ]


def _terms(
    a: Arch, seq: int, batch: int, causal: bool, window: int | None, src_seq: int | None = None
) -> list[dict]:
    """Per-model forward terms (all layers) with MACs and FLOPs.

    encoder-layer/gpt/bert: ``L`` self-attention layers + FFN; decoder-layer adds cross-attention
    over ``src_seq`` S; transformer is an encoder stack over S then a decoder stack over T.
    Logits B·T·d·V when ``vocab`` (not bert: no LM head; its pooler is B·d² on [CLS]).
    Embedding lookups and position additions are not matmuls: 0 FLOPs.
    """
    B, T, d, f, L = batch, seq, a.d_model, a.d_ff, a.layers
    S = T if src_seq is None else src_seq
    A = attended_entries(T, causal, window)
    if a.model == "transformer":
        rows = _self_attention(a, "encoder ", L, B, S, S * S, "S", "S²")
        rows.append(_mm("encoder FFN", L * B * S * 2 * d * f, "2·L·B·S·d·f"))
        rows += _self_attention(a, "decoder ", L, B, T, A, "T", "A")
        rows += _cross_attention(a, "decoder ", L, B, T, S)
        rows.append(_mm("decoder FFN", L * B * T * 2 * d * f, "2·L·B·T·d·f"))
    else:
        rows = _self_attention(a, "", L, B, T, A, "T", "A")
        if a.model == "decoder-layer":
            rows += _cross_attention(a, "", L, B, T, S)
        rows.append(_mm("FFN", L * B * T * 2 * d * f, "2·L·B·T·d·f"))
    if a.model == "bert":
        rows.append(_mm("pooler", B * d * d, "B·d² ([CLS] only)"))
    elif a.vocab:
        rows.append(_mm("logits", B * T * d * a.vocab, "B·T·d·V"))
    return rows


def _activations(a: Arch, seq: int, batch: int, src_seq: int | None = None) -> list[dict]:
    """Tensors one layer's forward pass materialises on the explicit path, as entries.

    decoder-layer: self-attention, cross-attention (K/V of the ``[B, S, d]`` memory) and FFN;
    transformer: one encoder layer (over S) and one decoder layer (over T), prefixed by their stack.
    """
    S = seq if src_seq is None else src_seq
    if a.model == "transformer":
        enc = [{**x, "tensor": "encoder " + x["tensor"]} for x in _encoder_acts(a, S, batch)]
        return enc + [{**x, "tensor": "decoder " + x["tensor"]} for x in _decoder_acts(a, seq, batch, S)]
    if a.model == "decoder-layer":
        return _decoder_acts(a, seq, batch, S)
    return _encoder_acts(a, seq, batch)


def _decoder_acts(a: Arch, seq: int, batch: int, src_seq: int) -> list[dict]:
    B, T, S, d, h = batch, seq, src_seq, a.d_model, a.heads
    kv = a.h_kv * a.d_k
    rows = _encoder_acts(a, seq, batch)
    rows[0] = {"tensor": "layer input y", "shape": [B, T, d], "entries": B * T * d}
    cross = [
        {"tensor": "cross Q", "shape": [B, T, d], "entries": B * T * d},
        {"tensor": "cross K (memory)", "shape": [B, S, kv], "entries": B * S * kv},
        {"tensor": "cross V (memory)", "shape": [B, S, kv], "entries": B * S * kv},
        {"tensor": "cross scores QKᵀ/√d_k", "shape": [B, h, T, S], "entries": B * h * T * S},
        {"tensor": "cross weights softmax", "shape": [B, h, T, S], "entries": B * h * T * S},
        {"tensor": "cross concat(heads)", "shape": [B, T, d], "entries": B * T * d},
        {"tensor": "cross W^O output", "shape": [B, T, d], "entries": B * T * d},
        {"tensor": "add & norm 2", "shape": [B, T, d], "entries": B * T * d},
    ]
    ffn = rows[9:]
    ffn[-1] = {**ffn[-1], "tensor": "add & norm 3"}
    return rows[:9] + cross + ffn


def _encoder_acts(a: Arch, seq: int, batch: int) -> list[dict]:
    """One self-attention layer's tensors (x, Q, K, V, scores, weights, ..., add & norm 2)."""
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
    src_seq: int | None = None,
) -> dict:
    """Analytic cost of a stack of ``L`` self-attention layers (and the logits if ``vocab``).

    Per layer: projections B·T·d·(d + 2h_kv·d_k) + B·T·d² MACs, QKᵀ and AV B·h·A·d_k MACs each with
    A attended entries per head, FFN 2·B·T·d·f MACs; logits B·T·d·V. FLOPs = 2·MACs.

    Args: sizes as in the notes; ``seq`` T, ``batch`` B; ``causal``; ``window`` W (a causal sliding
    window, W ≤ T); ``training`` adds the training FLOPs; ``bytes_per_value`` for memory;
    ``model`` "encoder-layer", "gpt" (causal, needs ``vocab``), "decoder-layer" (causal
    self-attention + cross-attention over a memory of ``src_seq`` S tokens, default T, whose K/V are
    projected once per layer + FFN), "transformer" (``L`` encoder layers over S, ``L`` decoder
    layers over T, logits; needs ``vocab``) or "bert" (``L`` post-norm GELU encoder layers + the
    pooler on [CLS]; needs ``vocab``; embedding lookups cost 0 FLOPs, no logits, bidirectional).
    Returns a dict with "terms" [{term, macs, flops, formula}], "total_macs", "total_flops",
    "flops_per_token", "score_entries" (B·h·T² per layer), "attended_entries", "executed" (dense
    kernel), "notes_check", "activations", "kv_cache", "growth" (T → 2T), "training", "convention";
    with ``measure`` also "measured": the reconciliation with FlopCounterMode on the attnlab module
    (``path`` "sdpa" or "explicit"), see :mod:`attnlab.audit.measure`.
    """
    if model not in MODELS:
        raise ValueError(f"model for the cost audit must be one of {', '.join(MODELS)}; got {model!r}")
    seq, batch = positive_int("seq", seq), positive_int("batch", batch)
    src_seq = seq if src_seq is None else positive_int("src_seq", src_seq)
    if src_seq != seq and model not in CROSS_MODELS:
        raise ValueError(f"src_seq applies to decoder-layer and transformer (cross-attention), not {model!r}")
    if model == "bert" and (causal or window is not None):
        raise ValueError("model 'bert' is bidirectional; causal and window do not apply")
    if model == "transformer" and window is not None:
        raise ValueError(
            "model 'transformer' runs a plain causal decoder; window applies to encoder-layer, "
            "decoder-layer and gpt"
        )
    if training and model in CROSS_MODELS:
        raise ValueError(
            f"training FLOPs per token (PaLM's 6N + 12·L·h·d_k·T) cover one token stream: "
            f"encoder-layer, gpt and bert, not {model!r}"
        )
    bytes_per_value = positive_int("bytes_per_value", bytes_per_value)
    if window is not None:
        window = positive_int("window", window)
        if window > seq:
            raise ValueError(f"window={window} is larger than the sequence seq={seq}")
    # GPT and every decoder self-attention are causal; the sliding window is a causal window
    if model in ("gpt", *CROSS_MODELS) or window is not None:
        causal = True
    a = Arch(
        model=model,
        d_model=d_model,
        heads=heads,
        d_ff=d_ff,
        layers=layers,
        kv_heads=kv_heads,
        vocab=vocab,
        max_len=max_len or max(seq, src_seq, 1),
        activation="gelu" if model == "bert" else "relu",
    )
    terms = _terms(a, seq, batch, causal, window, src_seq)
    A = attended_entries(seq, causal, window)
    B, T, d, h, L = batch, seq, a.d_model, a.heads, a.layers
    total_flops = sum(t["flops"] for t in terms)
    dense = _terms(a, seq, batch, False, None, src_seq)
    acts = _activations(a, seq, batch, src_seq)
    per_layer = sum(x["entries"] for x in acts)
    fused = per_layer - sum(x["entries"] for x in acts if "scores" in x["tensor"] or "weights" in x["tensor"])
    logits_entries = B * T * a.vocab if a.vocab and model != "bert" else 0  # bert: no LM head
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
        "growth": _growth(a, seq, batch, causal, window, src_seq),
        "convention": CONVENTION,
    }
    if model in CROSS_MODELS:
        report["config"]["src_seq"] = src_seq
        report["cross_score_entries"] = B * h * T * src_seq
        report["kv_cache"]["cross_attention"] = {
            "bytes_per_source_token": kv_cache_bytes(L, a.h_kv, a.d_k, bytes_per_value),
            "bytes_per_sequence": kv_cache_bytes(L, a.h_kv, a.d_k, bytes_per_value, tokens=src_seq),
            "bytes_batch": kv_cache_bytes(L, a.h_kv, a.d_k, bytes_per_value, tokens=src_seq, batch=B),
            "source_tokens": src_seq,
            "note": "the cross-attention K/V of the memory: computed once per layer from the S source "
            "tokens, then reused at every decoding step (fixed size, separate from the self-attention cache)",
        }
    if model == "transformer":
        report["encoder_score_entries"] = B * h * src_seq * src_seq
        report["activations"]["note"] += "; transformer: per layer = one encoder layer + one decoder layer"
    if model == "bert":
        report["kv_cache"] = None  # an encoder: nothing is decoded token by token
        report["embeddings_note"] = (
            "word, position and token-type embeddings are table lookups and additions: 0 FLOPs; "
            "no LM head (no logits); the pooler W_p runs on [CLS] only"
        )
    if training:
        report["training"] = _training(a, seq, total_flops / (B * T))
    if measure:
        from attnlab.audit.measure import measure_model, reconcile

        report["measured"] = reconcile(
            report, measure_model(a, seq, batch, causal, window, path=path, src_seq=src_seq)
        )
    return report


def _growth(a: Arch, seq: int, batch: int, causal: bool, window: int | None, src_seq: int) -> list[dict]:
    """How every term changes when T (and the source length S) doubles (the window stays fixed)."""
    now = _terms(a, seq, batch, causal, window, src_seq)
    doubled = _terms(a, 2 * seq, batch, causal, window, 2 * src_seq)
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
    # bert: the pooler (its "head") runs once per sequence, and there is no logit matrix
    logits = a.d_model * a.vocab if a.vocab and a.model != "bert" else 0
    n = p["total_without_embeddings"] - p["by_group"].get("head", 0) + logits
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
    model = report["model"]
    what = {
        "decoder-layer": f"decoder-layer: {c['layers']} layer(s)",
        "transformer": f"transformer: {c['layers']} encoder + {c['layers']} decoder layer(s)",
        "bert": f"bert: {c['layers']} layer(s)",
    }.get(model, f"{c['layers']} layer(s)")
    src = f", S={c['src_seq']}" if "src_seq" in c else ""
    if model == "transformer":
        mask = "encoder dense, decoder causal"
    out = [
        f"cost of {what}, d={c['d_model']}, h={c['heads']}, "
        f"h_kv={c['kv_heads'] or c['heads']}, "
        f"f={c['d_ff']}, T={c['seq']}{src}, B={c['batch']}, {mask}"
        + (f", V={c['vocab']}" if c["vocab"] else ""),
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
    if "encoder_score_entries" in report:
        out.append(f"encoder score entries B·h·S² per layer: {_f(report['encoder_score_entries'])}")
    if "cross_score_entries" in report:
        out.append(f"cross-attention score entries B·h·T·S per layer: {_f(report['cross_score_entries'])}")
    if "embeddings_note" in report:
        out.append(f"embeddings: {report['embeddings_note']}")
    n = report["notes_check"]
    out += [
        f"notes, per layer and sequence: 4n²d = {_f(n['attn_4n2d_per_layer_per_sequence'])} "
        f"(QKᵀ + AV dense: {_f(n['attn_measured_by_terms'])}); 16nd² = "
        f"{_f(n['mlp_16nd2_per_layer_per_sequence'])} (FFN with f = {c['d_ff']}: {_f(n['mlp_by_terms'])})"
    ]
    m = report["activations"]
    per = "per encoder + decoder layer" if model == "transformer" else "per layer"
    out += [
        "",
        f"activation memory {per}: {_f(m['per_layer_entries'])} values = {_bytes(m['per_layer_bytes'])}; "
        f"all layers {_bytes(m['all_layers_bytes'])}; with fused attention "
        f"{_bytes(m['fused_attention_all_layers_bytes'])}"
        + (f"; logits {_bytes(m['logits_bytes'])}" if m["logits_bytes"] else ""),
    ]
    k = report["kv_cache"]
    if k is None:
        out.append("KV cache: none (an encoder: nothing is decoded token by token)")
    else:
        self_ = "self-attention " if "cross_attention" in k else ""
        out.append(
            f"{self_}KV cache ({k['formula']}): {_bytes(k['bytes_per_token'])} per token, "
            f"{_bytes(k['bytes_per_sequence'])} per sequence of {k['tokens_cached']} tokens, "
            f"{_bytes(k['bytes_batch'])} for the batch"
        )
    if k is not None and "cross_attention" in k:
        x = k["cross_attention"]
        out.append(
            f"cross-attention K/V cache (memory, computed once): {_bytes(x['bytes_per_source_token'])} per "
            f"source token, {_bytes(x['bytes_per_sequence'])} per source of {x['source_tokens']} tokens, "
            f"{_bytes(x['bytes_batch'])} for the batch"
        )
    out += ["", "when T and S double:" if model in CROSS_MODELS else "when T doubles:"]
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
