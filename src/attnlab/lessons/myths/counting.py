"""Parameters and compute: what grows with h, T and d."""

from __future__ import annotations

import numpy as np

from attnlab import ref
from attnlab.lessons.myths._helpers import encoder_params, mha_params, module_count, param_count
from attnlab.lessons.myths.registry import COURSE, NOTES, PLAIN, myth


@myth(
    9,
    claim="More heads add projection weights at a fixed d_model.",
    source=f"{NOTES}, section 4, Dangerous Misconception; {PLAIN}, sections 5 and 7, Mistakes",
    why_false=(
        "With head width d/h each projection holds h * d * (d/h) = d^2 weights whatever h is; W^O is "
        "d^2 too, and a single-head layer can have one as well."
    ),
)
def _more_heads_more_weights():
    from attnlab.nn import BlockConfig, MultiHeadAttention

    counts = {h: module_count(MultiHeadAttention(BlockConfig(512, h))) for h in (1, 2, 4, 8)}
    per_proj = {h: h * 512 * (512 // h) for h in (1, 2, 4, 8)}
    lines = ["d_model = 512, counted on attnlab.nn.MultiHeadAttention (Q, K, V, O with biases):"]
    lines += [
        f"  h = {h}: head width {512 // h:3d}, per projection {h} x 512 x {512 // h} = {per_proj[h]:,}, "
        f"module total {counts[h]:,}"
        for h in counts
    ]
    lines.append("More heads split the same d_model columns; the count does not change (nor shrink).")
    return lines, {"counts": counts, "per_projection": per_proj}


@myth(
    10,
    claim="Self-attention is linear in sequence length, since one query inspects T keys.",
    source=f"{NOTES}, section 6, Dangerous Misconception; {PLAIN}, section 7, Mistakes",
    why_false=(
        "There are T queries, so T^2 query-key pairs per head: both QK^T and AV grow quadratically. "
        "Only a different computation is linear: a sliding window, linear attention or a state-space layer."
    ),
)
def _linear_in_t():
    rng = np.random.default_rng(6)
    d, h = 16, 2
    params = mha_params(rng, d)
    rows = []
    for t in (16, 32, 64):
        _, w = ref.multi_head_attention(rng.normal(size=(1, t, d)), None, params, h)  # [1, h, T, T]
        d_k = d // h
        rows.append(
            {
                "T": t,
                "score_entries": int(w.size),
                "qk_macs": h * t * t * d_k,
                "av_macs": h * t * t * d_k,
                "projection_macs": 4 * t * d * d,
            }
        )
    lines = [
        "Multi-head self-attention, d_model=16, h=2, one sequence:",
        "     T  score entries  QK^T MACs  AV MACs  projection MACs",
    ]
    lines += [
        f"  {r['T']:4d}  {r['score_entries']:13,}  {r['qk_macs']:9,}  {r['av_macs']:7,}  "
        f"{r['projection_macs']:15,}"
        for r in rows
    ]
    ratio = rows[-1]["score_entries"] / rows[-2]["score_entries"]
    lines.append(f"Doubling T multiplies the scores, QK^T and AV by {ratio:.0f} (T^2); the projections by 2.")
    kinds = _mixing_growth()
    lines.append(
        "Linear in T takes a different computation (attnlab audit cost --attention KIND, T 4,096 -> 8,192): "
        + "; ".join(f"{name} x{r:.2f}" for name, r in kinds.items())
        + " for a layer's token mixing."
    )
    return lines, {"rows": rows, "doubling_ratio": ratio, "kinds_doubling": kinds}


def _mixing_growth() -> dict[str, float]:
    """How one layer's token-mixing FLOPs (all terms but the FFN) grow from T = 4,096 to 8,192 for
    dense causal attention, a 256-key window, linear attention and the SSM (:func:`audit_cost`)."""
    from attnlab.audit import Workload, audit_cost
    from attnlab.audit.config import ModelSpec
    from attnlab.nn import BlockConfig

    out = {}
    for name, kind, window in (
        ("dense causal", "sdpa", None),
        ("window W=256", "block_sparse", 256),
        ("linear attention", "linear", None),
        ("SSM", "ssm", None),
    ):
        block = BlockConfig(512, 8, 2048, norm_place="pre", attention=kind, window=window)
        flops = []
        for t in (4096, 8192):
            r = audit_cost(ModelSpec("gpt", block, layers=1, vocab=1000), Workload(seq=t, window=window))
            flops.append(sum(x["flops"] for x in r["terms"] if x["term"] not in ("FFN", "logits")))
        out[name] = flops[1] / flops[0]
    return out


@myth(
    21,
    claim="An encoder layer has exactly 1M + 2M = 3M parameters; biases and norms do not matter.",
    source=f"{NOTES}, section 4; {PLAIN}, section 7, Mistakes",
    why_false=(
        "The mnemonic is not a count. Say what is included: 4d^2 + 2df weights, plus f + 9d for biases "
        "and affine norms in PyTorch's convention."
    ),
)
def _three_million():
    import torch

    from attnlab.audit.config import ModelSpec
    from attnlab.audit.params import audit_params
    from attnlab.nn import BlockConfig, EncoderLayer

    report = audit_params(ModelSpec.from_sizes("encoder-layer", d_model=512, heads=8, d_ff=2048))
    groups = {
        "MHA": report["by_group"]["attention"],
        "FFN": report["by_group"]["ffn"],
        "norms": report["by_group"]["norms"],
    }
    module = module_count(EncoderLayer(BlockConfig(512, 8, 2048)))
    torch_layer = module_count(torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True))
    weights_only = sum(r["weights"] for r in report["rows"] if r["group"] in ("attention", "ffn"))
    total = report["total"]
    lines = [
        "Base encoder layer, d=512, f=2048 (attnlab.audit.audit_params):",
        *(f"  {g:5s} {c:9,}" for g, c in groups.items()),
        f"  total {total:9,}   (attnlab.nn.EncoderLayer {module:,}; torch.nn.TransformerEncoderLayer "
        f"{torch_layer:,})",
        f"  weight matrices only, 4d^2 + 2df = {weights_only:,}",
        f"'1M + 2M = 3M' is off by {total - 3_000_000:,}; biases and norms add {total - weights_only:,} = f + 9d.",
    ]
    return lines, {
        **groups,
        "total": total,
        "module": module,
        "torch": torch_layer,
        "weights_only": weights_only,
    }


@myth(
    22,
    claim="One head's W^Q at 512 x 64 holds 32,178 weights (the slide's value).",
    source=f"{NOTES}, section 6, worked checks; {PLAIN}, section 7, Mistakes",
    why_false=("512 * 64 = 32,768; the slide value is an arithmetic typo."),
)
def _head_wq_32178():
    w_q = np.zeros((512, 512))  # W^Q of all 8 heads: [d_model, h*d_k]
    per_head = ref.split_heads(w_q, 8)  # [8, 512, 64]: head i owns columns i*64:(i+1)*64
    n = int(per_head[0].size)
    lines = [
        f"W^Q [512, 512] split into 8 heads -> {list(per_head.shape)}; one head's W^Q is {list(per_head[0].shape)}",
        f"  512 x 64 = {n:,} weights (the slide's 32,178 is a typo)",
    ]
    return lines, {"per_head_shape": list(per_head[0].shape), "per_head_weights": n}


@myth(
    23,
    claim="A longer input sentence needs more layer weights.",
    source=f"{PLAIN}, section 7; {NOTES}, section 4",
    why_false=(
        "Shared projection and FFN weights are independent of T; only activations and compute grow "
        "(a learned position table is counted separately)."
    ),
)
def _longer_more_weights():
    rng = np.random.default_rng(12)
    d = 16
    params = encoder_params(rng, d, 64)
    rows = []
    for t in (10, 100):
        y = ref.encoder_layer(rng.normal(size=(1, t, d)), params, 4)  # [1, T, d]
        rows.append(
            {
                "T": t,
                "output_shape": list(y.shape),
                "parameters": param_count(params),
                "score_entries": 4 * t * t,
            }
        )
    lines = ["One encoder layer (d=16, h=4, f=64) run on T=10 and T=100 with the same parameters:"]
    lines += [
        f"  T={r['T']:3d}: output {r['output_shape']}, parameters {r['parameters']:,}, "
        f"score entries {r['score_entries']:,}"
        for r in rows
    ]
    lines.append("Length changes activations and compute, not the shared weights (a learned position")
    lines.append("  table is the exception: it has one row per position up to max_len).")
    return lines, {"rows": rows}


@myth(
    28,
    claim="h heads cost h times the compute of one attention head.",
    source=f"{COURSE}, multi-head lesson; {PLAIN}, section 5 (exam Q9: heads do not cut parameters either)",
    why_false=(
        "Each of the h heads works at width d/h, so QK^T and AV take h * T^2 * (d/h) = T^2 * d "
        "multiply-adds, the same as one full-width head; the projections are d^2 each whatever h is."
    ),
)
def _heads_cost_more():
    from attnlab.audit.config import ModelSpec, Workload
    from attnlab.audit.cost import audit_cost

    rows = {}
    for h in (1, 2, 4, 8):
        terms = {
            r["term"]: r["flops"]
            for r in audit_cost(ModelSpec.from_sizes(d_model=512, heads=h, d_ff=2048), Workload(seq=1024))[
                "terms"
            ]
        }
        rows[h] = {
            "qk": terms["QK\u1d40"],
            "av": terms["AV"],
            "projections": sum(terms[k] for k in ("Q projection", "K projection", "V projection", "W^O")),
        }
    lines = [
        "FLOPs of one self-attention layer, d_model=512, T=1024 (attnlab.audit.audit_cost):",
        "   h   d_k            QK^T              AV     projections",
    ]
    lines += [
        f"  {h:2d}  {512 // h:4d}  {r['qk']:14,}  {r['av']:14,}  {r['projections']:14,}"
        for h, r in rows.items()
    ]
    lines.append("h heads of width d/h do the work of one full-width head: h * T^2 * (d/h) = T^2 * d.")
    return lines, {"flops": rows}
