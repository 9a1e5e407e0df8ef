"""The number formats an encoder's packed path runs in, and the CPU features that decide their speed.

``float32``: every matmul in float32 (the reference). ``bfloat16``: the matmuls and the attention
take bfloat16 inputs (weights cast once, activations cast at each projection) while the residual
stream, the LayerNorms and pooling stay float32 — the split ``torch.autocast`` makes, without
autocast's re-casting of every weight on every call; casting the whole model (weights, residual
and LayerNorm in bfloat16) loses three more digits of cosine (measured: 0.9965 minimum on MiniLM,
docs/pretrained.md). ``int8``: PyTorch's dynamic quantisation — weights quantised once, per output
channel, to int8; each projection's input quantised per call to uint8 with its own scale;
``uint8 x int8 -> int32`` matmuls (:mod:`attnlab.models.int8`: oneDNN's qlinear with the GELU and
the residual sum fused, on AMX-INT8 tiles or AVX-512 VNNI where the CPU has them, else fbgemm; see
:func:`kernels`) — attention and LayerNorm in float32.
Inputs use all 8 bits on a CPU with VNNI or AMX-INT8 (int32 sums), 7 bits elsewhere.

    y = s_x s_W (q_x q_W^T) + b,   q_W = round(W / s_W) per row,   q_x = round(x / s_x) + z_x
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.models.cpu import FEATURES, FUSED, cpu_features, fast_bfloat16, features_line, onednn_linear
from attnlab.models.int8 import int8_engine, int8_kernel, int8_linear
from attnlab.names import MODEL_DTYPES as DTYPES
from attnlab.nn.layers import ACTIVATIONS

__all__ = [
    "DTYPES",
    "FEATURES",
    "MAKERS",
    "PackedLayer",
    "check_dtype",
    "cpu_features",
    "fast_bfloat16",
    "features_line",
    "int8_engine",
    "int8_kernel",
    "kernels",
    "onednn_linear",
    "packed_linear",
    "prepare_layers",
    "warn_if_slow",
]


Linear = Callable[..., Tensor]  # x [N, d_in] (, residual [N, d_out]) -> [N, d_out]


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
    kernel = int8_kernel()
    if kernel == "fbgemm":
        vnni = flags["avx512_vnni"] or flags["avx_vnni"]
        unit = "fbgemm u8s8->s32 with " + ("VNNI" if vnni else "AVX2, 7-bit inputs")
        return f"torch.ops.quantized.linear_dynamic ({unit}); float32 attention and LayerNorm"
    on = "AMX-INT8 tiles" if flags["amx_int8"] else "AVX-512 VNNI" if flags["avx512_vnni"] else "AVX-VNNI"
    if kernel == "onednn qlinear":
        return (
            f"torch.ops.onednn.qlinear_pointwise (oneDNN u8s8->s32 on {on}), bias, GELU and residual sum "
            "fused; float32 attention and LayerNorm"
        )
    return (
        f"torch.ops.quantized.linear_dynamic, engine 'onednn' (u8s8->s32 on {on}); float32 attention "
        "and LayerNorm"
    )


def check_dtype(dtype: str) -> str:
    """``dtype`` if it is one of :data:`DTYPES`, else a one-line ``ValueError``."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    engines = torch.backends.quantized.supported_engines
    if dtype == "int8" and not {"x86", "fbgemm", "onednn"} & set(engines):
        raise ValueError(
            f"dtype 'int8' needs one of PyTorch's quantised engines, which this build lacks ({engines})"
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


def packed_linear(weight: Tensor, bias: Tensor | None, act: str | None, dtype: torch.dtype) -> Linear:
    """``linear(x [N, d_in], residual=None) -> act(x W^T + b) (+ residual) [N, d_out]`` with
    ``W [d_out, d_in]`` cast to ``dtype`` and reordered once into oneDNN's blocked layout (F.linear
    repacks it on every call), the bias and ``act`` applied inside the GEMM (F.linear first copies the
    bias into every output row). Unfused ``F.linear`` where oneDNN is absent or the weight is not
    on the CPU."""
    w = weight.detach().to(dtype)  # [d_out, d_in]
    b = None if bias is None else bias.detach().to(dtype)  # [d_out]
    fn = ACTIVATIONS[act] if act else None
    bf16 = dtype == torch.bfloat16
    if (
        dtype not in (torch.float32, torch.bfloat16)
        or weight.device.type != "cpu"  # oneDNN's prepacked linear is a CPU kernel
        or not onednn_linear()
        or (bf16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported())
    ):

        def plain(x: Tensor, residual: Tensor | None = None) -> Tensor:
            y = F.linear(x.to(dtype), w, b)  # [N, d_in] -> [N, d_out]
            y = fn(y) if fn else y
            return y if residual is None else residual + y

        return plain
    packed = torch.ops.mkldnn._reorder_linear_weight(w, 1024)  # [d_out, d_in], oneDNN layout
    post, algorithm = FUSED.get(act, ("none", ""))
    unfused = fn if act and act not in FUSED else None

    def linear(x: Tensor, residual: Tensor | None = None) -> Tensor:
        x = x if x.dtype == dtype else x.to(dtype)  # (a no-op .to() is still a dispatched call)
        y = torch.ops.mkldnn._linear_pointwise(x, packed, b, post, [], algorithm)  # [N, d_out]
        y = unfused(y) if unfused else y
        return y if residual is None else residual + y  # (fusing this add measured no faster)

    return linear


def _float32(weight: Tensor, bias: Tensor | None, act: str | None = None) -> Linear:
    return packed_linear(weight, bias, act, weight.dtype)  # [N, d_in] -> [N, d_out], the model's own dtype


def _bfloat16(weight: Tensor, bias: Tensor | None, act: str | None = None) -> Linear:
    return packed_linear(weight, bias, act, torch.bfloat16)  # [N, d_in] -> [N, d_out] bfloat16


MAKERS = {"float32": _float32, "bfloat16": _bfloat16, "int8": int8_linear}


@dataclasses.dataclass(frozen=True)
class PackedLayer:
    """One post-norm encoder layer's weights, ready for the packed path in one number format.

    ``qkv: [N, d] -> [N, 3d]`` (W^Q | W^K | W^V), ``out: [N, d] -> [N, d]`` (W^O), ``ffn_in: [N, d] ->
    [N, d_ff]`` (the FFN's first linear and its activation, act(x W_1 + b_1), fused in one kernel
    where oneDNN can), ``ffn_out: [N, d_ff] -> [N, d]``; ``norm1``/``norm2`` the float32 LayerNorms.
    ``out`` and ``ffn_out`` take the residual stream as a second argument and return the sum
    (float32; the int8 kernel adds it inside the GEMM, writing into the residual's memory, so the
    caller passes a stream it no longer needs). ``qkv`` and ``ffn_in`` may return bfloat16.
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
