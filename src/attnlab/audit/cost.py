"""Cost audit: FLOPs term by term, score entries, activation memory, KV cache, training FLOPs.

Conventions (printed with every report):

- A MAC is one multiply-accumulate; a matmul ``[m, k] @ [k, n]`` is ``m·k·n`` MACs and
  FLOPs = 2·MACs. Bias additions, residual additions, norms and activations are O(T·d) and are
  not counted, as in the Week 19 course page's estimates.
- Softmax (with the 1/√d_k scale) is not a matmul: 5 FLOPs per attended score entry
  (scale, max, subtract-and-exp, sum, divide), 0 MACs.
- "Attended" entries respect the mask: dense T², causal T(T+1)/2, causal sliding window of W keys
  Σ_i min(i+1, W). A dense kernel still computes all T² and masks them (see ``executed``).

The Week 19 course page's estimates per layer and sequence: FLOPs_attn ≈ 4n²d (QKᵀ + AV), FLOPs_MLP ≈ 16nd²
(a two-matrix FFN with f = 4d: 4·n·d·f; a GLU's three matrices make it 6·n·d·f). Training FLOPs
per token follow PaLM (Chowdhery et al. 2022, appendix B):
6N + 12·L·h·d_k·T, N = non-embedding parameters plus the logit matrix, attention counted dense.
"""

from __future__ import annotations

import dataclasses

from attnlab._checks import positive_int
from attnlab.audit.config import CROSS_MODELS, WHOLE_MODELS, ModelSpec, Workload, fit_positions
from attnlab.audit.cost_kinds import (
    BLOCK_SIZE,
    becomes,
    block_sparse_tiles,
    check_kind,
    linear_attention_executed,
    matmul_row,
    mixer_acts,
    mixer_terms,
    qkv_projections,
    state_bytes,
)
from attnlab.audit.measure import measure_model, reconcile
from attnlab.audit.params import audit_params
from attnlab.audit.render import bytes_text, number, table
from attnlab.audit.spec import model_spec, preset_info

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


def _self_attention(a: ModelSpec, pre: str, L: int, B: int, T: int, A: int, tok: str, att: str) -> list[dict]:
    """Q/K/V projections, QKᵀ, softmax, AV and W^O of ``L`` self-attention layers over ``T`` tokens."""
    d, h, d_k = a.d_model, a.heads, a.d_k
    return [
        *qkv_projections(a, pre, L, B, T, tok),
        matmul_row(f"{pre}QKᵀ", L * B * h * A * d_k, f"L·B·h·{att}·d_k"),
        {
            "term": f"{pre}softmax",
            "macs": 0,
            "flops": SOFTMAX_FLOPS_PER_ENTRY * L * B * h * A,
            "formula": f"5·L·B·h·{att}",
        },
        matmul_row(f"{pre}AV", L * B * h * A * d_k, f"L·B·h·{att}·d_k"),
        matmul_row(f"{pre}W^O", L * B * T * d * d, f"L·B·{tok}·d²"),
    ]


def _cross_attention(a: ModelSpec, pre: str, L: int, B: int, T: int, S: int) -> list[dict]:
    """Cross-attention of ``L`` layers: queries from ``T`` target tokens, K/V of the ``S``-token memory
    (projected once per layer), ``T·S`` score entries per head (never masked by causality)."""
    d, h, d_k = a.d_model, a.heads, a.d_k
    kv = a.h_kv * d_k
    kv_formula = "L·B·S·d·h_kv·d_k" if a.h_kv != a.heads else "L·B·S·d²"
    return [
        matmul_row(f"{pre}cross Q projection", L * B * T * d * d, "L·B·T·d²"),
        matmul_row(f"{pre}cross K projection", L * B * S * d * kv, f"{kv_formula} (memory, once per layer)"),
        matmul_row(f"{pre}cross V projection", L * B * S * d * kv, f"{kv_formula} (memory, once per layer)"),
        matmul_row(f"{pre}cross QKᵀ", L * B * h * T * S * d_k, "L·B·h·T·S·d_k"),
        {
            "term": f"{pre}cross softmax",
            "macs": 0,
            "flops": SOFTMAX_FLOPS_PER_ENTRY * L * B * h * T * S,
            "formula": "5·L·B·h·T·S",
        },
        matmul_row(f"{pre}cross AV", L * B * h * T * S * d_k, "L·B·h·T·S·d_k"),
        matmul_row(f"{pre}cross W^O", L * B * T * d * d, "L·B·T·d²"),
    ]


def _ffn(a: ModelSpec, pre: str, L: int, B: int, T: int, tok: str) -> list[dict]:
    """The FFN's matmuls over ``T`` tokens: MLP 2·d·f MACs per token (W_1, W_2), GLU 3·d·f (gate, up,
    down); no FFN, no term."""
    n = {"mlp": 2, "glu": 3, "none": 0}[a.block.ffn]
    if not n:
        return []
    return [matmul_row(f"{pre}FFN", L * B * T * n * a.d_model * a.d_ff, f"{n}·L·B·{tok}·d·f")]


def _terms(
    a: ModelSpec, seq: int, batch: int, causal: bool, window: int | None, src_seq: int | None = None
) -> list[dict]:
    """Per-model forward terms (all layers) with MACs and FLOPs.

    encoder-layer/gpt/bert: ``L`` self-attention layers + FFN; decoder-layer adds cross-attention
    over ``src_seq`` S; transformer is an encoder stack over S then a decoder stack over T.
    Logits B·T·d·V when ``vocab`` (not bert: no LM head; its pooler is B·d² on [CLS]).
    Embedding lookups and position additions are not matmuls: 0 FLOPs.
    """
    B, T, d, L = batch, seq, a.d_model, a.layers
    S = T if src_seq is None else src_seq
    A = attended_entries(T, causal, window)
    if a.model == "transformer":
        rows = _self_attention(a, "encoder ", L, B, S, S * S, "S", "S²")
        rows += _ffn(a, "encoder ", L, B, S, "S")
        rows += _self_attention(a, "decoder ", L, B, T, A, "T", "A")
        rows += _cross_attention(a, "decoder ", L, B, T, S)
        rows += _ffn(a, "decoder ", L, B, T, "T")
    else:
        rows = mixer_terms(a, "", L, B, T, "T") or _self_attention(a, "", L, B, T, A, "T", "A")
        if a.model == "decoder-layer":
            rows += _cross_attention(a, "", L, B, T, S)
        rows += _ffn(a, "", L, B, T, "T")
    if a.model == "bert":
        rows.append(matmul_row("pooler", B * d * d, "B·d² ([CLS] only)"))
    elif a.vocab:
        rows.append(matmul_row("logits", B * T * d * a.vocab, "B·T·d·V"))
    return rows


def _act(tensor: str, *shape: int) -> dict:
    n = 1
    for x in shape:
        n *= x
    return {"tensor": tensor, "shape": list(shape), "entries": n}


def _attention_acts(a: ModelSpec, B: int, T: int, S: int, label: str, norm: int, cross: bool) -> list[dict]:
    """One attention sub-layer's tensors: Q [B, T, d], K and V [B, S, h_kv·d_k] (``S`` keys), scores and
    weights [B, h, T, S], concat(heads), W^O output, and the add & norm that closes the sub-layer."""
    d, h, kv = a.d_model, a.heads, a.h_kv * a.d_k
    src = " (memory)" if cross else ""
    return [
        _act(f"{label}Q", B, T, d),
        _act(f"{label}K{src}", B, S, kv),
        _act(f"{label}V{src}", B, S, kv),
        _act(f"{label}scores QKᵀ/√d_k", B, h, T, S),
        _act(f"{label}weights softmax", B, h, T, S),
        _act(f"{label}concat(heads)", B, T, d),
        _act(f"{label}W^O output", B, T, d),
        _act(f"add & norm {norm}", B, T, d),
    ]


def _ffn_acts(a: ModelSpec, B: int, T: int, norm: int) -> list[dict]:
    """The FFN's tensors: hidden x W_1 (+ the up projection x W_3 of a GLU) [B, T, f], activation,
    output [B, T, d], add & norm."""
    if a.block.ffn == "none":
        return []
    d, f = a.d_model, a.d_ff
    hidden = "FFN hidden xW_1+b_1" if a.block.ffn_bias else "FFN hidden xW_1"
    up = [_act("FFN up xW_3", B, T, f)] if a.block.ffn == "glu" else []
    return [
        _act(hidden, B, T, f),
        *up,
        _act("FFN activation", B, T, f),
        _act("FFN output", B, T, d),
        _act(f"add & norm {norm}", B, T, d),
    ]


def _layer_acts(a: ModelSpec, B: int, T: int, S: int | None) -> list[dict]:
    """One layer's tensors on the explicit path: self-attention, cross-attention over ``S`` memory
    tokens (``None``: an encoder layer) and the FFN, as named blocks."""
    d = a.d_model
    rows = [_act("layer input x" if S is None else "layer input y", B, T, d)]
    rows += _attention_acts(a, B, T, T, "", 1, cross=False)
    if S is not None:
        rows += _attention_acts(a, B, T, S, "cross ", 2, cross=True)
    return rows + _ffn_acts(a, B, T, 2 if S is None else 3)


def _activations(a: ModelSpec, seq: int, batch: int, src_seq: int | None = None) -> list[dict]:
    """Tensors one layer's forward pass materialises on the explicit path, as entries.

    decoder-layer: self-attention, cross-attention (K/V of the ``[B, S, d]`` memory) and FFN;
    transformer: one encoder layer (over S) and one decoder layer (over T), prefixed by their stack.
    """
    S = seq if src_seq is None else src_seq
    mixer = mixer_acts(a, batch, seq)
    if mixer is not None:  # linear attention or the SSM (gpt, encoder-layer): no [B, h, T, T] tensors
        return [_act("layer input x", batch, seq, a.d_model), *mixer, *_ffn_acts(a, batch, seq, 2)]
    if a.model == "transformer":
        enc = [{**x, "tensor": "encoder " + x["tensor"]} for x in _layer_acts(a, batch, S, None)]
        return enc + [{**x, "tensor": "decoder " + x["tensor"]} for x in _layer_acts(a, batch, seq, S)]
    return _layer_acts(a, batch, seq, S if a.model == "decoder-layer" else None)


def audit_cost(
    model="encoder-layer",
    workload: Workload | None = None,
    *,
    training: bool = False,
    bytes_per_value: int = 4,
    measure: bool = False,
    path: str = "sdpa",
) -> dict:
    """Analytic cost of a stack of ``L`` self-attention layers (and the logits if ``vocab``).

    Per layer: projections B·T·d·(d + 2h_kv·d_k) + B·T·d² MACs, QKᵀ and AV B·h·A·d_k MACs each with
    A attended entries per head, FFN 2·B·T·d·f MACs (a GLU 3·B·T·d·f); logits B·T·d·V. FLOPs = 2·MACs.

    Args: ``model`` (a :class:`~attnlab.audit.config.ModelSpec`, a ``BlockConfig``, a model config or
    a preset name, as for :func:`~attnlab.audit.params.audit_params`); ``workload`` (a
    :class:`~attnlab.audit.config.Workload`: ``seq`` T, ``batch`` B, ``causal``, ``window`` W, a causal
    sliding window W ≤ T, ``src_seq`` S); ``training`` adds the training FLOPs; ``bytes_per_value``
    for memory. Models: "encoder-layer", "gpt" (causal, needs ``vocab``), "decoder-layer" (causal
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
    a, w = _checked(model_spec(model), workload, training)
    runnable, positions_note = fit_positions(a, w)  # learned positions: refused past max_len
    check_kind(a, training, measure, w.window)
    bytes_per_value = positive_int("bytes_per_value", bytes_per_value)
    report = {
        "model": a.model,
        "config": {
            **a.to_dict(),
            "seq": w.seq,
            "batch": w.batch,
            "causal": w.causal,
            "window": w.window,
            "training": training,
            "bytes_per_value": bytes_per_value,
        },
        **_flops(a, w),
        "activations": _activation_memory(a, w, bytes_per_value),
        "kv_cache": _kv_cache(a, w, bytes_per_value),
        "growth": _growth(a, w.seq, w.batch, w.causal, w.window, w.S),
        "convention": CONVENTION,
    }
    if preset_info(model) is not None:
        report["preset"] = preset_info(model)
    if positions_note is not None:
        report["positions_note"] = positions_note
    _model_specifics(report, a, w)
    _kind_specifics(report, a, w)
    if training:
        report["training"] = _training(a, w.seq, report["flops_per_token"])
    if measure:
        report["measured"] = reconcile(report, measure_model(runnable, w, path=path))
    return report


def _checked(a: ModelSpec, workload: Workload | None, training: bool) -> tuple[ModelSpec, Workload]:
    """The spec and workload as the audit counts them, after the checks, with ``causal`` set where
    the model implies it (GPT and every decoder self-attention are causal; a sliding window is a
    causal window). An input past the model's positions: :func:`~attnlab.audit.config.fit_positions`."""
    w = Workload() if workload is None else workload
    if not isinstance(w, Workload):
        raise ValueError(f"workload must be an attnlab.audit.Workload, got {type(w).__name__}")
    name, seq, src_seq, window = a.model, w.seq, w.S, w.window
    if src_seq != seq and name not in CROSS_MODELS:
        raise ValueError(f"src_seq applies to decoder-layer and transformer (cross-attention), not {name!r}")
    if name == "bert" and (w.causal or window is not None):
        raise ValueError("model 'bert' is bidirectional; causal and window do not apply")
    if name == "transformer" and window is not None:
        raise ValueError(
            "model 'transformer' runs a plain causal decoder; window applies to encoder-layer, "
            "decoder-layer and gpt"
        )
    if training and name in CROSS_MODELS:
        raise ValueError(
            f"training FLOPs per token (PaLM's 6N + 12·L·h·d_k·T) cover one token stream: "
            f"encoder-layer, gpt and bert, not {name!r}"
        )
    if window is not None and window > seq:
        raise ValueError(f"window={window} is larger than the sequence seq={seq}")
    causal = w.causal or name in ("gpt", *CROSS_MODELS) or window is not None
    return a, Workload(seq, w.batch, src_seq, causal, window)


def _flops(a: ModelSpec, w: Workload) -> dict:
    """The FLOP terms (masked), their totals, the score entries, what a dense kernel executes, and
    the Week 19 course page's estimates 4n²d and 16nd² beside the terms."""
    B, T, h, L = w.batch, w.seq, a.heads, a.layers
    terms = _terms(a, T, B, w.causal, w.window, w.S)
    dense, executed_note = _executed(a, T, B, w.window, w.S, terms)
    total_flops = sum(t["flops"] for t in terms)
    return {
        "terms": terms,
        "total_macs": sum(t["macs"] for t in terms),
        "total_flops": total_flops,
        "flops_per_token": total_flops / (B * T),
        "score_entries": B * h * T * T,
        "score_entries_all_layers": L * B * h * T * T,
        "attended_entries": B * h * attended_entries(T, w.causal, w.window),
        "executed": {
            "note": executed_note,
            "total_flops": sum(t["flops"] for t in dense),
            "terms": dense,
        },
        "notes_check": _notes_check(a, T),
    }


# the FFN's FLOPs per layer and sequence, as its row counts them: 2 FLOPs · (its matrices) · T·d·f
FFN_FORMULAS = {"mlp": "4·n·d·f", "glu": "6·n·d·f"}


def _notes_check(a: ModelSpec, T: int) -> dict:
    """The Week 19 page's per-layer, per-sequence estimates beside the same quantities counted term by term.

    FLOPs_attn ≈ 4n²d (QKᵀ + AV, dense) against 2·2·h·T²·d_k; FLOPs_MLP ≈ 16nd² (a two-matrix MLP with
    f = 4d) against the FFN row of one layer and one sequence of ``T`` (n) tokens: 4·n·d·f for an MLP,
    6·n·d·f for a GLU (three matrices); with no FFN the three ``mlp_`` entries are None.
    """
    d, ffn = a.d_model, a.block.ffn
    rows = _ffn(a, "", 1, 1, T, "T")  # one layer, one sequence
    return {
        "attn_4n2d_per_layer_per_sequence": 4 * T * T * d,
        "attn_measured_by_terms": 2 * 2 * T * T * a.heads * a.d_k,
        "mlp_16nd2_per_layer_per_sequence": 16 * T * d * d if rows else None,
        "mlp_by_terms": rows[0]["flops"] if rows else None,
        "mlp_formula": FFN_FORMULAS.get(ffn),
        "ffn": ffn,
    }


def _activation_memory(a: ModelSpec, w: Workload, bytes_per_value: int) -> dict:
    """One layer's activations (and all layers', with and without a fused kernel), and the logits."""
    acts = _activations(a, w.seq, w.batch, w.S)
    per_layer = sum(x["entries"] for x in acts)
    fused = per_layer - sum(x["entries"] for x in acts if "scores" in x["tensor"] or "weights" in x["tensor"])
    logits_entries = w.batch * w.seq * a.vocab if a.vocab and a.model != "bert" else 0  # bert: no LM head
    return {
        "per_layer": acts,
        "per_layer_entries": per_layer,
        "per_layer_bytes": per_layer * bytes_per_value,
        "all_layers_bytes": a.layers * per_layer * bytes_per_value,
        "fused_attention_all_layers_bytes": a.layers * fused * bytes_per_value,
        "logits_bytes": logits_entries * bytes_per_value,
        "note": "the main tensors one layer's forward pass produces (what training keeps for backward "
        "without recomputation); a fused kernel (SDPA/flash) never stores the two [B, h, T, T] tensors",
    }


def _kv_cache(a: ModelSpec, w: Workload, bytes_per_value: int) -> dict:
    """The self-attention KV cache (a sliding window keeps W positions) per token, sequence, batch."""
    L, cached = a.layers, min(w.seq, w.window) if w.window else w.seq
    return {
        "bytes_per_token": kv_cache_bytes(L, a.h_kv, a.d_k, bytes_per_value),
        "bytes_per_sequence": kv_cache_bytes(L, a.h_kv, a.d_k, bytes_per_value, tokens=cached),
        "bytes_batch": kv_cache_bytes(L, a.h_kv, a.d_k, bytes_per_value, tokens=cached, batch=w.batch),
        "tokens_cached": cached,
        "sequence_tokens": w.seq,
        "formula": "2·L·h_kv·d_h·bytes per token",
    }


def _model_specifics(report: dict, a: ModelSpec, w: Workload) -> None:
    """What only some models have: cross-attention's memory K/V and score entries (decoder-layer,
    transformer), the encoder's scores (transformer), no KV cache and free embeddings (bert)."""
    B, T, S, h, L, name = w.batch, w.seq, w.S, a.heads, a.layers, a.model
    bytes_per_value = report["config"]["bytes_per_value"]
    if name in CROSS_MODELS:
        report["config"]["src_seq"] = S
        report["cross_score_entries"] = B * h * T * S
        report["kv_cache"]["cross_attention"] = {
            "bytes_per_source_token": kv_cache_bytes(L, a.h_kv, a.d_k, bytes_per_value),
            "bytes_per_sequence": kv_cache_bytes(L, a.h_kv, a.d_k, bytes_per_value, tokens=S),
            "bytes_batch": kv_cache_bytes(L, a.h_kv, a.d_k, bytes_per_value, tokens=S, batch=B),
            "source_tokens": S,
            "note": "the cross-attention K/V of the memory: computed once per layer from the S source "
            "tokens, then reused at every decoding step (fixed size, separate from the self-attention cache)",
        }
    if name == "transformer":
        report["encoder_score_entries"] = B * h * S * S
        report["activations"]["note"] += "; transformer: per layer = one encoder layer + one decoder layer"
    if name == "bert":
        report["kv_cache"] = None  # an encoder: nothing is decoded token by token
        report["embeddings_note"] = (
            "word, position and token-type embeddings are table lookups and additions: 0 FLOPs; "
            "no LM head (no logits); the pooler W_p runs on [CLS] only"
        )


def _kind_specifics(report: dict, a: ModelSpec, w: Workload) -> None:
    """What the beyond-quadratic kinds change: what the Week 19 course page's 4n²d becomes, and for linear
    attention and the SSM a fixed-size state instead of the KV cache and no score entries."""
    line = becomes(a, w.seq, w.window)
    if line is not None:
        report["notes_check"]["becomes"] = line
    state = state_bytes(a, report["config"]["bytes_per_value"])
    if state is not None:
        report["kv_cache"] = None
        report["state"] = {**state, "bytes_batch": state["bytes_per_sequence"] * w.batch}
        report["score_entries"] = report["score_entries_all_layers"] = report["attended_entries"] = 0


def _executed(a: ModelSpec, seq: int, batch: int, window, src_seq: int, terms: list[dict]):
    """``(terms, note)``: what the block's kernel actually computes. Softmax kinds: a dense kernel
    computes every score and masks afterwards; block_sparse computes the kept 128×128 tiles;
    linear attention's chunked form adds the masked product inside each chunk; the SSM is as counted."""
    kind = a.block.attention
    if kind == "ssm":
        return terms, "the chunked scan does the counted work (no score matrix)"
    if kind == "linear":
        extra = linear_attention_executed(a, a.layers, batch, seq)
        rows = [*terms, {"term": "chunk products (C = 64)", "macs": extra, "flops": 2 * extra,
                         "formula": "2·L·B·h·⌈T/C⌉·C²·d_k"}]  # fmt: skip
        return rows, "the chunked parallel form adds the masked C×C product inside each chunk of C = 64"
    if kind == "block_sparse" and window is not None:
        tiles = block_sparse_tiles(seq, window)
        rows = _terms(a, seq, batch, True, None, src_seq)  # causal terms, then the tiles' entries
        entries = tiles * BLOCK_SIZE * BLOCK_SIZE
        h, d_k, L, B = a.heads, a.d_k, a.layers, batch
        for r in rows:
            if r["term"] in ("QKᵀ", "AV"):
                r.update(macs=L * B * h * entries * d_k, flops=2 * L * B * h * entries * d_k,
                         formula=f"L·B·h·(tiles·128²)·d_k, {tiles} tiles")  # fmt: skip
            elif r["term"] == "softmax":
                r.update(flops=SOFTMAX_FLOPS_PER_ENTRY * L * B * h * entries, formula="5·L·B·h·tiles·128²")
        return rows, f"the block-sparse kernel computes only the {tiles} kept tiles of 128×128 scores"
    dense = _terms(a, seq, batch, False, None, src_seq)
    return dense, "a dense kernel computes every score and masks it afterwards"


def _growth(a: ModelSpec, seq: int, batch: int, causal: bool, window: int | None, src_seq: int) -> list[dict]:
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


def _training(a: ModelSpec, seq: int, forward_per_token: float) -> dict:
    """PaLM's training FLOPs per token, 6N + 12·L·h·d_k·T, beside 3 × our forward count."""
    p = audit_params(a if a.model in WHOLE_MODELS else dataclasses.replace(a, vocab=None), build_module=False)
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


_f, _bytes = number, bytes_text


def render_measured(rec: dict) -> list[str]:
    """Lines of the ``--measure`` reconciliation table (analytic against measured) and its warnings."""
    out = [f"measured with torch.utils.flop_counter.FlopCounterMode ({rec['path']} path):"]
    out += table(
        ("term", "analytic FLOPs", "measured FLOPs", "equal"),
        [
            [r["term"], f"{r['analytic']:,}", f"{r['measured']:,}", "yes" if r["equal"] else "NO"]
            for r in rec["rows"]
        ]
        + [
            [
                "total",
                f"{rec['analytic_total']:,}",
                f"{rec['measured_total']:,}",
                "yes" if rec["analytic_total"] == rec["measured_total"] else "NO",
            ]
        ],
    )
    out += [f"WARNING: {w}" for w in rec["warnings"]]
    out.append(f"note: {rec['note']}")
    return out


def render_cost(report: dict) -> str:
    """The cost report as text: terms, totals, scores, memory, KV cache, growth, training."""
    out = _render_header(report)
    out += table(
        ("term", "MACs", "FLOPs", "formula"),
        [[t["term"], _f(t["macs"]), _f(t["flops"]), t["formula"]] for t in report["terms"]],
        left=(0, 3),
    )
    out += ["", *_render_totals(report), "", *_render_memory(report), "", *_render_growth(report)]
    if "training" in report:
        t = report["training"]
        out += [
            "",
            f"training FLOPs per token (PaLM): 6N + 12·L·h·d_k·T = {_f(t['six_N'])} + "
            f"{_f(t['attention_term'])} = {_f(t['flops_per_token'])} (N = {_f(t['N'])}); "
            f"3 × forward = {_f(t['three_times_forward'])}",
        ]
    if "measured" in report:
        out += ["", *render_measured(report["measured"])]
    out += ["", f"convention: {report['convention']}"]
    return "\n".join(out)


def _render_header(report: dict) -> list[str]:
    """The first line: the model, its sizes and the mask; then a blank line."""
    c, model = report["config"], report["model"]
    mask = f"causal sliding window W={c['window']}" if c["window"] else ("causal" if c["causal"] else "dense")
    if model == "transformer":
        mask = "encoder dense, decoder causal"
    what = {
        "decoder-layer": f"decoder-layer: {c['layers']} layer(s)",
        "transformer": f"transformer: {c['layers']} encoder + {c['layers']} decoder layer(s)",
        "bert": f"bert: {c['layers']} layer(s)",
    }.get(model, f"{c['layers']} layer(s)")
    src = f", S={c['src_seq']}" if "src_seq" in c else ""
    f = "no FFN" if c["block"]["ffn"] == "none" else f"f={c['d_ff']}"
    note = [f"note: {report['positions_note']}"] if "positions_note" in report else []
    return [
        f"cost of {what}, d={c['d_model']}, h={c['heads']}, "
        f"h_kv={c['kv_heads'] or c['heads']}, "
        f"{f}, T={c['seq']}{src}, B={c['batch']}, {mask}" + (f", V={c['vocab']}" if c["vocab"] else ""),
        *note,
        "",
    ]


def _render_totals(report: dict) -> list[str]:
    """Forward totals, what a dense kernel executes, score entries, and the Week 19 page's 4n²d / 16nd²."""
    out = [
        f"total forward: {_f(report['total_macs'])} MACs, {_f(report['total_flops'])} FLOPs "
        f"({_f(report['flops_per_token'])} FLOPs per token)",
        f"dense kernel executes: {_f(report['executed']['total_flops'])} FLOPs"
        if report["executed"]["note"].startswith("a dense kernel")
        else f"kernel executes: {_f(report['executed']['total_flops'])} FLOPs ({report['executed']['note']})",
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
    out.append(
        f"Week 19 course page, per layer and sequence: 4n²d = {_f(n['attn_4n2d_per_layer_per_sequence'])} "
        f"(QKᵀ + AV dense: {_f(n['attn_measured_by_terms'])}); {_ffn_note(n, report['config']['d_ff'])}"
    )
    if "becomes" in n:
        out.append(n["becomes"])
    return out


def _ffn_note(n: dict, d_ff: int) -> str:
    """The Week 19 page's 16nd² beside the FFN as counted: an MLP's 4·n·d·f (16nd² when f = 4d), a
    GLU's 6·n·d·f (its third matrix), or no FFN at all."""
    if n["mlp_by_terms"] is None:
        return "no FFN (16nd² does not apply)"
    kind = n["ffn"].upper()
    counted = f"FFN with f = {d_ff}, {kind} {n['mlp_formula']}: {_f(n['mlp_by_terms'])}"
    if n["ffn"] == "glu":
        counted += "; the Week 19 course page's 16nd² is a two-matrix MLP with f = 4d"
    return f"16nd² = {_f(n['mlp_16nd2_per_layer_per_sequence'])} ({counted})"


def _render_memory(report: dict) -> list[str]:
    """Activation memory, the self-attention KV cache and (cross-attention) the memory's K/V."""
    m = report["activations"]
    per = "per encoder + decoder layer" if report["model"] == "transformer" else "per layer"
    out = [
        f"activation memory {per}: {_f(m['per_layer_entries'])} values = {_bytes(m['per_layer_bytes'])}; "
        f"all layers {_bytes(m['all_layers_bytes'])}; with fused attention "
        f"{_bytes(m['fused_attention_all_layers_bytes'])}"
        + (f"; logits {_bytes(m['logits_bytes'])}" if m["logits_bytes"] else ""),
    ]
    source = report["config"].get("bytes_source")  # set by `audit cost --config`
    if source is not None:
        out.append(f"bytes per value: {report['config']['bytes_per_value']} ({source})")
    k = report["kv_cache"]
    if "state" in report:
        st = report["state"]
        return [
            *out,
            f"state instead of a KV cache ({st['formula']}): {_bytes(st['bytes_per_sequence'])} per "
            f"sequence at any length, {_bytes(st['bytes_batch'])} for the batch",
        ]
    if k is None:
        return [*out, "KV cache: none (an encoder: nothing is decoded token by token)"]
    self_ = "self-attention " if "cross_attention" in k else ""
    window = f" (the window keeps {k['tokens_cached']})" if k["tokens_cached"] < k["sequence_tokens"] else ""
    out.append(
        f"{self_}KV cache ({k['formula']}): {_bytes(k['bytes_per_token'])} per token, "
        f"{_bytes(k['bytes_per_sequence'])} per sequence of {k['sequence_tokens']} tokens{window}, "
        f"{_bytes(k['bytes_batch'])} for the batch"
    )
    if "cross_attention" in k:
        x = k["cross_attention"]
        out.append(
            f"cross-attention K/V cache (memory, computed once): {_bytes(x['bytes_per_source_token'])} per "
            f"source token, {_bytes(x['bytes_per_sequence'])} per source of {x['source_tokens']} tokens, "
            f"{_bytes(x['bytes_batch'])} for the batch"
        )
    return out


def _render_growth(report: dict) -> list[str]:
    """The table of every term at T and 2T (and S, 2S with cross-attention)."""
    head = "when T and S double:" if report["model"] in CROSS_MODELS else "when T doubles:"
    rows = [
        [g["term"], _f(g["flops_T"]), _f(g["flops_2T"]), "-" if g["ratio"] is None else f"×{g['ratio']:.3f}"]
        for g in report["growth"]
    ]
    return [head, *table(("term", "FLOPs at T", "FLOPs at 2T", "ratio"), rows)]
