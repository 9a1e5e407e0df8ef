"""Shared by every benchmark: interleaved timing, summaries, target records, the machine description.

Method: the candidates of one comparison run in the same process, interleaved (A, B, A, B, ...)
after one warm-up call each, so slow phases of a shared machine hit both alike. A table shows the
median and the min-max of the runs; a ratio is median(A) / median(B).
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import metadata


def time_interleaved(
    fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1, pause: float = 0.0
) -> dict[str, list]:
    """Seconds per call for each candidate: ``{name: [t_1, ..., t_repeats]}``, runs interleaved.
    ``pause``: seconds slept (untimed) before each call, so that the worker threads of the candidate
    before (ONNX Runtime's and OpenMP's spin a while after a call) are idle when the next one starts."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    runs: dict[str, list] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            time.sleep(pause)
            t0 = time.perf_counter()
            fn()
            runs[name].append(time.perf_counter() - t0)
    return runs


def summary(runs: list[float]) -> dict:
    """Median, min, max and the runs themselves (seconds)."""
    return {
        "median": statistics.median(runs),
        "min": min(runs),
        "max": max(runs),
        "runs": list(runs),
        "n": len(runs),
    }


def ratio(a: list[float], b: list[float]) -> float:
    """median(a) / median(b)."""
    return statistics.median(a) / statistics.median(b)


def fmt_s(s: dict, unit: str = "ms", scale: float = 1e3, digits: int = 1) -> str:
    """``median (min–max)`` of a :func:`summary`, in ``unit``."""
    med, lo, hi = (f"{s[key] * scale:.{digits}f}" for key in ("median", "min", "max"))
    return f"{med} ({lo}–{hi}) {unit}"


def target(what: str, goal: str, measured: float, met: bool, shown: str, limit: str = "") -> dict:
    """One row of the target table: what is compared, the goal, the measured figure, met or not.

    ``limit`` says what limits a missed target (filled from a measurement where one exists).
    """
    return {
        "what": what,
        "target": goal,
        "measured": measured,
        "shown": shown,
        "met": bool(met),
        "limit": limit,
    }


def table(title: str, columns: list[str], rows: list[list]) -> dict:
    return {"title": title, "columns": columns, "rows": [[str(c) for c in r] for r in rows]}


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _blas_info() -> list[dict]:
    """BLAS libraries loaded by NumPy and PyTorch, with threads and the kernel OpenBLAS chose."""
    import numpy  # noqa: F401  (loads its BLAS so threadpoolctl can see it)
    import torch  # noqa: F401

    try:
        import threadpoolctl
    except ImportError:
        cfg = numpy.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        return [
            {
                "source": "numpy.show_config",
                "name": blas.get("name"),
                "version": blas.get("version"),
                "openblas configuration": blas.get("openblas configuration"),
            }
        ]
    keep = ("user_api", "internal_api", "version", "num_threads", "threading_layer", "architecture", "prefix")
    libs = threadpoolctl.threadpool_info()
    return [{k: lib.get(k) for k in keep if lib.get(k) is not None} for lib in libs]


KINDS = {
    "intel-amx": "AMX (an Intel Xeon)",
    "amd-avx512": "AVX-512 with VNNI and BF16, no AMX (an AMD Zen 4/5)",
    "avx2": "AVX2 only, no AVX-512, VNNI or AMX (an AMD EPYC of family 25)",
    "other": "another x86 or ARM CPU",
}


def cpu_kind(cpu: str, flags: dict | None) -> str:
    """The kind of CPU whose targets and last results go together (a key of :data:`KINDS`), by the
    vector units this process may use (``cpu_features()["flags"]``, after any cap), never by the
    maker's name: a run capped to AVX2 on an AMX machine is an AVX2 run. ``cpu`` is unused (kept for
    old callers)."""
    flags = flags or {}
    if flags.get("amx_bf16"):
        return "intel-amx"
    if flags.get("avx512f"):
        return "amd-avx512"
    if flags.get("avx2"):
        return "avx2"
    return "other"


def machine() -> dict:
    """Machine, library versions, BLAS and its environment settings."""
    import numpy
    import torch

    env_keys = (
        "OPENBLAS_CORETYPE",
        "OPENBLAS_L2_SIZE",
        "OPENBLAS_NUM_THREADS",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
    )
    try:
        mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem_gib = None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=os.path.dirname(__file__),
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    from attnlab.audit.peak import kernel_choices
    from attnlab.models.precision import cpu_features

    info = cpu_features()
    flags = info["flags"]
    return {
        "kind": cpu_kind(_cpu_model(), flags),
        "cpu_flags": [f for f, on in flags.items() if on],
        "cpu_hardware_flags": [f for f, on in info["hardware"].items() if on],
        "cpu_caps": info["caps"],  # the vector-unit caps this run was made under (an emulated kind)
        "kernel_choices": kernel_choices(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem_gib, 1) if mem_gib else None,
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "versions": {
            d: _version(d)
            for d in (
                "attnlab",
                "numpy",
                "torch",
                "transformers",
                "sentence-transformers",
                "tokenizers",
                "threadpoolctl",
            )
        },
        "torch_threads": torch.get_num_threads(),
        "torch_blas": "MKL" if torch.backends.mkl.is_available() else "other",
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "numpy_simd": sorted(numpy.__config__.CONFIG.get("SIMD Extensions", {}).get("found", []) or []),
        "blas": _blas_info(),
        "env": {k: os.environ.get(k, "(unset)") for k in env_keys},
        "commit": commit,
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def ceiling_now(ctx: dict, seconds: float = 2.0) -> float | None:
    """The float32 FLOP ceiling for a utilisation figure, measured again in this process right after
    the timings it divides (``attnlab audit peak``: the best of every kernel), and the larger of that
    and the run's first measurement. A ceiling measured minutes earlier, while the machine was busier,
    read 77 GFLOP/s on an AMD Zen 5 where the same GEMMs ran at 428: a busy phase must lower the
    ceiling no more than it lowers the figure divided by it."""
    from attnlab.audit.peak import measure_peak

    if ctx.get("quick"):
        return ctx.get("peak_flops")
    here = measure_peak(seconds=seconds)["peak_flops"]
    return max(here, ctx.get("peak_flops") or 0.0)


ALL_OPS = "(all operations)"


def profile_top(fn: Callable[[], object], n: int = 8, calls: int = 3) -> list[dict]:
    """The ``n`` PyTorch operations with the most self CPU time per call of ``fn`` (over ``calls``
    calls), after a first row with the totals over all operations."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            fn()
    events = list(prof.key_averages())
    rows = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:n]
    total = {
        "op": ALL_OPS,
        "self_ms_per_call": sum(e.self_cpu_time_total for e in events) / 1e3 / calls,
        "count": sum(e.count for e in events) // calls,
    }
    return [total] + [
        {"op": e.key, "self_ms_per_call": e.self_cpu_time_total / 1e3 / calls, "count": e.count // calls}
        for e in rows
    ]


def profile_table(title: str, tops: dict[str, list[dict]]) -> dict:
    """Side-by-side top operations of several candidates (from :func:`profile_top`)."""
    rows = []
    for name, top in tops.items():
        rows += [[name, f"`{r['op']}`", f"{r['self_ms_per_call']:.2f}", r["count"]] for r in top]
    return table(title, ["candidate", "operation", "self ms per call", "calls per call"], rows)


def explain_profile(
    tops: dict[str, list[dict]], ours_name: str = "attnlab", theirs_name: str = "torch"
) -> str:
    """Operations attnlab spends more time in than the peer (from the profiles), largest first."""
    ours = {r["op"]: r["self_ms_per_call"] for r in tops[ours_name] if r["op"] != ALL_OPS}
    theirs = {r["op"]: r["self_ms_per_call"] for r in tops[theirs_name] if r["op"] != ALL_OPS}
    extra = sorted(((ms - theirs.get(op, 0.0), op) for op, ms in ours.items()), reverse=True)[:3]
    parts = [f"`{op}` +{d:.2f} ms" for d, op in extra if d > 0]
    n_ours, n_theirs = tops[ours_name][0]["count"], tops[theirs_name][0]["count"]
    head = f"profile: {n_ours} vs {n_theirs} operations per call"
    return head + ("; attnlab spends more in " + ", ".join(parts) if parts else "")
