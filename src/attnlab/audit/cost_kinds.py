"""What the cost terms become when the block does not run dense softmax attention (issue 15).

The Week 19 course page counts attention per layer and sequence as FLOPs_attn ≈ 4n²d (QKᵀ and AV, n = T). Each
kind of :data:`attnlab.nn.config.ATTENTION_KINDS` that escapes the n² changes those two terms:

==============  ======================================================  =========================
kind            the T² terms become (per layer, B = 1, one head: d_k = d)  state kept when decoding
==============  ======================================================  =========================
window W        QKᵀ, AV over A = Σ min(i+1, W) ≈ T·W entries: 4·T·W·d    the last W keys/values
(sdpa/flash/    (a dense kernel still executes 4·T²·d; block_sparse
block_sparse)   executes only the kept 128×128 tiles)
linear          φ(K)ᵀV state updates and φ(Q)·S read-outs: 4·T·d²       S [d_k, d_k] + z [d_k] per head
ssm             the scan h_t = ā_t h_{t-1} + b̄_t x_t and y = C·h:          h [d, n] + conv tail [d, K-1]
                4·T·d·n, plus its projections (in 2d², Δ d², B/C 2dn,
                out d²) and the K-tap convolution T·d·K
==============  ======================================================  =========================

Every row is ``{term, macs, flops, formula}`` like :mod:`attnlab.audit.cost`'s; FLOPs = 2·MACs.
"""

from __future__ import annotations

# The engine's sizes, restated so the audit stays arithmetic (no torch); a test checks they agree.
BLOCK_SIZE = 128  # attnlab.nn.sparse.BLOCK_SIZE: the block-sparse kernel's tile edge
CONV_TAPS = 4  # attnlab.nn.state_space.CONV_TAPS: the SSM's causal convolution
LINEAR_CHUNK = 64  # attnlab.nn.linear_attention's default chunk of the causal prefix sums
# models each kind can be audited in: linear attention works both ways, the SSM is causal only
KIND_MODELS = {"linear": ("encoder-layer", "gpt"), "ssm": ("gpt",)}


def matmul_row(name: str, macs: int, formula: str) -> dict:
    """One matmul-shaped cost row: ``macs`` multiply-adds, ``2·macs`` FLOPs."""
    return {"term": name, "macs": macs, "flops": 2 * macs, "formula": formula}


def qkv_projections(a, pre: str, L: int, B: int, T: int, tok: str) -> list[dict]:
    """The Q, K and V projections of ``L`` layers over ``T`` tokens (K and V at ``h_kv`` heads under
    grouped-query attention): the rows every attention kind but the SSM starts with."""
    d, kv = a.d_model, a.h_kv * a.d_k
    kv_formula = f"L·B·{tok}·d·h_kv·d_k" if a.h_kv != a.heads else f"L·B·{tok}·d²"
    return [
        matmul_row(f"{pre}Q projection", L * B * T * d * d, f"L·B·{tok}·d²"),
        matmul_row(f"{pre}K projection", L * B * T * d * kv, kv_formula),
        matmul_row(f"{pre}V projection", L * B * T * d * kv, kv_formula),
    ]


def linear_attention_terms(a, pre: str, L: int, B: int, T: int, tok: str) -> list[dict]:
    """Causal linear attention of ``L`` layers over ``T`` tokens (the recurrent form's count):
    projections as in softmax attention, then per head and token ``S_t += φ(k_t) v_tᵀ`` (d_k² MACs),
    ``φ(q_t)ᵀ S_t`` (d_k²) and ``φ(q_t)·z_t`` (d_k): O(T·d·d_k), no T² term. ``a`` is a ModelSpec."""
    d, h, d_k = a.d_model, a.heads, a.d_k
    return [
        *qkv_projections(a, pre, L, B, T, tok),
        matmul_row(f"{pre}state update φ(K)ᵀV", L * B * h * T * d_k * d_k, f"L·B·h·{tok}·d_k²"),
        matmul_row(f"{pre}read-out φ(Q)ᵀS", L * B * h * T * d_k * d_k, f"L·B·h·{tok}·d_k²"),
        matmul_row(f"{pre}normaliser φ(Q)·z", L * B * h * T * d_k, f"L·B·h·{tok}·d_k"),
        matmul_row(f"{pre}W^O", L * B * T * d * d, f"L·B·{tok}·d²"),
    ]


def linear_attention_executed(a, L: int, B: int, T: int) -> int:
    """MACs the chunked parallel form (:func:`attnlab.nn.linear_attention`, chunks of C = 64) adds
    to the recurrent count: the masked C×C product inside each chunk, 2·L·B·h·⌈T/C⌉·C²·d_k."""
    chunks = -(-T // LINEAR_CHUNK)
    return 2 * L * B * a.heads * chunks * LINEAR_CHUNK * LINEAR_CHUNK * a.d_k


def ssm_terms(a, pre: str, L: int, B: int, T: int, tok: str) -> list[dict]:
    """The selective state-space layer (:class:`attnlab.nn.SelectiveSSM`) of ``L`` layers over ``T``
    tokens, ``d`` channels and a state of ``n`` per channel: in_proj ``d -> 2d``, the K-tap depthwise
    convolution, Δ ``d -> d``, B and C ``d -> 2n``, the scan (one multiply-add per state entry and
    token: ``h = ā h + b̄ x``), the read-out ``y = C·h`` (n MACs per channel) and out_proj ``d -> d``."""
    d, n = a.d_model, a.block.state_size
    return [
        matmul_row(f"{pre}in projection (u, gate)", L * B * T * d * 2 * d, f"2·L·B·{tok}·d²"),
        matmul_row(
            f"{pre}causal conv ({CONV_TAPS} taps)", L * B * T * d * CONV_TAPS, f"{CONV_TAPS}·L·B·{tok}·d"
        ),
        matmul_row(f"{pre}Δ projection", L * B * T * d * d, f"L·B·{tok}·d²"),
        matmul_row(f"{pre}B, C projections", L * B * T * d * 2 * n, f"2·L·B·{tok}·d·n"),
        matmul_row(f"{pre}scan h = āh + b̄x", L * B * T * d * n, f"L·B·{tok}·d·n"),
        matmul_row(f"{pre}read-out y = C·h", L * B * T * d * n, f"L·B·{tok}·d·n"),
        matmul_row(f"{pre}out projection", L * B * T * d * d, f"L·B·{tok}·d²"),
    ]


def block_sparse_tiles(seq: int, window: int) -> int:
    """Tiles of ``BLOCK_SIZE``² scores the block-sparse kernel computes for a causal window of
    ``window`` keys over ``seq`` tokens: for query tile r, key tiles ⌊(r·b − W + 1)/b⌋ … r."""
    b = BLOCK_SIZE
    tiles = 0
    for r in range(-(-seq // b)):
        first = max(0, (r * b - window + 1) // b)
        tiles += r - first + 1
    return tiles


def state_bytes(a, bytes_per_value: int) -> dict | None:
    """What linear attention and the SSM keep per sequence when decoding (no KV cache): constant in T.
    ``None`` for the softmax kinds."""
    L, kind = a.layers, a.block.attention
    if kind == "linear":
        values = L * a.heads * a.d_k * (a.d_k + 1)
        formula = "L·h·d_k·(d_k + 1) values (S and z per head)"
    elif kind == "ssm":
        values = L * a.d_model * (a.block.state_size + CONV_TAPS - 1)
        formula = f"L·d·(n + {CONV_TAPS - 1}) values (h and the convolution's tail)"
    else:
        return None
    return {
        "bytes_per_sequence": values * bytes_per_value,
        "formula": formula,
        "note": "a recurrent state of fixed size replaces the KV cache: the same at every length",
    }


def mixer_terms(a, pre: str, L: int, B: int, T: int, tok: str) -> list[dict] | None:
    """The terms of the block's attention kind when it is linear or ssm; None for softmax kinds."""
    if a.block.attention == "linear":
        return linear_attention_terms(a, pre, L, B, T, tok)
    if a.block.attention == "ssm":
        return ssm_terms(a, pre, L, B, T, tok)
    return None


def mixer_acts(a, B: int, T: int) -> list[dict] | None:
    """The tensors one linear-attention or SSM sub-layer produces (no ``[B, h, T, T]`` scores or
    weights), as ``{tensor, shape, entries}``; None for softmax kinds."""
    d, kv = a.d_model, a.h_kv * a.d_k

    def act(name, *shape):
        n = 1
        for x in shape:
            n *= x
        return {"tensor": name, "shape": list(shape), "entries": n}

    if a.block.attention == "linear":
        return [
            act("Q", B, T, d),
            act("K", B, T, kv),
            act("V", B, T, kv),
            act("concat(heads)", B, T, d),
            act("W^O output", B, T, d),
            act("add & norm 1", B, T, d),
        ]
    if a.block.attention == "ssm":
        n = a.block.state_size
        return [
            act("in projection (u, gate)", B, T, 2 * d),
            act("conv + SiLU u", B, T, d),
            act("Δ (softplus)", B, T, d),
            act("B, C", B, T, 2 * n),
            act("scan output y", B, T, d),
            act("out projection", B, T, d),
            act("add & norm 1", B, T, d),
        ]
    return None


def check_kind(a, training: bool, measure: bool, window) -> None:
    """One-line errors for what the kinds cannot be audited with."""
    kind = a.block.attention
    if kind in KIND_MODELS and a.model not in KIND_MODELS[kind]:
        raise ValueError(
            f"attention={kind!r} is audited in model {' or '.join(KIND_MODELS[kind])}, not {a.model!r}"
        )
    if kind in KIND_MODELS and window is not None:
        raise ValueError(f"attention={kind!r} has no window (its state summarises every earlier token)")
    if kind in KIND_MODELS and training:
        raise ValueError(
            f"training FLOPs follow PaLM's 6N + 12·L·h·d_k·T, whose second term is softmax attention's; "
            f"not for attention={kind!r}"
        )
    if kind in ("block_sparse", *KIND_MODELS) and measure:
        raise ValueError(f"measure=True reconciles the softmax kinds (sdpa, explicit, flash), not {kind!r}")


def becomes(a, seq: int, window) -> str | None:
    """The Week 19 page's 4n²d per layer and sequence, restated for the block's kind (one line), or
    None for dense softmax attention."""
    T, d, kind = seq, a.d_model, a.block.attention
    if kind == "linear":
        return f"linear attention: 4n²d becomes 4·T·d·d_k = {4 * T * d * a.d_k:,} (state updates + read-outs)"
    if kind == "ssm":
        n = a.block.state_size
        return f"SSM: 4n²d becomes 4·T·d·n = {4 * T * d * n:,} (scan + read-out), beside its projections"
    if window is not None:
        w = min(window, T)
        entries = w * (w + 1) // 2 + (T - w) * w
        return f"window W={window}: 4n²d becomes 4·A·d with A = Σ min(i+1, W) ≈ T·W: {4 * entries * d:,}"
    return None
