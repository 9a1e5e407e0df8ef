"""The linear layers of a training step on oneDNN's GEMM, on the CPUs where it is the faster kernel.

PyTorch runs a float32 ``F.linear`` and the two products of its backward on MKL's sgemm. MKL picks
its own code path, and on some CPUs with AVX-512 (AMD's) it takes its AVX2 one; oneDNN (in every
PyTorch build, through ``torch.ops.mkldnn._linear_pointwise``) uses the AVX-512 units wherever they
are. Measured on an AMD Zen 5, one thread, the shapes of the nanoGPT Shakespeare model (768 rows,
widths 128 to 512), in GFLOP/s:

    =============  =========  =========
    product        MKL        oneDNN
    =============  =========  =========
    Y = X W^T + b  62 - 75    102 - 166
    dX = dY W      72 - 77    150 - 152
    dW = dY^T X    70 - 75    92 - 151
    =============  =========  =========

:func:`onednn_linears` is a context manager under which every float32 CPU ``F.linear`` (so every
``nn.Linear``, and the fused Q/K/V projection) of a forward pass runs as :class:`OneDNNLinear`:

    forward    Y = X W^T + b      X [N, d_in], W [d_out, d_in], b [d_out] -> Y [N, d_out]
    backward   dX = dY W          W read as a transposed view (no copy)
               dW = dY^T X        the smaller of d_out, d_in as the result's rows (oneDNN's faster way)
               db = sum_n dY

It is the same float32 arithmetic as ``F.linear``; only the order of the sums differs (the last bits
differ, as between any two BLAS libraries), so a run is exactly reproducible on one machine.
:func:`gemm_choice` decides by what each library runs on, never by the CPU's maker: oneDNN where the
CPU offers oneDNN AVX-512 (after its cap, :func:`attnlab.models.cpu.cpu_features`) and MKL reports a
narrower path (:func:`attnlab.models.cpu.mkl_isa`); MKL's own sgemm where both run on the same
units (an Intel CPU with AVX-512: MKL's is as fast; an AVX2-only CPU: measured on an AMD EPYC with
AVX2 only, training ran at 0.80x nanoGPT with oneDNN's linears against 0.87-0.92x with ATen's).
``ATTNLAB_TRAIN_GEMM=onednn`` or ``aten`` overrides it (to compare the two).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from attnlab.models.cpu import GEMM_ENV as ENV
from attnlab.models.cpu import GEMM_KERNELS as KERNELS
from attnlab.models.cpu import gemm_choice


def _gemm(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``a [M, K] @ b[N, K]^T (+ bias [N]) -> [M, N]`` by oneDNN (``a``, ``b`` may be transposed views)."""
    return torch.ops.mkldnn._linear_pointwise(a, b, bias, "none", [], "")


class OneDNNLinear(torch.autograd.Function):
    """``F.linear(x, weight, bias)`` with its forward and backward products on oneDNN (module doc):
    ``x [..., d_in]``, ``weight [d_out, d_in]``, ``bias [d_out]`` or None -> ``[..., d_out]``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])  # [N, d_in]
        ctx.save_for_backward(rows, weight)
        ctx.has_bias = bias is not None
        return _gemm(rows, weight, bias).view(*x.shape[:-1], weight.shape[0])  # [..., d_out]

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        rows, weight = ctx.saved_tensors  # [N, d_in], [d_out, d_in]
        dy = grad.reshape(-1, grad.shape[-1])  # [N, d_out]
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = _gemm(dy, weight.t()).view(*grad.shape[:-1], weight.shape[1])  # dY W: [..., d_in]
        if ctx.needs_input_grad[1]:
            if weight.shape[0] > weight.shape[1]:  # (X^T dY)^T: d_in rows
                dw = _gemm(rows.t(), dy.t()).t()  # [d_out, d_in]
            else:
                dw = _gemm(dy.t(), rows.t())  # dY^T X: [d_out, d_in]
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = dy.sum(0)  # [d_out]
        return dx, dw, db


class _Linears(TorchFunctionMode):
    """Routes float32 CPU ``F.linear`` calls to :class:`OneDNNLinear`; every other call as it is."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if _fits(x, weight, bias):
                return OneDNNLinear.apply(x, weight, bias)
        return func(*args, **kwargs)


def _fits(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Whether oneDNN takes this product: float32 CPU tensors, ``x`` at least 2-D, ``weight`` 2-D."""
    tensors = (x, weight) if bias is None else (x, weight, bias)
    return (
        x.dim() >= 2
        and weight.dim() == 2
        and x.numel() > 0
        and all(t.dtype == torch.float32 and t.device.type == "cpu" for t in tensors)
    )


__all__ = ["ENV", "KERNELS", "OneDNNLinear", "gemm_choice", "onednn_linears", "use_onednn"]


def use_onednn() -> bool:
    """Whether training runs its linear layers on oneDNN here (:func:`gemm_choice`)."""
    return gemm_choice()[0] == "onednn"


@contextlib.contextmanager
def onednn_linears(enabled: bool = True) -> Iterator[None]:
    """Within the block, float32 CPU ``F.linear`` calls run as :class:`OneDNNLinear` (``enabled``;
    otherwise the block runs as it is)."""
    if not enabled:
        yield
        return
    with _Linears():
        yield
