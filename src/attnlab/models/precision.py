"""The number formats an encoder's packed path runs in, and the CPU features that decide their speed.

``float32``: every matmul in float32 (the reference). ``bfloat16``: the matmuls and the attention
take bfloat16 inputs (weights cast once, activations cast at each projection) while the residual
stream, the LayerNorms and pooling stay float32 — the split ``torch.autocast`` makes, without
autocast's re-casting of every weight on every call; casting the whole model (weights, residual
and LayerNorm in bfloat16) loses three more digits of cosine (measured: 0.9965 minimum on MiniLM,
docs/pretrained.md). ``int8``: PyTorch's dynamic quantisation — weights quantised once, per output
channel, to int8; each projection's input quantised per call to uint8 with its own scale;
``uint8 x int8 -> int32`` matmuls by the quantised engine (:func:`int8_engine`: oneDNN on AMX-INT8
tiles or AVX-512 VNNI where the CPU has them, else fbgemm; see :func:`kernels`) — attention and
LayerNorm in float32.
Inputs use all 8 bits on a CPU with VNNI or AMX-INT8 (int32 sums), 7 bits elsewhere.

    y = s_x s_W (q_x q_W^T) + b,   q_W = round(W / s_W) per row,   q_x = round(x / s_x) + z_x
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.nn.layers import ACTIVATIONS

DTYPES = ("float32", "bfloat16", "int8")
FEATURES = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8", "avx_vnni")

Linear = Callable[[Tensor], Tensor]


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


def kernels(dtype: str) -> str:
    """Which kernels a ``dtype`` path runs on this machine, in words (for reports)."""
    check_dtype(dtype)
    flags = cpu_features()["flags"]
    packed = "oneDNN prepacked" if onednn_linear() else "F.linear"
    if dtype == "float32":
        fma = "AVX-512" if flags["avx512f"] else "AVX2"
        return f"{packed} float32 GEMM ({fma} FMA), bias and GELU fused; the fused SDPA kernel"
    if dtype == "bfloat16":
        unit = "AMX tiles" if flags["amx_bf16"] else "AVX-512 BF16" if flags["avx512_bf16"] else "emulated"
        return f"{packed} bfloat16 GEMM ({unit}), bfloat16 flash SDPA; float32 LayerNorm and residual"
    engine = int8_engine()
    if engine == "onednn":
        on = "AMX-INT8 tiles" if flags["amx_int8"] else "AVX-512 VNNI"
        unit = f"oneDNN brg_matmul u8s8->s32 on {on}"
    else:
        unit = "fbgemm u8s8->s32 with " + ("AVX-512 VNNI" if flags["avx512_vnni"] else "AVX2")
    return f"torch.ops.quantized.linear_dynamic, engine {engine!r} ({unit}); float32 attention and LayerNorm"


def check_dtype(dtype: str) -> str:
    """``dtype`` if it is one of :data:`DTYPES`, else a one-line ``ValueError``."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    if dtype == "int8" and "x86" not in torch.backends.quantized.supported_engines:
        if "fbgemm" not in torch.backends.quantized.supported_engines:
            raise ValueError(
                "dtype 'int8' needs PyTorch's x86/fbgemm quantised engine, which this build lacks "
                f"(engines: {torch.backends.quantized.supported_engines})"
            )
    return dtype


_warned_slow_bf16 = False


def warn_if_slow(dtype: str) -> None:
    """Warn once per process when ``bfloat16`` runs on a CPU without native bfloat16 arithmetic."""
    global _warned_slow_bf16
    if dtype == "bfloat16" and not fast_bfloat16() and not _warned_slow_bf16:
        _warned_slow_bf16 = True
        warnings.warn(
            "dtype='bfloat16' on a CPU without AMX-BF16 or AVX-512 BF16 is emulated and likely slower "
            "than float32",
            RuntimeWarning,
            stacklevel=3,
        )


# The activations oneDNN can apply inside the GEMM (post-op name, algorithm), as attnlab.nn.layers names them
FUSED = {"relu": ("relu", ""), "gelu": ("gelu", "none"), "gelu_tanh": ("gelu", "tanh")}


def onednn_linear() -> bool:
    """True when this PyTorch has oneDNN's prepacked linear (the kernel ``torch.compile`` uses on CPU)."""
    ops = torch.ops.mkldnn
    return torch.backends.mkldnn.is_available() and all(
        hasattr(ops, op) for op in ("_reorder_linear_weight", "_linear_pointwise")
    )


def packed_linear(weight: Tensor, bias: Tensor | None, act: str | None, dtype: torch.dtype) -> Linear:
    """``act(x W^T + b)`` with ``W [d_out, d_in]`` cast to ``dtype`` and reordered once into oneDNN's
    blocked layout (F.linear repacks it on every call), the bias and ``act`` applied inside the GEMM
    (F.linear first copies the bias into every output row). Unfused fallback where oneDNN is absent."""
    w = weight.detach().to(dtype)  # [d_out, d_in]
    b = None if bias is None else bias.detach().to(dtype)  # [d_out]
    fn = ACTIVATIONS[act] if act else None
    bf16 = dtype == torch.bfloat16
    if (
        dtype not in (torch.float32, torch.bfloat16)
        or not onednn_linear()
        or (bf16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported())
    ):

        def plain(x: Tensor) -> Tensor:
            y = F.linear(x.to(dtype), w, b)  # [N, d_in] -> [N, d_out]
            return fn(y) if fn else y

        return plain
    packed = torch.ops.mkldnn._reorder_linear_weight(w, 1024)  # [d_out, d_in], oneDNN layout
    post, algorithm = FUSED.get(act, ("none", ""))
    unfused = fn if act and act not in FUSED else None

    def linear(x: Tensor) -> Tensor:
        x = x if x.dtype == dtype else x.to(dtype)  # (a no-op .to() is still a dispatched call)
        y = torch.ops.mkldnn._linear_pointwise(x, packed, b, post, [], algorithm)  # [N, d_out]
        return unfused(y) if unfused else y

    return linear


def _float32(weight: Tensor, bias: Tensor | None, act: str | None = None) -> Linear:
    return packed_linear(weight, bias, act, weight.dtype)  # [N, d_in] -> [N, d_out], the model's own dtype


def _bfloat16(weight: Tensor, bias: Tensor | None, act: str | None = None) -> Linear:
    return packed_linear(weight, bias, act, torch.bfloat16)  # [N, d_in] -> [N, d_out] bfloat16


def int8_engine() -> str:
    """The quantised engine the int8 weights are packed for: ``onednn`` on a CPU with AMX-INT8 (its
    ``brg_matmul`` runs u8 x s8 on AMX tiles; ONEDNN_VERBOSE shows ``avx10_1_512_amx``) or AVX-512
    VNNI, else PyTorch's current engine (``x86``: fbgemm). On an AMD Zen 5 (AVX-512 VNNI, no AMX)
    oneDNN's u8s8 GEMMs at MiniLM's shapes ([320, 384] x [384, 1536] ...) took 0.75-0.85x fbgemm's
    time, and a whole MiniLM corpus 0.80x (docs/performance.md, 'Where time goes')."""
    engines = torch.backends.quantized.supported_engines
    flags = cpu_features()["flags"]
    if (flags["amx_int8"] or flags["avx512_vnni"]) and "onednn" in engines:
        return "onednn"
    return torch.backends.quantized.engine


@contextlib.contextmanager
def _engine(name: str):
    """Pack under quantised engine ``name``; the packed weights keep it, the global setting is restored."""
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = before


def _int8(weight: Tensor, bias: Tensor | None, act: str | None = None, engine: str | None = None) -> Linear:
    """Per-output-channel symmetric int8 weights, s_W = max_j |W_ij| / 127, packed once for the
    quantised ``engine`` (default :func:`int8_engine`; a benchmark compares engines)."""
    scale = (weight.abs().amax(dim=1).clamp_min(1e-12) / 127.0).double()  # [d_out]
    zero = torch.zeros(weight.shape[0], dtype=torch.long)
    with (
        warnings.catch_warnings(),
        _engine(engine or int8_engine()),
    ):  # torch >= 2.10 flags quantised tensors as
        warnings.simplefilter("ignore", UserWarning)  # deprecated; they are still the kernel
        qweight = torch.quantize_per_channel(weight.float(), scale, zero, 0, torch.qint8)  # [d_out, d_in]
        packed = torch.ops.quantized.linear_prepack(qweight, None if bias is None else bias.float())
    # 7-bit inputs only where u8*s8 pairs are summed in saturating int16 (AVX2's vpmaddubsw); with
    # VNNI/AMX the sums are int32, and the 8th bit lifts MiniLM's minimum cosine from 0.92 to 0.98
    flags = cpu_features()["flags"]
    reduce_range = not (flags["avx512_vnni"] or flags["amx_int8"] or flags["avx_vnni"])

    fn = ACTIVATIONS[act] if act else None

    def linear(x: Tensor) -> Tensor:
        y = torch.ops.quantized.linear_dynamic(x, packed, reduce_range)  # [N, d_out] float32
        return fn(y) if fn else y

    return linear


MAKERS = {"float32": _float32, "bfloat16": _bfloat16, "int8": _int8}


@dataclasses.dataclass(frozen=True)
class PackedLayer:
    """One post-norm encoder layer's weights, ready for the packed path in one number format.

    ``qkv: [N, d] -> [N, 3d]`` (W^Q | W^K | W^V), ``out: [N, d] -> [N, d]`` (W^O), ``ffn_in: [N, d] ->
    [N, d_ff]`` (the FFN's first linear and its activation, act(x W_1 + b_1), fused in one kernel
    where oneDNN can), ``ffn_out: [N, d_ff] -> [N, d]``; ``norm1``/``norm2`` the float32 LayerNorms.
    A linear may return bfloat16; the residual sums promote to float32.
    """

    qkv: Linear
    out: Linear
    ffn_in: Linear
    ffn_out: Linear
    norm1: nn.Module
    norm2: nn.Module


def prepare_layers(layers: nn.ModuleList, dtype: str) -> list[PackedLayer]:
    """:class:`PackedLayer` for each post-norm :class:`attnlab.nn.EncoderLayer`, in ``dtype``."""
    make = MAKERS[check_dtype(dtype)]
    out = []
    with torch.no_grad():
        for layer in layers:
            attn, ffn = layer.self_attn, layer.ffn
            out.append(
                PackedLayer(
                    qkv=make(*attn.qkv_weight()),  # [3d, d], [3d]
                    out=make(attn.out_proj.weight, attn.out_proj.bias),
                    ffn_in=make(ffn.linear1.weight, ffn.linear1.bias, ffn.activation),
                    ffn_out=make(ffn.linear2.weight, ffn.linear2.bias),
                    norm1=layer.norm1,
                    norm2=layer.norm2,
                )
            )
    return out
