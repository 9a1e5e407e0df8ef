"""This machine's matmul throughput, and model-FLOPs utilisation (MFU) from a measured throughput.

Peak: ``[n, n] @ [n, n]`` (2n³ FLOPs) for a few sizes, by each kernel attnlab runs, best of several
repeats, within a time budget. MFU (PaLM's definition) = tokens/s × model FLOPs per token / peak FLOP/s.
"""

from __future__ import annotations

import functools
import time

import torch

from attnlab._checks import positive_int
from attnlab.models.cpu import gemm_choice
from attnlab.models.int8 import int8_kernel
from attnlab.models.precision import (
    DTYPES,
    MAKERS,
    check_dtype,
    cpu_features,
    features_line,
    kernels,
    onednn_linear,
)

SIZES = (256, 512, 1024)


def _matmuls(n: int, dtype: str) -> dict:
    """``[n, n] @ [n, n]`` in ``dtype`` by every kernel attnlab's fast paths run: ``{kernel: closure}``
    (inputs made once). A ceiling measured with one kernel does not bound another: on an AMD Zen 5,
    ``torch.mm`` (MKL) runs float32 at about half the rate of oneDNN's prepacked GEMM, which the
    embedding and encoder paths use, and a benchmark then ran at 160% of that "ceiling"."""

    a = torch.randn(n, n)  # [n, n]
    b = torch.randn(n, n)  # [n, n]
    if dtype == "int8":  # dynamic quantisation: float32 in and out, uint8 x int8 -> int32 inside
        return {f"int8 {int8_kernel()}": functools.partial(MAKERS["int8"](b, None), a)}
    if dtype == "bfloat16":
        a16, b16 = a.bfloat16(), b.bfloat16()
        ops = {"torch.mm": functools.partial(torch.mm, a16, b16)}
    else:
        ops = {"torch.mm": functools.partial(torch.mm, a, b)}
    if onednn_linear():
        ops["oneDNN prepacked linear"] = functools.partial(MAKERS[dtype](b, None), a)
    return ops


def _best_time(op, budget: float) -> tuple[float, int]:
    """Fastest of repeated calls of ``op`` within ``budget`` seconds (at least 3): (seconds, repeats)."""
    op()  # warm-up: allocation and thread start-up are not throughput
    best, repeats, start = float("inf"), 0, time.perf_counter()
    while repeats < 3 or time.perf_counter() - start < budget:
        t0 = time.perf_counter()
        op()
        best = min(best, time.perf_counter() - t0)
        repeats += 1
        if repeats >= 1000:
            break
    return best, repeats


def measure_peak(
    seconds: float = 2.0, sizes: tuple[int, ...] = SIZES, dtype: str | torch.dtype = "float32"
) -> dict:
    """Best matmul FLOP/s per size and kernel on the CPU, spending about ``seconds`` in total.

    ``dtype``: ``"float32"``, ``"bfloat16"`` (AMX / AVX-512 BF16 where the CPU has them) or ``"int8"``
    (the kernel of ``embed(dtype="int8")``, :func:`attnlab.models.int8.int8_kernel`, counting 2n³
    FLOPs as for float). Each size is timed with every kernel attnlab runs for that dtype
    (``torch.mm`` and oneDNN's prepacked linear), so the ceiling bounds whichever a benchmark uses.
    Returns {"peak_flops": best FLOP/s over all sizes and kernels, "by_size": [{n, kernel,
    flops_per_s, repeats, kernels: {kernel: FLOP/s}}] (the best kernel per size), "dtype", "threads",
    "seconds", "cpu": the CPU features that decide these ceilings
    (:func:`attnlab.models.precision.cpu_features`)}. Each timing is one ``[n, n] @ [n, n]`` = 2n³
    FLOPs after a warm-up call; the best repeat counts.
    """

    if isinstance(dtype, torch.dtype):
        dtype = str(dtype).removeprefix("torch.")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    check_dtype(dtype)
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    sizes = tuple(positive_int("size", n) for n in sizes)
    rows = []
    for n in sizes:
        ops = _matmuls(n, dtype)
        rates, counts = {}, {}
        for kernel, op in ops.items():
            best, counts[kernel] = _best_time(op, seconds / len(sizes) / len(ops))
            rates[kernel] = 2 * n**3 / best
        kernel = max(rates, key=rates.get)
        rows.append(
            {
                "n": n,
                "kernel": kernel,
                "flops_per_s": rates[kernel],
                "repeats": counts[kernel],
                "kernels": rates,
            }
        )
    return {
        "peak_flops": max(r["flops_per_s"] for r in rows),
        "by_size": rows,
        "dtype": dtype,
        "threads": torch.get_num_threads(),
        "seconds": seconds,
        "cpu": cpu_features(),
        "choices": kernel_choices(),
    }


def kernel_choices() -> dict:
    """What each fast path runs on here and why, in words (for ``audit peak`` and benchmark records):
    ``{"training GEMM", "int8", "float32", "bfloat16"}``, each chosen from the CPU features left by
    any cap (:func:`attnlab.models.cpu.cpu_features`) or a measurement, never the CPU's maker."""
    kernel, why = gemm_choice()
    return {
        "training GEMM": f"{kernel} ({why})",
        "int8": kernels("int8"),
        "float32": kernels("float32"),
        "bfloat16": kernels("bfloat16"),
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
        f"  n = {r['n']:>5}: {r['flops_per_s'] / 1e9:10.2f} GFLOP/s  ({r['kernel']}, {r['repeats']} repeats)"
        for r in report["by_size"]
    ]
    out.append(f"peak: {report['peak_flops'] / 1e9:.2f} GFLOP/s (FLOPs = 2·n³ per [n,n]@[n,n])")
    if "cpu" in report:
        out.append(f"CPU: {features_line()}")
    for path, said in report.get("choices", {}).items():
        out.append(f"{path}: {said}")
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
