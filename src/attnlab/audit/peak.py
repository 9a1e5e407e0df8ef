"""This machine's matmul throughput, and model-FLOPs utilisation (MFU) from a measured throughput.

Peak: float32 ``[n, n] @ [n, n]`` (2n³ FLOPs) for a few sizes, best of several repeats, within a
time budget. MFU (PaLM's definition) = tokens/s × model FLOPs per token / peak FLOP/s.
"""

from __future__ import annotations

import time

import torch

from attnlab._checks import positive_int

SIZES = (256, 512, 1024)


def measure_peak(
    seconds: float = 2.0, sizes: tuple[int, ...] = SIZES, dtype: torch.dtype = torch.float32
) -> dict:
    """Best matmul FLOP/s per size on the CPU, spending about ``seconds`` in total.

    Returns {"peak_flops": best FLOP/s over all sizes, "by_size": [{n, flops_per_s, repeats}],
    "dtype", "threads", "seconds"}. Each timing is one ``torch.mm`` of ``[n, n] @ [n, n]`` = 2n³ FLOPs
    after a warm-up call; the best (fastest) repeat counts.
    """
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    sizes = tuple(positive_int("size", n) for n in sizes)
    budget = seconds / len(sizes)
    rows = []
    for n in sizes:
        a = torch.randn(n, n, dtype=dtype)  # [n, n]
        b = torch.randn(n, n, dtype=dtype)  # [n, n]
        torch.mm(a, b)  # warm-up: allocation and thread start-up are not throughput
        best, repeats, start = float("inf"), 0, time.perf_counter()
        while repeats < 3 or time.perf_counter() - start < budget:
            t0 = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - t0)
            repeats += 1
            if repeats >= 1000:
                break
        rows.append({"n": n, "flops_per_s": 2 * n**3 / best, "repeats": repeats})
    return {
        "peak_flops": max(r["flops_per_s"] for r in rows),
        "by_size": rows,
        "dtype": str(dtype),
        "threads": torch.get_num_threads(),
        "seconds": seconds,
    }


def mfu(tokens_per_s: float, flops_per_token: float, peak: float | dict) -> float:
    """Model-FLOPs utilisation = tokens_per_s · flops_per_token / peak (a fraction, 1.0 = peak).

    ``peak`` is FLOP/s or a :func:`measure_peak` report.
    """
    peak_flops = peak["peak_flops"] if isinstance(peak, dict) else peak
    for name, v in (
        ("tokens_per_s", tokens_per_s),
        ("flops_per_token", flops_per_token),
        ("peak", peak_flops),
    ):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ValueError(f"{name} must be a positive number, got {v!r}")
    return tokens_per_s * flops_per_token / peak_flops


def render_peak(report: dict) -> str:
    """The peak table, and the MFU line if the report has one."""
    out = [
        f"matmul throughput of this machine ({report['dtype']}, {report['threads']} threads, "
        "best of repeats):"
    ]
    out += [
        f"  n = {r['n']:>5}: {r['flops_per_s'] / 1e9:10.2f} GFLOP/s  ({r['repeats']} repeats)"
        for r in report["by_size"]
    ]
    out.append(f"peak: {report['peak_flops'] / 1e9:.2f} GFLOP/s (FLOPs = 2·n³ per [n,n]@[n,n])")
    if "mfu" in report:
        m = report["mfu"]
        out.append(
            f"MFU = {m['tokens_per_s']:,} tokens/s × {m['flops_per_token']:,.0f} FLOPs/token / peak = "
            f"{100 * m['mfu']:.2f}% ({m['flops_source']})"
        )
        if m["mfu"] > 1:
            out.append(
                "WARNING: MFU above 100% is impossible: the throughput, the FLOPs per token or the "
                "peak measurement (a busy machine measures low) is wrong"
            )
    return "\n".join(out)
