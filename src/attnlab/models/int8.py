"""Int8 linears for the packed encoder path: weights quantised once, each input per call.

    y = s_x s_W (q_x q_W^T) + b,   q_W = round(W / s_W) per row,   q_x = round(x / s_x) + z_x

Weights per output channel, symmetric int8: ``s_W = max_j |W_ij| / 127``. Inputs per call, per
tensor, asymmetric uint8 over ``[min(x, 0), max(x, 0)]``: ``s_x = (max - min) / 255``,
``z_x = round(-min / s_x)`` (PyTorch's dynamic quantisation; 7 bits where the CPU sums u8 x s8 pairs
in saturating int16). The kernels (:func:`int8_kernel` picks one):

- **oneDNN qlinear** (:func:`int8_engine` is ``onednn``: a CPU with AVX-512 VNNI or AMX-INT8).
  The input is quantised here, then one ``torch.ops.onednn.qlinear_pointwise`` call does the
  ``u8 x s8 -> s32`` product, the scales, the bias, the activation (GELU) and, for the output
  projections, the residual sum ``y + r`` (into ``r``'s memory). In one interleaved run on an AMD
  Zen 5 (AVX-512 VNNI, 2 threads) MiniLM embedded 512 sentences of 5-120 words in 1.36 s, against
  1.51 s with ``quantized::linear_dynamic`` on the same engine (GELU and sum after it) and 1.63 s
  with fbgemm's; ``benchmarks/bench_embed.py`` records its own run of this comparison.
- **oneDNN linear_dynamic**: ``quantized::linear_dynamic`` packed for oneDNN's engine, on such a CPU
  when this PyTorch lacks the qlinear kernel (it quantises its input inside; the activation and the
  residual sum run after it).
- **fbgemm** ``quantized::linear_dynamic`` on every other CPU, the same way.
"""

from __future__ import annotations

import contextlib
import math
import os
import warnings
from collections.abc import Callable

import torch
from torch import Tensor

from attnlab.models.cpu import FUSED, cpu_features
from attnlab.nn.layers import ACTIVATIONS

# x [N, d_in] (and a residual [N, d_out] to add, which may be overwritten) -> [N, d_out] float32
Linear = Callable[..., Tensor]


def int8_engine() -> str:
    """The quantised engine for this CPU: ``onednn`` on a CPU with AMX-INT8 (its ``brg_matmul`` runs
    u8 x s8 on AMX tiles; ONEDNN_VERBOSE shows ``avx10_1_512_amx``) or AVX-512 VNNI, else PyTorch's
    current engine (``x86``: fbgemm). :func:`int8_kernel` picks the kernel from it."""
    engines = torch.backends.quantized.supported_engines
    flags = cpu_features()["flags"]
    if (flags["amx_int8"] or flags["avx512_vnni"]) and "onednn" in engines:
        return "onednn"
    return torch.backends.quantized.engine


def full_range() -> bool:
    """True where u8 x s8 pairs are summed in int32 (VNNI, AMX): inputs may use all 8 bits. AVX2's
    ``vpmaddubsw`` sums pairs in saturating int16, so there inputs get 7 bits (``reduce_range``); the
    8th bit lifts MiniLM's minimum cosine from 0.92 to 0.98."""
    flags = cpu_features()["flags"]
    return flags["avx512_vnni"] or flags["amx_int8"] or flags["avx_vnni"]


def weight_scales(weight: Tensor) -> Tensor:
    """``s_W [d_out] = max_j |W_ij| / 127`` (float32) of ``weight [d_out, d_in]``."""
    return weight.detach().float().abs().amax(dim=1).clamp_min(1e-12) / 127.0


FLOAT32_MAX = float(torch.finfo(torch.float32).max)


def quantize_input(x: Tensor) -> tuple[Tensor, float, int]:
    """``x [N, d]`` (cast to float32) -> ``(q_x [N, d] uint8, s_x, z_x)`` over ``[min(x, 0), max(x, 0)]``
    with all 8 bits (a CPU that sums u8 x s8 in int32); a scale whose inverse overflows float32 (all
    zeros, or values near 1e-39) becomes 0.1, as in PyTorch's own dynamic quantisation."""
    if not x.numel():
        raise ValueError("int8 linear: an empty input has no int8 scale")
    x = x if x.dtype == torch.float32 else x.float()  # the quantiser takes float32
    low, high = (float(v) for v in torch.aminmax(x))
    low, high = min(low, 0.0), max(high, 0.0)
    if not math.isfinite(high - low):
        raise ValueError("int8 linear: its input holds inf or NaN, which has no int8 scale")
    scale = (high - low) / 255.0
    if scale == 0 or 1.0 / scale > FLOAT32_MAX:  # as PyTorch's choose_qparams: 1/s must be a float32
        scale = 0.1
    zero = min(255, max(0, round(-low / scale)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch >= 2.10 flags quantised tensors as deprecated
        q = torch.quantize_per_tensor(x, scale, zero, torch.quint8)  # [N, d] quint8
    # the same bytes seen as uint8 (int_repr() would copy them: 2.5x the cost of this function)
    u8 = torch.empty(0, dtype=torch.uint8, device=x.device)
    return u8.set_(q.untyped_storage(), q.storage_offset(), q.shape, q.stride()), scale, zero


def _onednn(weight: Tensor, bias: Tensor | None, act: str | None) -> Linear:
    """oneDNN's qlinear with the activation and the residual sum inside the kernel (module doc)."""
    scale = weight_scales(weight)  # [d_out]
    qweight = torch.round(weight.detach().float() / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    packed = torch.ops.onednn.qlinear_prepack(qweight, None)  # oneDNN's blocked layout
    zeros = torch.zeros(weight.shape[0], dtype=torch.long)  # [d_out]: symmetric weights
    b = None if bias is None else bias.detach().float()  # [d_out]
    post, algorithm = FUSED.get(act, ("none", "")) if act else ("none", "")
    unfused = ACTIVATIONS[act] if act and act not in FUSED else None
    qlinear = torch.ops.onednn.qlinear_pointwise
    d_out = weight.shape[0]

    def linear(x: Tensor, residual: Tensor | None = None) -> Tensor:
        """``act(x W^T + b)``, or ``x W^T + b + residual`` written into ``residual`` (contiguous
        float32 ``[N, d_out]``) and returned: ``x [N, d_in]`` -> ``[N, d_out]`` float32."""
        if residual is not None and act:
            raise ValueError("an int8 linear adds a residual only without an activation")
        if not x.shape[0]:  # no row: no scale to choose
            y = x.new_zeros(0, d_out)
            return y if residual is None else y + residual
        args = (*quantize_input(x), packed, scale, zeros)  # q_x, s_x, z_x, q_W, s_W, z_W
        if residual is None:  # float32 out (output scale 1, zero point 0), the activation as a post-op
            y = qlinear(*args, b, 1.0, 0, torch.float32, post, [], algorithm)
            return unfused(y) if unfused else y
        # oneDNN's "sum" post-op accumulates into the residual's own memory: no new [N, d_out] buffer
        # (6-7% of an int8 MiniLM corpus against the "add" post-op, which writes a fresh one)
        return qlinear.binary(*args, residual, b, 1.0, 0, torch.float32, 1.0, 0, "sum", 1.0, "none", [], "")

    return linear


@contextlib.contextmanager
def _engine(name: str):
    """Pack under quantised engine ``name``; the packed weights keep it, the global setting is restored."""
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = before


def _dynamic(weight: Tensor, bias: Tensor | None, act: str | None, engine: str) -> Linear:
    """``quantized::linear_dynamic`` packed for ``engine`` (it quantises its input inside)."""
    scale = weight_scales(weight).double()  # [d_out]
    zero = torch.zeros(weight.shape[0], dtype=torch.long)
    with warnings.catch_warnings(), _engine(engine):
        warnings.simplefilter("ignore", UserWarning)  # flagged deprecated; still the kernel
        qweight = torch.quantize_per_channel(weight.detach().float(), scale, zero, 0, torch.qint8)
        packed = torch.ops.quantized.linear_prepack(qweight, None if bias is None else bias.detach().float())
    reduce_range = not full_range()
    fn = ACTIVATIONS[act] if act else None

    def linear(x: Tensor, residual: Tensor | None = None) -> Tensor:
        """``act(x W^T + b)`` (+ ``residual``): ``x [N, d_in]`` -> ``[N, d_out]`` float32."""
        y = torch.ops.quantized.linear_dynamic(x, packed, reduce_range)  # [N, d_out]
        y = fn(y) if fn else y
        return y if residual is None else y + residual

    return linear


KERNELS = ("onednn qlinear", "fbgemm", "onednn linear_dynamic")
ENV = "ATTNLAB_INT8_KERNEL"  # overrides the choice, to compare kernels (benchmarks/bench_embed.py)


def _qlinear() -> bool:
    """True when this PyTorch has oneDNN's quantised engine and ``onednn::qlinear_pointwise``."""
    return "onednn" in torch.backends.quantized.supported_engines and hasattr(
        torch.ops.onednn, "qlinear_pointwise"
    )


def check_kernel(kernel: str, source: str = "kernel") -> str:
    """``kernel`` if it is one of :data:`KERNELS` and can be right on this CPU and this PyTorch, else a
    one-line ``ValueError`` naming ``source`` (the argument or variable that chose it) and what is
    missing: oneDNN's quantised engine, its qlinear kernel, or (for ``onednn qlinear``, which takes
    full 8-bit inputs) a CPU feature that sums u8 x s8 pairs in int32 (:func:`full_range`; capped
    features count as missing, :func:`attnlab.models.cpu.cpu_features`)."""
    if kernel not in KERNELS:
        raise ValueError(f"{source} must be one of {', '.join(KERNELS)}; got {kernel!r}")
    if "onednn" in kernel and "onednn" not in torch.backends.quantized.supported_engines:
        raise ValueError(f"{source}={kernel!r}: this PyTorch has no oneDNN quantised engine")
    if kernel == "onednn qlinear" and not _qlinear():
        raise ValueError(f"{source}={kernel!r}: this PyTorch has no onednn::qlinear_pointwise")
    if kernel == "onednn qlinear" and not full_range():
        raise ValueError(
            f"{source}={kernel!r} needs a CPU that sums u8 x s8 in int32 (avx512_vnni, avx_vnni or "
            "amx_int8), which this one lacks: without them the sums saturate in int16"
        )
    return kernel


def int8_kernel() -> str:
    """The kernel :func:`int8_linear` uses here: ``onednn qlinear`` on a CPU with AVX-512 VNNI or
    AMX-INT8 (:func:`int8_engine`) where this PyTorch has it; ``onednn linear_dynamic`` on such a
    CPU without it; else ``fbgemm``. ``ATTNLAB_INT8_KERNEL`` (one of :data:`KERNELS`) overrides it,
    checked as the argument is (:func:`check_kernel`)."""
    chosen = os.environ.get(ENV)
    if chosen:
        return check_kernel(chosen, ENV)
    if int8_engine() == "onednn":
        return "onednn qlinear" if _qlinear() else "onednn linear_dynamic"
    return "fbgemm"


def int8_linear(
    weight: Tensor, bias: Tensor | None, act: str | None = None, kernel: str | None = None
) -> Linear:
    """``act(x W^T + b)`` in int8 (module doc) for ``weight [d_out, d_in]``, ``bias [d_out]``:
    ``linear(x [N, d_in], residual=None) -> [N, d_out]`` float32 (with a residual, the sum may be
    written into it: pass one you no longer need). ``kernel``: one of :data:`KERNELS`
    (default :func:`int8_kernel`; a benchmark compares them)."""
    if weight.device.type != "cpu":
        raise ValueError(
            f"int8 runs PyTorch's CPU quantised kernels; the model is on {weight.device} (use float32 or "
            "bfloat16 there)"
        )
    kernel = int8_kernel() if kernel is None else check_kernel(kernel)
    if kernel == "onednn qlinear":
        return _onednn(weight, bias, act)
    if kernel == "onednn linear_dynamic":
        return _dynamic(weight, bias, act, "onednn")
    return _dynamic(
        weight, bias, act, "x86" if "x86" in torch.backends.quantized.supported_engines else "fbgemm"
    )
