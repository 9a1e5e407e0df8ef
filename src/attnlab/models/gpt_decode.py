"""The decoding engine of a GPT: one generation step with its weights laid out for the step's shape.

A decoding step at batch 1 multiplies one row by every weight matrix of the model: it reads each
weight once and does two FLOPs per weight, so it runs at the speed of memory, not of arithmetic,
and the layout of the weights decides that speed. ``nn.Linear`` computes ``x W^T`` with ``W``
stored ``[d_out, d_in]``; for one row MKL takes its transposed-matrix GEMV, which on an AMD Zen 5
ran at half the memory bandwidth of the same product with ``W^T`` stored ``[d_in, d_out]``
(GPT-2's 50,257 x 384 head: 5.6 ms against 2.8 ms, one thread). Several rows (batch 8, a prompt)
are a small GEMM, where oneDNN's prepacked kernel (bias and activation fused) is 2-3x MKL's.
:class:`DecodeEngine` keeps one copy of the weights in the layout its batch size wants (built on
first use, rebuilt when a generation starts after a parameter changed) and runs the step as a short
list of kernels:

    x_0 = E[ids] + P[t]                       (the model's own embedding, :meth:`GPT._hidden_in`)
    per block:  [Q|K|V] = N_1(x) W_qkv + b,   K, V -> slot t of a :class:`~attnlab.nn.StaticKVCache`
                x += softmax(Q K^T / sqrt(d_k)) V W^O + b^O          (RoPE on Q, K when configured)
                x += FFN(N_2(x))                                      (MLP, or GLU with [W_1|W_3] fused)
    logits = N_f(x_T) W_out

— the same equations as the layers' ``forward`` (a test checks the logits agree to float
rounding and the greedy tokens exactly), without their per-call checks and hook points. With
``dtype="bfloat16"`` the weights are cast once and the GEMMs run in bfloat16 (AVX-512 BF16 or AMX),
the residual stream, norms, RoPE, attention and the KV cache in float32. ``compile=True`` wraps the
step in ``torch.compile`` (optional; see :mod:`attnlab.models.gpt_compile`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab._checks import choice
from attnlab.models.gpt_compile import compiled_step
from attnlab.models.gpt_step import forward_step
from attnlab.models.precision import packed_linear
from attnlab.nn.hooks import HookPoints
from attnlab.nn.layers import ACTIVATIONS, RMSNorm
from attnlab.nn.multihead import MultiHeadAttention
from attnlab.nn.positions import rope_cos_sin

Linear = Callable[[Tensor], Tensor]
LAYOUTS = ("auto", "gemv", "packed", "linear")
DTYPES = ("model", "bfloat16")


def _gemv(weight: Tensor, bias: Tensor | None, act: str | None) -> Linear:
    """``act(x W^T + b)`` for few rows: ``W^T [d_in, d_out]`` stored contiguous (one copy), so that
    BLAS streams it row after row (``addmm``); ``x [N, d_in] -> [N, d_out]``."""
    wt = weight.detach().t().contiguous()  # [d_in, d_out]
    b = None if bias is None else bias.detach()
    fn = ACTIVATIONS[act] if act else None

    def linear(x: Tensor) -> Tensor:
        y = torch.mm(x, wt) if b is None else torch.addmm(b, x, wt)  # [N, d_out]
        return fn(y) if fn else y

    return linear


def _module_linear(weight: Tensor, bias: Tensor | None, act: str | None) -> Linear:
    """``act(F.linear(x, W, b))`` on the model's own tensors (the layers' kernels: the baseline)."""
    fn = ACTIVATIONS[act] if act else None

    def linear(x: Tensor) -> Tensor:
        y = F.linear(x, weight, bias)  # [N, d_out]
        return fn(y) if fn else y

    return linear


def make_linear(weight: Tensor, bias: Tensor | None, act: str | None, layout: str, dtype: str) -> Linear:
    """One projection ``x [N, d_in] -> act(x W^T + b) [N, d_out]`` in ``layout`` (not ``auto``):
    ``gemv`` (``W^T`` contiguous, float32/float64), ``packed`` (oneDNN's blocked layout, bias and
    activation fused; :func:`attnlab.models.precision.packed_linear`) or ``linear`` (``F.linear`` on
    the model's tensors). ``dtype="bfloat16"`` always packs (bfloat16 GEMMs are oneDNN's)."""
    if dtype == "bfloat16":
        return packed_linear(weight.detach(), None if bias is None else bias.detach(), act, torch.bfloat16)
    if layout == "linear":
        return _module_linear(weight, bias, act)
    if layout == "packed" and weight.device.type == "cpu":
        return packed_linear(weight.detach(), None if bias is None else bias.detach(), act, weight.dtype)
    return _gemv(weight, bias, act)


def _norm(module: nn.Module | None) -> Callable[[Tensor], Tensor] | None:
    """The fused norm kernel on ``module``'s own weights, ``[N, d] -> [N, d]``, without the layers'
    overflow rescue (which reads max |x| at every call: see :class:`attnlab.nn.LayerNorm`)."""
    if module is None:
        return None
    shape = tuple(module.normalized_shape)
    if isinstance(module, (RMSNorm, nn.RMSNorm)):
        return functools.partial(F.rms_norm, normalized_shape=shape, weight=module.weight, eps=module.eps)
    return functools.partial(
        F.layer_norm, normalized_shape=shape, weight=module.weight, bias=module.bias, eps=module.eps
    )


@dataclasses.dataclass(frozen=True)
class _Block:
    """One pre-norm block ready for a step: norms, projections (``qkv: [N, d] -> [N, (h + 2 h_kv)
    d_k]``, ``ffn_in`` = act(x W_1 + b_1), or [x W_1 | x W_3] for a GLU), head counts."""

    norm1: Callable
    qkv: Linear
    out: Linear
    norm2: Callable | None
    ffn_in: Linear | None
    ffn_out: Linear | None
    glu: Callable | None  # the GLU's activation on its gate half; None for an MLP
    heads: tuple[int, int, int]  # h, h_kv, d_k


def _block(layer: nn.Module, layout: str, dtype: str) -> _Block:
    attn, ffn = layer.self_attn, layer.ffn
    w, b = attn.qkv_weight()  # [(h + 2 h_kv) d_k, d], [(h + 2 h_kv) d_k]
    make = functools.partial(make_linear, layout=layout, dtype=dtype)
    ffn_in = ffn_out = glu = None
    if ffn is not None:
        ffn_out = make(ffn.linear2.weight, ffn.linear2.bias, None)
        if ffn.linear3 is None:
            ffn_in = make(ffn.linear1.weight, ffn.linear1.bias, ffn.activation)
        else:  # one GEMM for the gate and the linear branch: [W_1 | W_3]
            w13 = torch.cat([ffn.linear1.weight, ffn.linear3.weight]).detach()  # [2 d_ff, d]
            b13 = None if ffn.linear1.bias is None else torch.cat([ffn.linear1.bias, ffn.linear3.bias])
            ffn_in, glu = make(w13, None if b13 is None else b13.detach(), None), ACTIVATIONS[ffn.activation]
    return _Block(
        norm1=_norm(layer.norm1),
        qkv=make(w, b, None),
        out=make(attn.out_proj.weight, attn.out_proj.bias, None),
        norm2=_norm(layer.norm3),
        ffn_in=ffn_in,
        ffn_out=ffn_out,
        glu=glu,
        heads=(attn.num_heads, attn.num_kv_heads, attn.d_k),
    )


def unsupported(gpt) -> str | None:
    """Why ``gpt`` must decode through its layers' own ``forward`` (a sentence), or None when the
    engine can run it: softmax attention on SDPA without a window or ALiBi, eval mode, no
    gradients, and no hook (attnlab's hook points or PyTorch's module hooks) anywhere."""
    c = gpt.config
    if c.attention != "sdpa":
        return f"attention={c.attention!r} (the engine runs the fused SDPA kind)"
    if c.window is not None or c.positions == "alibi":
        return "a sliding window or ALiBi"
    if gpt.training:
        return "the model is in training mode"
    if torch.is_grad_enabled():
        return "gradients are enabled"
    for module in gpt.modules():
        if module.__dict__.get("_hooks") or module._forward_hooks or module._forward_pre_hooks:
            return f"a hook on {type(module).__name__}"
        if isinstance(module, MultiHeadAttention) and module.trace is not None:
            return "a trace on an attention layer"
    return None


def _signature(gpt) -> tuple:
    """What the prepared weights were copied from: every parameter's storage and version counter
    (an optimiser step, ``load_state_dict`` or ``prune_heads`` changes one of them)."""
    return tuple((p.data_ptr(), p._version) for p in gpt.parameters())


class DecodeEngine:
    """Runs :meth:`GPT.start`/:meth:`GPT.step` for one model with prepared weights.

    Args:
        gpt: the :class:`~attnlab.models.GPT` (its parameters stay its own; the engine keeps copies
            in its layouts, compared with the parameters when a generation starts and rebuilt if
            one changed; a change in the middle of a generation is seen at the next one).
        dtype: ``"model"`` (the model's dtype, float32 usually) or ``"bfloat16"`` (GEMMs in
            bfloat16; fast where the CPU has AVX-512 BF16 or AMX).
        layout: ``"auto"`` (``gemv`` for batch 1, ``packed`` otherwise), or one of those, or
            ``"linear"`` (the layers' own ``F.linear``: the baseline a benchmark compares with).
        compile: run the step through ``torch.compile`` (:mod:`attnlab.models.gpt_compile`).
    """

    def __init__(self, gpt, dtype: str = "model", layout: str = "auto", compile: bool = False):
        self.gpt = gpt
        self.dtype = choice("dtype", dtype, DTYPES)
        self.layout = choice("layout", layout, LAYOUTS)
        self.compile = bool(compile)
        if self.compile and (self.dtype != "model" or self.layout == "packed"):
            raise ValueError(
                "compile=True runs the model's dtype on the gemv layout (oneDNN's packed weights "
                "cannot enter a compiled graph)"
            )
        self.compile_seconds: float | None = None  # the first compiled call's time
        self._hookable: tuple = ()
        self._rope_table: tuple | None = None  # ((dtype, device, d_k), (cos, sin) [max_len, d_k/2])
        self._prepared: dict[str, tuple[tuple, list[_Block], Linear, Callable]] = {}

    def layout_for(self, batch: int) -> str:
        """The weight layout a step of ``batch`` rows runs on."""
        if self.layout != "auto":
            return self.layout
        return "gemv" if batch == 1 or self.compile else "packed"

    def blocks(self, batch: int, check: bool = True) -> tuple[list[_Block], Linear, Callable]:
        """The prepared blocks, output head and final norm for ``batch`` rows, built now if missing
        or (``check``: compared with every parameter's storage and version) stale."""
        layout = self.layout_for(batch)
        hit = self._prepared.get(layout)
        if hit is not None and not check:
            return hit[1:]
        sig = _signature(self.gpt)
        if hit is None or hit[0] != sig:
            with torch.no_grad():
                blocks = [_block(layer, layout, self.dtype) for layer in self.gpt.blocks]
                head = make_linear(self.gpt.lm_head.weight, None, None, layout, self.dtype)
            self._prepared = {k: v for k, v in self._prepared.items() if v[0] == sig}  # drop stale
            hit = self._prepared[layout] = (sig, blocks, head, _norm(self.gpt.norm))
            self._hookable = tuple(m for m in self.gpt.modules() if isinstance(m, HookPoints))
        return hit[1:]

    def hooked(self) -> bool:
        """Whether a step must take the layers' path after all: gradients on, training mode, or an
        attnlab hook (``capture``, ``patch``, a trace) on any of the model's hook-point modules.
        Cheap enough for every step; :func:`unsupported` (at ``start``) checks everything."""
        if torch.is_grad_enabled() or self.gpt.training:
            return True
        return any(m.__dict__.get("_hooks") for m in self._hookable)

    def rope(self, offset: int, t: int) -> tuple[Tensor, Tensor] | None:
        """cos, sin ``[t, d_k/2]`` of positions ``offset .. offset + t - 1`` (None without RoPE):
        :func:`attnlab.nn.rope_cos_sin`, as the attention layers call it. Without ``rope_scaling``
        the angles of a position do not depend on the others, so one table of every position
        (the same elementwise float64 arithmetic) is sliced instead of recomputed at each step."""
        c = self.gpt.config
        if c.positions != "rope":
            return None
        weight = self.gpt.lm_head.weight
        dtype = weight.dtype if self.dtype == "model" else torch.float32
        d_k = self.gpt.blocks[0].self_attn.d_k
        if c.rope_scaling is not None:  # dynamic NTK's angles depend on the current length
            positions = torch.arange(offset, offset + t, device=weight.device)  # [t]
            return rope_cos_sin(positions, d_k, c.rope_base, dtype, scaling=c.rope_scaling)
        key = (dtype, weight.device, d_k)
        if self._rope_table is None or self._rope_table[0] != key:
            positions = torch.arange(c.max_len, device=weight.device)  # [max_len]
            self._rope_table = (key, rope_cos_sin(positions, d_k, c.rope_base, dtype))  # [max_len, d_k/2] x2
        cos, sin = self._rope_table[1]
        return cos[offset : offset + t], sin[offset : offset + t]

    def run(self, ids: Tensor, state) -> Tensor:
        """Feed ``ids [B, T]`` at positions ``state.length ..`` (T = 1, or the prompt into empty
        caches): append their keys and values, return the last position's logits ``[B, V]``."""
        # the weights are checked when a generation starts (a prompt into empty caches), not at
        # every step: reading every parameter's version costs more than a small model's step
        prepared = self.blocks(ids.shape[0], check=state.length == 0)
        rope = self.rope(state.length, ids.shape[1])
        if self.compile:
            return compiled_step(self, ids, state, prepared, rope)
        return forward_step(self.gpt, ids, state, prepared, rope)
