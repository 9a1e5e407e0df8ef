"""What pushes F.scaled_dot_product_attention off its fast CPU kernel, measured; and is_causal's alignment."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import fmt_s, ratio, summary, table, time_interleaved
from _torchmem import extra_peak_bytes
from torch.profiler import ProfilerActivity, profile

NAME = "sdpa_pitfalls"
TITLE = "Pitfalls: what makes SDPA slow, and where is_causal points"


def kernel_used(call) -> str:
    """The ATen kernel SDPA dispatched to (from the profiler's event names)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        call()
    names = {e.name for e in prof.events()}
    picks = [n for n in names if n.startswith("aten::_scaled_dot_product")]
    return ", ".join(sorted(picks)) or "?"


def _variants(t: int):
    causal = torch.ones(t, t, dtype=torch.bool).tril()  # [T, T], True = may attend
    return {
        "is_causal=True": dict(is_causal=True),
        "explicit causal bool mask": dict(attn_mask=causal),
        "no mask (full attention)": {},
        "is_causal=True, dropout_p=0.1": dict(is_causal=True, dropout_p=0.1),
    }


def _alignment() -> dict:
    """T_q = 4 queries over T_k = 10 keys: is_causal=True against the two possible alignments."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(1, 1, 4, 8, generator=g),
        torch.randn(1, 1, 10, 8, generator=g),
        torch.randn(1, 1, 10, 8, generator=g),
    )
    i, j = torch.arange(4)[:, None], torch.arange(10)[None, :]
    upper_left, lower_right = j <= i, j <= i + (10 - 4)  # [4, 10] each
    got = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ul = F.scaled_dot_product_attention(q, k, v, attn_mask=upper_left)
    lr = F.scaled_dot_product_attention(q, k, v, attn_mask=lower_right)
    return {"vs_upper_left": float((got - ul).abs().max()), "vs_lower_right": float((got - lr).abs().max())}


def run(ctx: dict) -> dict:
    t = 256 if ctx.get("quick") else 1024
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(4, 8, t, 64, generator=g, requires_grad=True) for _ in range(3))
    variants = _variants(t)

    def fwd_bwd(kw):
        def step():
            out = F.scaled_dot_product_attention(q, k, v, **kw)
            out.backward(torch.ones_like(out))
            for x in (q, k, v):
                x.grad = None

        return step

    runs = time_interleaved({name: fwd_bwd(kw) for name, kw in variants.items()}, repeats=5)
    base = runs["is_causal=True"]
    rows, raw = [], {}
    for name, kw in variants.items():
        kernel = kernel_used(lambda kw=kw: F.scaled_dot_product_attention(q, k, v, **kw))
        mem = extra_peak_bytes(lambda kw=kw: F.scaled_dot_product_attention(q, k, v, **kw))
        raw[name] = {"time": summary(runs[name]), "kernel": kernel, "forward_extra_peak_bytes": mem}
        rows.append(
            [
                name,
                f"`{kernel}`",
                fmt_s(raw[name]["time"]),
                f"{ratio(runs[name], base):.2f}×",
                f"{mem / 2**20:.1f} MiB",
            ]
        )
    align = _alignment()
    raw["alignment"] = align
    return {
        "name": NAME,
        "title": TITLE,
        "targets": [],
        "raw": raw,
        "reports": [
            {
                "what": "SDPA explicit causal mask / is_causal (fwd+bwd)",
                "shown": f"{ratio(runs['explicit causal bool mask'], base):.2f}×",
            },
            {
                "what": "SDPA dropout 0.1 / no dropout (fwd+bwd)",
                "shown": f"{ratio(runs['is_causal=True, dropout_p=0.1'], base):.2f}×",
            },
        ],
        "tables": [
            table(
                f"F.scaled_dot_product_attention, B=4, h=8, T={t}, d=64, float32, forward+backward "
                "(kernel and memory from the forward)",
                ["call", "kernel", "time", "vs is_causal", "forward extra memory"],
                rows,
            ),
            table(
                "is_causal=True with 4 queries over 10 keys (one chunk of decoding over a cache)",
                ["compared with", "max |difference|"],
                [
                    ["upper-left mask (query i sees keys 0..i)", f"{align['vs_upper_left']:.1e}"],
                    ["lower-right mask (query i sees keys 0..i+6)", f"{align['vs_lower_right']:.2f}"],
                ],
            ),
        ],
        "notes": [
            "dropout_p > 0 sends SDPA to its math kernel, which materialises the [B, h, T, T] weights "
            "(and a dropout mask) instead of streaming tiles: see its time and memory above. attnlab's "
            "modules only pass dropout_p in training mode, so evaluation keeps the fast kernel.",
            f"In this PyTorch version an explicit boolean causal mask still runs the CPU flash kernel "
            f"(see the kernel column), but the kernel must read the [T, T] mask and cannot skip the blocks "
            f"above the diagonal: {ratio(runs['explicit causal bool mask'], base):.2f}× the time of "
            f"is_causal=True here, against {ratio(runs['no mask (full attention)'], base):.2f}× for full "
            f"attention.",
            "PyTorch's is_causal=True is aligned to the upper left: with fewer queries than keys (decoding "
            "a chunk over a KV cache) query i sees keys 0..i, not the last i + T_k − T_q + 1 keys. The "
            "difference above is 0 against the upper-left mask and large against the lower-right one. "
            "attnlab's causal masks, nn.flash_attention and the KV-cache path use the lower-right "
            "alignment (ref.causal_mask).",
        ],
    }
