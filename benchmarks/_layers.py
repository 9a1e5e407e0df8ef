"""Shared by the MultiHeadAttention and EncoderLayer benchmarks: attnlab module vs its torch twin with
the same weights, forward+backward, interleaved; profile both when the target is missed."""

from __future__ import annotations

import torch
from _common import (
    explain_profile,
    fmt_s,
    profile_table,
    profile_top,
    ratio,
    summary,
    table,
    target,
    time_interleaved,
)


def train_step(module, call):
    """One forward + backward (sum of outputs), gradients cleared after."""
    params = list(module.parameters())

    def step():
        out = call()
        out.sum().backward()
        for p in params:
            p.grad = None

    return step


def compare(name: str, ours, theirs, call_ours, call_theirs, goal: float, what: str, repeats: int) -> dict:
    """Interleaved fwd+bwd and inference timings of two modules; a target row; profiles if missed."""
    with torch.no_grad():
        ours.eval()
        theirs.eval()
        diff = float((call_ours() - call_theirs()).abs().max())
        inf = time_interleaved({"attnlab": call_ours, "torch": call_theirs}, repeats=repeats)
    ours.train()
    theirs.train()
    steps = {"attnlab": train_step(ours, call_ours), "torch": train_step(theirs, call_theirs)}
    runs = time_interleaved(steps, repeats=repeats, warmup=2)
    r, r_inf = ratio(runs["attnlab"], runs["torch"]), ratio(inf["attnlab"], inf["torch"])
    raw = {
        "fwd_bwd": {n: summary(x) for n, x in runs.items()},
        "inference": {n: summary(x) for n, x in inf.items()},
        "max_abs_diff_eval_output": diff,
        "ratio": r,
        "inference_ratio": r_inf,
    }
    tables = [
        table(
            f"{what}: time per call (median, min–max of {repeats})",
            ["mode", "attnlab", "torch", "attnlab / torch"],
            [
                [
                    "forward + backward (train mode)",
                    fmt_s(raw["fwd_bwd"]["attnlab"]),
                    fmt_s(raw["fwd_bwd"]["torch"]),
                    f"{r:.3f}×",
                ],
                [
                    "forward, inference (eval, no_grad)",
                    fmt_s(raw["inference"]["attnlab"]),
                    fmt_s(raw["inference"]["torch"]),
                    f"{r_inf:.3f}×",
                ],
            ],
        )
    ]
    limit = ""
    if r > goal:
        tops = {"attnlab": profile_top(steps["attnlab"]), "torch": profile_top(steps["torch"])}
        raw["profile"] = tops
        tables.append(
            profile_table(f"{what}: where forward + backward spends its time (torch.profiler)", tops)
        )
        limit = explain_profile(tops)
    return {
        "raw": raw,
        "tables": tables,
        "targets": [
            target(f"{name} / torch, forward+backward", f"≤ {goal}×", r, r <= goal, f"{r:.3f}×", limit)
        ],
        "reports": [{"what": f"{name} / torch, inference forward", "shown": f"{r_inf:.3f}×"}],
    }
