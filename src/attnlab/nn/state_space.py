"""A selective state-space layer that can stand where attention stands in a block (``attention="ssm"``).

Mamba's mixer (Gu & Dao 2023) in its simplest readable form, over ``d = d_model`` channels with a
state of ``n = state_size`` numbers per channel::

    u, g   = x W_in                                   (the scan's input and the gate)
    u      = SiLU(causal depthwise conv_K(u))         (K = 4 taps: the token and the 3 before it)
    delta  = softplus(u W_delta + b_delta) > 0        (the selective step size, one per channel)
    B, C   = u W_B, u W_C                             (input-dependent, [B, T, n] each)
    h_t    = exp(delta_t A) h_{t-1} + delta_t B_t u_t,  y_t = C_t . h_t + D u_t    (A = -exp(A_log) < 0)
    out    = (y * SiLU(g)) W_out

The scan is :func:`attnlab.nn.selective_scan` (chunked, parallel); generation carries
``(conv tail [B, K-1, d], h [B, d, n])`` in a :class:`SSMState`: O(1) memory per token, and the
tokens generated step by step equal the full forward (tested). The layer is causal by
construction: there is no mask to pass and no attention weights to return.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.nn.config import BlockConfig
from attnlab.nn.hooks import HookPoints
from attnlab.nn.linear import selective_scan

CONV_TAPS = 4  # Mamba's d_conv


class SSMState:
    """Generation state of one :class:`SelectiveSSM`: ``conv [B, K-1, d]`` (the last K-1 inputs of
    the convolution) and ``h [B, d, n]``; ``length`` counts the positions consumed."""

    static = False

    def __init__(self):
        self.conv: torch.Tensor | None = None
        self.h: torch.Tensor | None = None
        self.length = 0

    @property
    def nbytes(self) -> int:
        """Bytes held: constant in the number of positions."""
        return sum(t.numel() * t.element_size() for t in (self.conv, self.h) if t is not None)

    def reorder(self, index: torch.Tensor) -> SSMState:
        """Keep batch rows ``index [B']`` (beam search); in place, returns ``self``."""
        if self.h is not None:
            self.conv, self.h = self.conv.index_select(0, index), self.h.index_select(0, index)
        return self


class SelectiveSSM(HookPoints, nn.Module):
    """The selective state-space mixer (module docstring), called like
    :class:`~attnlab.nn.MultiHeadAttention`: ``forward(x [B, T, d_model], cache=...) -> (out, None)``.

    From the config: ``d_model`` (d), ``state_size`` (n), ``qkv_bias`` (on ``in_proj``) and
    ``out_bias``. Submodules ``in_proj [d -> 2d]``, ``dt_proj [d -> d]`` (no bias; ``dt_bias [d]``
    is its own parameter so a model's weight initialisation leaves Mamba's step-size range alone),
    ``bc_proj [d -> 2n]``, ``out_proj [d -> d]``; parameters ``conv_weight [d, K]``, ``conv_bias [d]``,
    ``A_log [d, n]``, ``D [d]``.
    """

    POINTS = {
        "x_q": "[B, T, d_model]",  # the input
        "u": "[B, T, d_model]",  # SiLU(conv(x W_in)): what the scan reads
        "delta": "[B, T, d_model]",  # the step sizes, > 0
        "y": "[B, T, d_model]",  # the scan's output C . h + D u, before the gate
        "out": "[B, T, d_model]",  # (y * SiLU(g)) W_out
    }

    def __init__(self, config: BlockConfig):
        super().__init__()
        if not isinstance(config, BlockConfig):
            raise ValueError(f"SelectiveSSM needs a BlockConfig, got {type(config).__name__}")
        c = self.config = config
        d, n = c.d_model, c.state_size
        self.d_model, self.state_size = d, n
        self.in_proj = nn.Linear(d, 2 * d, bias=c.qkv_bias)
        self.conv_weight = nn.Parameter(torch.empty(d, CONV_TAPS).uniform_(-0.5, 0.5))
        self.conv_bias = nn.Parameter(torch.zeros(d))
        self.dt_proj = nn.Linear(d, d, bias=False)
        # Mamba's initialisation: softplus(dt_bias) log-uniform in [1e-3, 1e-1]
        dt = torch.exp(torch.empty(d).uniform_(math.log(1e-3), math.log(1e-1)))  # [d]
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)
        self.bc_proj = nn.Linear(d, 2 * n, bias=False)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, n + 1, dtype=torch.float32)).repeat(d, 1))
        self.D = nn.Parameter(torch.ones(d))
        self.out_proj = nn.Linear(d, d, bias=c.out_bias)

    def forward(
        self,
        x_q: torch.Tensor,
        x_kv: torch.Tensor | None = None,
        *,
        mask: torch.Tensor | None = None,
        is_causal: bool = True,
        need_weights: bool = False,
        cache: SSMState | None = None,
        empty_rows: str = "error",
    ):
        """``x_q [B, T, d_model]`` -> ``(out [B, T, d_model], None)``, continuing ``cache`` if given.

        The other arguments exist so the layer stands where attention does; it refuses what it
        cannot do: ``x_kv`` (cross-attention), ``mask``, ``is_causal=False``, ``need_weights``
        (``empty_rows`` has nothing to act on: without a mask no position is left with nothing).
        """
        self._check(x_q, x_kv, mask, is_causal, need_weights, cache)
        x = self._at("x_q", x_q)
        b, t, d = x.shape
        u, gate = self.in_proj(x).chunk(2, dim=-1)  # [B, T, d] each
        tail = None if cache is None else cache.conv
        if tail is None:
            tail = u.new_zeros(b, CONV_TAPS - 1, d)  # [B, K-1, d]: zeros before position 0
        padded = torch.cat([tail, u], dim=1)  # [B, K-1+T, d]
        conv = F.conv1d(
            padded.transpose(1, 2),  # [B, d, K-1+T]
            self.conv_weight.to(u.dtype)[:, None, :],  # [d, 1, K]: one filter per channel
            self.conv_bias.to(u.dtype),
            groups=d,
        ).transpose(1, 2)  # [B, T, d]
        u = self._at("u", F.silu(conv))
        # softplus > 0, but it rounds to 0 below about -104 in float32: keep the step size positive
        delta = F.softplus(self.dt_proj(u) + self.dt_bias).clamp_min(torch.finfo(u.dtype).tiny)
        delta = self._at("delta", delta)  # [B, T, d], > 0
        bs, cs = self.bc_proj(u).chunk(2, dim=-1)  # [B, T, n] each
        a = -torch.exp(self.A_log).to(u.dtype)  # [d, n], < 0
        h0 = None if cache is None else cache.h
        y, h = selective_scan(u, delta, a, bs, cs, self.D.to(u.dtype), state=h0, return_state=True)
        if cache is not None:
            cache.conv, cache.h = padded[:, -(CONV_TAPS - 1) :], h  # [B, K-1, d], [B, d, n]
            cache.length += t
        y = self._at("y", y)  # [B, T, d]
        return self._at("out", self.out_proj(y * F.silu(gate))), None

    def _check(self, x_q, x_kv, mask, is_causal, need_weights, cache) -> None:
        if x_q.ndim != 3 or x_q.shape[-1] != self.d_model:
            raise ValueError(f"x_q must be [B, T, d_model={self.d_model}], got {list(x_q.shape)}")
        if x_kv is not None and x_kv is not x_q:
            raise ValueError("attention='ssm' is a recurrence over one sequence: it takes no x_kv")
        if mask is not None:
            raise ValueError(
                f"attention='ssm' takes no mask (every earlier token enters its state), got mask "
                f"{list(mask.shape)}; pass no padding mask (pad on the left) or use an attention kind"
            )
        if not is_causal:
            raise ValueError("attention='ssm' is causal by construction: call it with is_causal=True")
        if need_weights:
            raise ValueError("attention='ssm' has no attention weights to return (need_weights)")
        if cache is not None and not isinstance(cache, SSMState):
            raise ValueError(f"attention='ssm' keeps an SSMState, got cache {type(cache).__name__}")
        if cache is not None and cache.h is not None and cache.h.shape[0] != x_q.shape[0]:
            raise ValueError(f"cache holds batch {cache.h.shape[0]} but x_q has batch {x_q.shape[0]}")
