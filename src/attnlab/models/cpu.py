"""What this CPU and this PyTorch offer the fast paths: the CPU's flags, and oneDNN's kernels.

The flags decide the speed of each number format (AMX or AVX-512 BF16 for bfloat16, AVX-512 VNNI or
AMX-INT8 for int8); :data:`FUSED` names the activations oneDNN applies inside a GEMM.
"""

from __future__ import annotations

import functools

import torch

FEATURES = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8", "avx_vnni")

# The activations oneDNN can apply inside the GEMM (post-op name, algorithm), as attnlab.nn.layers names them
FUSED = {"relu": ("relu", ""), "gelu": ("gelu", "none"), "gelu_tanh": ("gelu", "tanh")}


@functools.cache
def cpu_features() -> dict:
    """The CPU flags that decide bfloat16 and int8 speed (from ``/proc/cpuinfo``; empty elsewhere)
    and PyTorch's own view: ``{"model", "flags": {flag: bool}, "torch_capability"}``."""
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
    capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: "unknown")()
    return {"model": model, "flags": {f: f in flags for f in FEATURES}, "torch_capability": capability}


def fast_bfloat16() -> bool:
    """True when the CPU multiplies bfloat16 natively (AMX-BF16 or AVX-512 BF16)."""
    flags = cpu_features()["flags"]
    return flags["amx_bf16"] or flags["avx512_bf16"]


def features_line() -> str:
    """One line naming the CPU and which of :data:`FEATURES` it has, for reports and benchmarks."""
    info = cpu_features()
    have = [f for f, on in info["flags"].items() if on]
    return f"{info['model'] or 'unknown CPU'}; {' '.join(have) or 'none of ' + ', '.join(FEATURES)}"


def onednn_linear() -> bool:
    """True when this PyTorch has oneDNN's prepacked linear (the kernel ``torch.compile`` uses on CPU)."""
    ops = torch.ops.mkldnn
    return torch.backends.mkldnn.is_available() and all(
        hasattr(ops, op) for op in ("_reorder_linear_weight", "_linear_pointwise")
    )
