"""Beyond quadratic: forward time and extra memory against T for full causal SDPA, SDPA with a
sliding-window mask, block-sparse window attention, linear attention and the selective scan.

All five run in one process, interleaved at each length; the fitted exponent is the least-squares
slope of log(time) against log(T). Memory is the rise of the process's peak resident set during one
call (``/proc/self/clear_refs`` resets the peak; ``mallopt`` makes large buffers go back to the
system when freed, so the figure is the call's own), because the compiled kernel's buffers are
invisible to a dispatch-mode tensor counter.
"""

from __future__ import annotations

import ctypes
import gc
import math
import os
import statistics

import numpy as np
import torch
import torch.nn.functional as F
from _common import summary, table, target, time_interleaved

from attnlab.models.precision import cpu_features
from attnlab.nn import block_sparse_attention, linear_attention, selective_scan, sliding_window_mask
from attnlab.nn.sparse import compile_fallback_reason

NAME = "beyond_quadratic"
TITLE = "Beyond quadratic: block-sparse windows, linear attention and the selective scan against T"
WINDOW = 256
HEADS, D_HEAD, STATE = 8, 64, 16
KINDS = ["SDPA causal", "SDPA + window mask", "block-sparse window", "linear attention", "selective scan"]


def _release_freed_memory() -> None:
    """Large buffers from mmap, returned when freed, so peak RSS measures each call alone."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 16)  # M_MMAP_THRESHOLD: 64 KiB
        libc.mallopt(-1, 0)  # M_TRIM_THRESHOLD: trim at once
    except OSError:
        pass


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


def extra_peak_rss(fn) -> int:
    """Bytes the resident set rose above its level before ``fn()`` (its result included)."""
    gc.collect()
    base = _status("VmRSS:")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak (VmHWM) to the current resident set
    out = fn()
    peak = _status("VmHWM:")
    del out
    return max(0, peak - base)


def _inputs(t: int):
    g = torch.Generator().manual_seed(t)
    q, k, v = (torch.randn(1, HEADS, t, D_HEAD, generator=g) for _ in range(3))  # [B, h, T, d]
    d = HEADS * D_HEAD
    x = torch.randn(1, t, d, generator=g)  # the scan's input  [B, T, d]
    # Mamba's initialisation: step sizes log-uniform in [1e-3, 1e-1], A = -(1, 2, ..., n) per channel
    delta = torch.exp(torch.empty(1, t, d).uniform_(math.log(1e-3), math.log(1e-1), generator=g))  # [B, T, d]
    a = -torch.arange(1, STATE + 1, dtype=torch.float32).repeat(d, 1)  # [d, n]
    b, c = (torch.randn(1, t, STATE, generator=g) for _ in range(2))  # [B, T, n]
    mask = sliding_window_mask(t, window=WINDOW)  # [T, T] bool, built once like a cached mask
    return {
        "SDPA causal": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "SDPA + window mask": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        "block-sparse window": lambda: block_sparse_attention(q, k, v, causal=True, window=WINDOW),
        "linear attention": lambda: linear_attention(q, k, v, causal=True),
        "selective scan": lambda: selective_scan(x, delta, a, b, c),
    }, mask.numel()


def _slope(ts, ys) -> float:
    return float(np.polyfit(np.log(ts), np.log(ys), 1)[0])


def _ratio_spread(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """median(a)/median(b), and the min-max of the run-by-run ratios (the runs are interleaved)."""
    pairs = [x / y for x, y in zip(a, b)]
    return statistics.median(a) / statistics.median(b), min(pairs), max(pairs)


def run(ctx: dict) -> dict:
    _release_freed_memory()
    # One thread for every candidate: on a shared, loaded 2-core machine a second OpenMP thread
    # spin-waits for a core and turns each small operation into a scheduler time slice.
    torch.set_num_threads(1)
    lengths = [512, 1024, 2048] if ctx.get("quick") else [1024, 2048, 4096, 8192, 16384]
    repeats = 3
    with torch.no_grad():
        fns, _ = _inputs(256)
        fns["block-sparse window"]()  # compile (or load from Inductor's cache) before timing
        times, mems, loads, mask_bytes = {}, {}, {}, {}
        for t in lengths:
            fns, mask_bytes[t] = _inputs(t)
            loads[t] = os.getloadavg()
            times[t] = time_interleaved(fns, repeats=repeats)
            mems[t] = {name: extra_peak_rss(fn) for name, fn in fns.items()}
            del fns
    time_rows = []
    for t in lengths:
        row = [str(t)] + [f"{statistics.median(times[t][n]) * 1e3:.1f}" for n in KINDS]
        big, small = times[t]["SDPA + window mask"], times[t]["block-sparse window"]
        r, lo, hi = _ratio_spread(big, small)
        time_rows.append(row + [f"{r:.1f}× ({lo:.1f}–{hi:.1f})", ", ".join(f"{x:.1f}" for x in loads[t])])
    mem_rows = [
        [str(t)] + [f"{mems[t][n] / 2**20:.1f}" for n in KINDS] + [f"{mask_bytes[t] / 2**20:.0f}"]
        for t in lengths
    ]
    exps = {}
    for n in KINDS:
        med = [statistics.median(times[t][n]) for t in lengths]
        lo = [min(times[t][n]) for t in lengths]
        hi = [max(times[t][n]) for t in lengths]
        exps[n] = (_slope(lengths, med), _slope(lengths, lo), _slope(lengths, hi))
    mem_exp = {n: _slope(lengths, [max(mems[t][n], 1) for t in lengths]) for n in KINDS}
    exp_rows = [
        [
            n,
            f"{exps[n][0]:.2f} (min-time fit {exps[n][1]:.2f}, max-time fit {exps[n][2]:.2f})",
            f"{mem_exp[n]:.2f}",
        ]
        for n in KINDS
    ]
    t_max = lengths[-1]
    r, lo, hi = _ratio_spread(times[t_max]["SDPA + window mask"], times[t_max]["block-sparse window"])
    targets = [
        target(
            f"block-sparse window (W={WINDOW}) vs SDPA + window mask, T={t_max}",
            "≥ 5× faster",
            r,
            r >= 5,
            f"{r:.1f}× ({lo:.1f}–{hi:.1f})",
        ),
        target(
            "block-sparse window: memory against T (log-log slope)",
            "linear (≤ 1.15)",
            mem_exp["block-sparse window"],
            mem_exp["block-sparse window"] <= 1.15,
            f"{mem_exp['block-sparse window']:.2f}",
        ),
    ]
    for n in ("linear attention", "selective scan"):
        targets.append(
            target(f"{n}: time exponent", "≤ 1.2", exps[n][0], exps[n][0] <= 1.2, f"{exps[n][0]:.2f}")
        )
    fallback = compile_fallback_reason()
    cpu = cpu_features()
    features = ", ".join(k for k, on in cpu["flags"].items() if on) or "none of AVX2/AVX-512/AMX"
    return {
        "name": NAME,
        "title": TITLE,
        "targets": targets,
        "raw": {
            "lengths": lengths,
            "times": {str(t): {n: summary(times[t][n]) for n in KINDS} for t in lengths},
            "extra_peak_rss_bytes": {str(t): mems[t] for t in lengths},
            "exponents": exps,
            "memory_exponents": mem_exp,
            "load_average_per_length": {str(t): loads[t] for t in lengths},
            "compile_fallback": fallback,
            "cpu": cpu,
        },
        "tables": [
            table(
                f"Forward time, median of {repeats} interleaved runs (ms); B=1, h={HEADS}, d={D_HEAD}, "
                f"float32, 1 thread; window W={WINDOW}; the scan over d={HEADS * D_HEAD} channels, n={STATE}",
                ["T", *KINDS, "SDPA+mask / block-sparse (min–max)", "load average (1, 5, 15 min)"],
                time_rows,
            ),
            table(
                "Extra peak memory of one forward call (MiB; the window mask itself is an input, its "
                "size in the last column)",
                ["T", *KINDS, "window mask (MiB)"],
                mem_rows,
            ),
            table(
                "Fitted exponent of time against T (log-log slope over the lengths above), and of memory",
                ["kind", "time exponent", "memory exponent"],
                exp_rows,
            ),
        ],
        "notes": [
            f"SDPA with a [T, T] window mask still computes all T² scores and reads the mask; the "
            f"block-sparse kernel (flex_attention compiled by torch.compile, a {WINDOW}-wide window in "
            f"tiles of 128) computes at most 4 of the T/128 key tiles per query tile, so its time grows "
            f"like T·W.",
            "Linear attention (causal: prefix sums over chunks of 64) and the selective scan (two-level "
            "chunked scan) never form a T×T matrix: time and memory grow linearly in T.",
            "Compiled kernel: " + ("used" if fallback is None else f"NOT used ({fallback})") + ".",
            f"CPU: {cpu['model']}; features: {features}; PyTorch's CPU capability: "
            f"{cpu['torch_capability']} (the float32 kernels here use AVX-512, not AMX, which is bf16/int8).",
        ],
    }
