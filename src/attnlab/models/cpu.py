"""What this CPU and this PyTorch offer the fast paths: the CPU's flags, and oneDNN's kernels.

The flags decide the speed of each number format (AMX or AVX-512 BF16 for bfloat16, AVX-512 VNNI or
AMX-INT8 for int8); :data:`FUSED` names the activations oneDNN applies inside a GEMM.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile

import torch

FEATURES = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8", "avx_vnni")

# The activations oneDNN can apply inside the GEMM (post-op name, algorithm), as attnlab.nn.layers names them
FUSED = {"relu": ("relu", ""), "gelu": ("gelu", "none"), "gelu_tanh": ("gelu", "tanh")}


# What each library's cap on the vector units leaves of FEATURES (a value not listed is ignored by the
# library itself, so it caps nothing here either). PyTorch reads ATEN_CPU_CAPABILITY, oneDNN
# ONEDNN_MAX_CPU_ISA, MKL MKL_ENABLE_INSTRUCTIONS, fbgemm FBGEMM_ENABLE_INSTRUCTIONS, once, at start-up.
_AVX2 = ("avx2",)
_AVX2_VNNI = (*_AVX2, "avx_vnni")
_AVX512 = (*_AVX2, "avx512f")
_AVX512_VNNI = (*_AVX512, "avx512_vnni", "avx_vnni")
_AVX512_BF16 = (*_AVX512_VNNI, "avx512_bf16")
CAPS = {
    "ATEN_CPU_CAPABILITY": {"default": (), "avx2": _AVX2_VNNI},
    "ONEDNN_MAX_CPU_ISA": {
        "sse41": (),
        "avx": (),
        "avx2": _AVX2,
        "avx2_vnni": _AVX2_VNNI,
        "avx2_vnni_2": _AVX2_VNNI,
        "avx512_core": _AVX512,
        "avx512_core_vnni": _AVX512_VNNI,
        "avx512_core_bf16": _AVX512_BF16,
        "avx512_core_fp16": _AVX512_BF16,
        "avx10_1_512": _AVX512_BF16,
    },
    "MKL_ENABLE_INSTRUCTIONS": {
        "sse4_2": (),
        "avx": (),
        "avx2": _AVX2,
        "avx2_e1": _AVX2_VNNI,
        "avx512": _AVX512,
        "avx512_e1": _AVX512_VNNI,
        "avx512_e2": _AVX512_VNNI,
        "avx512_e3": _AVX512_BF16,
    },
    "FBGEMM_ENABLE_INSTRUCTIONS": {
        "avx2": _AVX2,
        "avx512": _AVX512,
        "avx512_256": _AVX512,
        "avx512_e1": _AVX512_VNNI,
        "avx512_e1_256": _AVX512_VNNI,
    },
}
# The caps that decide attnlab's choices. MKL's is left out: MKL picks its path by its own rules (on an
# AMD CPU with AVX-512 it runs AVX2), which attnlab reads from MKL itself (mkl_isa), so capping MKL
# alone emulates such a CPU rather than a weaker one.
CHOOSING = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "FBGEMM_ENABLE_INSTRUCTIONS")


def _cpuinfo() -> tuple[str, set[str]]:
    """The first processor's model name and flags from ``/proc/cpuinfo`` (empty elsewhere)."""
    flags: set[str] = set()
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags" and not flags:
                    flags = set(value.split())
                elif key.strip() == "model name" and not model:
                    model = value.strip()
    except OSError:
        pass
    return model, flags


def caps(environ: dict | None = None) -> dict[str, str]:
    """The caps on the vector units set in ``environ`` (default ``os.environ``) that a library
    honours: ``{variable: value}`` for each variable of :data:`CAPS` with a value it knows."""
    environ = os.environ if environ is None else environ
    return {
        var: environ[var] for var, values in CAPS.items() if environ.get(var, "").strip().lower() in values
    }


def capped(flags: set[str], environ: dict | None = None, only: tuple[str, ...] = CHOOSING) -> dict[str, bool]:
    """``{feature: bool}`` for :data:`FEATURES`: present in ``flags`` and left by every cap of
    :data:`CHOOSING` in ``environ`` (the weakest library decides, so a capped process makes the
    choices of the weaker CPU), or by the caps of the variables in ``only`` (one library's view)."""
    left = set(FEATURES)
    for var, value in caps(environ).items():
        if var not in only:
            continue
        left &= set(CAPS[var][value.strip().lower()])
    return {f: f in flags and f in left for f in FEATURES}


@functools.cache
def cpu_features() -> dict:
    """The CPU features that decide bfloat16 and int8 speed, as this process may use them:
    ``{"model", "flags": {flag: bool}, "hardware": {flag: bool}, "caps": {variable: value}, "onednn":
    {flag: bool}, "torch_capability"}``. ``hardware`` is what ``/proc/cpuinfo`` lists; ``flags`` is
    that less what the caps in the environment (:data:`CAPS`) take away, and the kernel choices read
    it; ``onednn`` is what oneDNN's own cap leaves (training's GEMM choice compares it with MKL's)."""
    model, flags = _cpuinfo()
    onednn = capped(flags, only=("ONEDNN_MAX_CPU_ISA",))
    capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: "unknown")()
    return {
        "model": model,
        "flags": capped(flags),
        "hardware": {f: f in flags for f in FEATURES},
        "caps": caps(),
        "onednn": onednn,
        "torch_capability": capability,
    }


@functools.cache
def mkl_isa() -> str:
    """The vector unit MKL's sgemm runs on in this process, as MKL reports it: ``"avx512"``,
    ``"avx2"``, or ``""`` (no MKL, or a banner not understood). MKL chooses its path by its own rules
    (the CPU's maker among them) and ``MKL_ENABLE_INSTRUCTIONS``, so this is read, not guessed: one
    small ``torch.mm`` under ``torch.backends.mkl.verbose``, whose banner line goes to file
    descriptor 1 (caught in a temporary file and put back)."""
    if not torch.backends.mkl.is_available():
        return ""
    a = torch.ones(8, 8)  # [8, 8]: one tiny sgemm
    try:
        with tempfile.TemporaryFile() as caught:
            sys.stdout.flush()
            saved = os.dup(1)
            os.dup2(caught.fileno(), 1)
            try:
                with torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON):
                    torch.mm(a, a)
            finally:
                os.dup2(saved, 1)
                os.close(saved)
            caught.seek(0)
            banner = caught.read(4096).decode("ascii", errors="replace")
    except (OSError, RuntimeError, ValueError):
        return ""
    if "AVX-512" in banner or "AVX512" in banner:
        return "avx512"
    return "avx2" if "AVX2" in banner else ""


def fast_bfloat16() -> bool:
    """True when the CPU multiplies bfloat16 natively (AMX-BF16 or AVX-512 BF16)."""
    flags = cpu_features()["flags"]
    return flags["amx_bf16"] or flags["avx512_bf16"]


def features_line() -> str:
    """One line naming the CPU and which of :data:`FEATURES` it has, for reports and benchmarks."""
    info = cpu_features()
    have = [f for f, on in info["flags"].items() if on]
    line = f"{info['model'] or 'unknown CPU'}; {' '.join(have) or 'none of ' + ', '.join(FEATURES)}"
    if info["caps"]:
        hidden = [f for f, on in info["hardware"].items() if on and not info["flags"][f]]
        line += f" (capped by {' '.join(f'{k}={v}' for k, v in info['caps'].items())}"
        line += f"; the CPU also has {' '.join(hidden)})" if hidden else ")"
    return line


def onednn_linear() -> bool:
    """True when this PyTorch has oneDNN's prepacked linear (the kernel ``torch.compile`` uses on CPU)."""
    ops = torch.ops.mkldnn
    return torch.backends.mkldnn.is_available() and all(
        hasattr(ops, op) for op in ("_reorder_linear_weight", "_linear_pointwise")
    )


GEMM_ENV = "ATTNLAB_TRAIN_GEMM"  # overrides gemm_choice, to compare the two kernels
GEMM_KERNELS = ("onednn", "aten")


@functools.cache
def _onednn_linear_op() -> bool:
    """True when this PyTorch has oneDNN's linear (``torch.ops.mkldnn._linear_pointwise``)."""
    ops = torch.ops.mkldnn
    return torch.backends.mkldnn.is_available() and hasattr(ops, "_linear_pointwise")


def gemm_choice() -> tuple[str, str]:
    """``(kernel, why)``: the kernel training's linear layers run on here (one of :data:`GEMM_KERNELS`,
    :mod:`attnlab.training.gemm`) and the reason in words: ``ATTNLAB_TRAIN_GEMM`` when set, else
    oneDNN where oneDNN may use AVX-512 (after its cap) and MKL reports a narrower path
    (:func:`mkl_isa`): a choice by what each library runs on, never by the CPU's maker. A value of
    the variable other than the two is a ``ValueError``."""
    chosen = os.environ.get(GEMM_ENV, "").strip()
    if chosen and chosen not in GEMM_KERNELS:
        raise ValueError(f"{GEMM_ENV} must be one of {', '.join(GEMM_KERNELS)}, got {chosen!r}")
    if chosen:
        kernel = "onednn" if chosen == "onednn" and _onednn_linear_op() else "aten"
        return kernel, f"{GEMM_ENV}={chosen}"
    if not _onednn_linear_op():
        return "aten", "this PyTorch has no oneDNN linear"
    avx512, mkl = cpu_features()["onednn"]["avx512f"], mkl_isa() or "unknown"
    if avx512 and mkl != "avx512":
        return "onednn", f"oneDNN runs AVX-512 here and MKL's sgemm {mkl}"
    return "aten", f"MKL's sgemm runs {mkl}, as wide as oneDNN here"
