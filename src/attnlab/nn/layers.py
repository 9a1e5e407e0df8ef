"""The position-wise FFN, encoder and decoder layers, and stacks of them, as a BlockConfig says.

Post-norm (the original paper):  U = Norm_1(X + MHA(X)),        Y = Norm_2(U + FFN(U)).
Pre-norm (GPT, Llama):           U = X + MHA(Norm_1(X)),        Y = U + FFN(Norm_2(U)).
Norm is LayerNorm or RMSNorm (``config.norm``); the FFN is an MLP, a GLU (SwiGLU = glu + silu) or
absent (``ffn="none"``: an attention-only block, ``Y = U``). The decoder layer adds
cross-attention over the encoder memory between the two (``norm2``); its FFN's norm is always
``norm3``. Dropout sits where ``nn.TransformerEncoderLayer`` puts it: on the attention weights, on
each residual branch, and inside the FFN after the activation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnlab._checks import positive_float
from attnlab.nn.config import BlockConfig
from attnlab.nn.hooks import HookPoints
from attnlab.nn.linear import LinearAttentionState
from attnlab.nn.multihead import KVCache, MultiHeadAttention
from attnlab.nn.rolling_cache import RollingKVCache
from attnlab.nn.state_space import SelectiveSSM, SSMState

ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
}


def _check_config(owner: str, config) -> BlockConfig:
    if not isinstance(config, BlockConfig):
        raise ValueError(f"{owner} needs a BlockConfig, got {type(config).__name__}")
    return config


# Rows whose max |x| reaches 2^32 (2^100 in float64) go to the fused kernels divided by a power of
# two that brings that max to [2^32, 2^33) (2^100..2^101): exact, the sum of squares cannot overflow
# (float32: d * 2^66 < 2^128), and eps stays below the rounding of the variance (>= ulp(2^32)^2 / d).
_BIG_EXP = {torch.float64: 100}


def _tame(x: torch.Tensor, centre: bool) -> torch.Tensor:
    """``x [..., d]`` with each row beyond 2^32 divided by a power of two as above (a constant one
    times 0 when ``centre``: its LayerNorm is beta whatever its size); every other row is ``x`` times 1,
    bit for bit. Decided per row on the device: no host sync (the twin of
    :func:`attnlab.ref.layers._row_scale`, whose eps / s^2 the fused kernel cannot take)."""
    if x.numel() == 0:
        return x
    e = _BIG_EXP.get(x.dtype, 32)
    low, high = torch.aminmax(x.detach(), dim=-1, keepdim=True)  # [..., 1] x2, one pass
    m = torch.maximum(-low, high).to(torch.promote_types(x.dtype, torch.float32))  # max |x| per row
    big = (m >= 2.0**e) & (m < float("inf"))  # [..., 1]; NaN and inf rows are left to the kernel
    factor = torch.where(big, torch.exp2(e - torch.floor(torch.log2(m))), 1.0)  # [..., 1]
    if centre:
        factor = torch.where(big & (low == high), 0.0, factor)  # x - mu = 0: the normalised row is 0
    return x * factor.to(x.dtype)


def _scaled_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x / s, s)`` with ``s [..., 1]`` a power of two near each row's ``max |x|`` (dividing by it
    is exact), never below 1; half precision is widened to float32 first. The twin of
    :func:`attnlab.ref.layers._row_scale`."""
    xs = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    m = xs.abs().amax(dim=-1, keepdim=True)  # [..., 1]
    s = torch.exp2(torch.floor(torch.log2(m.clamp(min=1.0))))  # [..., 1]
    return xs / s, s


def _check_eps(owner: str, eps) -> float:

    return positive_float(f"{owner}.eps", eps)


# The norms' one hook point: the factor each row is multiplied by, 1/sigma (LayerNorm) or 1/RMS
# (RMSNorm), so an analysis can hold it fixed ("frozen"): N(x) = (x - mu) * scale * g + b is then
# linear in x. (TransformerLens's hook_scale is sigma itself, the reciprocal.)
NORM_POINTS = {"scale": "[B, T, 1]"}


def _constant_rows(x: torch.Tensor) -> torch.Tensor:
    """``[..., 1]`` bool: the rows of ``x [..., d]`` whose entries are all equal (centred, they are 0)."""
    return x.amax(dim=-1, keepdim=True) == x.amin(dim=-1, keepdim=True)


def _scale_hooked(norm, x: torch.Tensor, centre: bool) -> torch.Tensor:
    """The norm written out so that its ``scale`` point can be read or replaced: ``x [..., d]`` ->
    ``(x - mu) * scale * g (+ b)`` with ``scale = 1 / sqrt(var + eps)`` (``mu = 0``, mean of squares
    for RMS), rows beyond 2^32 rescaled exactly as in the fused path."""
    xs, s = _scaled_rows(x)  # [..., d], [..., 1]
    if centre:
        xs = xs - xs.mean(dim=-1, keepdim=True)  # [..., d]
    scale = torch.rsqrt(xs.pow(2).mean(dim=-1, keepdim=True) + norm.eps / (s * s)) / s  # [..., 1]
    scale = norm._at("scale", scale.to(x.dtype))
    y = (xs * s).to(x.dtype) * scale  # [..., d]
    if centre:
        y = torch.where(_constant_rows(x), 0.0, y)  # a huge constant row: 0 * inf -> the 0 it is
    if norm.weight is not None:
        y = y * norm.weight
    return y if getattr(norm, "bias", None) is None else y + norm.bias


class RMSNorm(HookPoints, nn.RMSNorm):
    """RMSNorm(x) = x / sqrt(mean(x^2) + eps) * g over the last axis, ``[..., d] -> [..., d]`` (Zhang &
    Sennrich 2019: no mean subtraction, no bias; Llama's norm). PyTorch's ``nn.RMSNorm`` with its
    gain ``weight [d]``; the twin of :func:`attnlab.ref.rms_norm`. ``eps`` must be a finite number
    > 0. Inputs beyond 2^32 are normalised as ``x/s / sqrt(mean((x/s)^2) + eps/s^2)`` with ``s`` a
    power of two per row (exact), so 1e30 gives the same numbers as 1 (the fused kernel gives 0).
    Hook point ``scale [B, T, 1]``: 1 / sqrt(mean(x^2) + eps) (the fused kernel runs unless hooked)."""

    POINTS = NORM_POINTS

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__(d, eps=_check_eps("RMSNorm", eps))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [..., d] -> [..., d]``."""
        if self._hooks is not None:
            return _scale_hooked(self, x, centre=False)
        return super().forward(_tame(x, centre=False))  # huge rows scaled exactly: no overflow


class LayerNorm(HookPoints, nn.LayerNorm):
    """LN(x) = (x - mu) / sqrt(var + eps) * g + b over the last axis, ``[..., d] -> [..., d]``:
    PyTorch's ``nn.LayerNorm`` (``eps`` a finite number > 0), with inputs beyond 2^32 normalised
    on ``x / s`` per row as :class:`RMSNorm` does (the twin of :func:`attnlab.ref.layer_norm`).
    Hook point ``scale [B, T, 1]``: 1 / sqrt(var + eps) (the fused kernel runs unless hooked)."""

    POINTS = NORM_POINTS

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True):
        super().__init__(d, eps=_check_eps("LayerNorm", eps), bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [..., d] -> [..., d]``."""
        if self._hooks is not None:
            return _scale_hooked(self, x, centre=True)
        return super().forward(_tame(x, centre=True))  # huge rows scaled exactly: no overflow


def make_norm(config: BlockConfig, d: int | None = None) -> nn.Module:
    """The block's norm over ``[..., d]`` (``d`` default ``d_model``): :class:`LayerNorm` or :class:`RMSNorm`
    with ``config.norm_eps``."""
    d = config.d_model if d is None else d
    if config.norm == "rms":
        return RMSNorm(d, eps=config.norm_eps)
    return LayerNorm(d, eps=config.norm_eps)


class FeedForward(HookPoints, nn.Module):
    """The position-wise FFN of a block, ``[..., d_model] -> [..., d_model]``:

    mlp: FFN(x) = act(x W_1 + b_1) W_2 + b_2;   glu: FFN(x) = (act(x W_1) * x W_3) W_2
    (SwiGLU with ``activation="silu"``, GeGLU with ``"gelu"``; Shazeer 2020).

    From the config: ``d_model``, ``d_ff``, ``ffn`` (``mlp`` | ``glu``), ``activation``,
    ``ffn_bias``, ``dropout`` (after the activation, training only). Submodules
    ``linear1 [d_model -> d_ff]``, ``linear2 [d_ff -> d_model]`` and, for glu, ``linear3
    [d_model -> d_ff]`` (Llama's w1, w2, w3: Hugging Face's gate_proj, down_proj, up_proj).
    Hook points: ``hidden`` and ``out``.
    """

    POINTS = {
        "hidden": "[B, T, d_ff]",  # act(x W_1), times x W_3 for a GLU: what W_2 reads
        "out": "[B, T, d_model]",  # FFN(x)
    }

    def __init__(self, config: BlockConfig):
        super().__init__()
        c = _check_config("FeedForward", config)
        if c.ffn == "none":
            raise ValueError("FeedForward: config.ffn is 'none' (an attention-only block has no FFN)")
        self.config, self.activation = c, c.activation
        self.linear1 = nn.Linear(c.d_model, c.d_ff, bias=c.ffn_bias)
        self.linear3 = nn.Linear(c.d_model, c.d_ff, bias=c.ffn_bias) if c.ffn == "glu" else None
        self.linear2 = nn.Linear(c.d_ff, c.d_model, bias=c.ffn_bias)
        self.dropout = nn.Dropout(c.dropout)
        self._act = ACTIVATIONS[c.activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [..., d_model] -> [..., d_model]`` (hidden ``[..., d_ff]``), each position on its own."""
        if x.shape[-1] != self.linear1.in_features:
            raise ValueError(f"x must be [..., d_model={self.linear1.in_features}], got {list(x.shape)}")
        hidden = self._act(self.linear1(x))  # [..., d_ff]
        if self.linear3 is not None:
            hidden = hidden * self.linear3(x)  # [..., d_ff]: the gate times the linear branch
        hidden = self._at("hidden", hidden)
        return self._at("out", self.linear2(self.dropout(hidden)))  # [..., d_model]


def make_mixer(config: BlockConfig) -> nn.Module:
    """The self-attention sub-block a config asks for: :class:`~attnlab.nn.SelectiveSSM` for
    ``attention="ssm"``, else :class:`MultiHeadAttention` (every softmax kind, block-sparse, linear).
    Both map ``x [B, T, d_model]`` to ``(out [B, T, d_model], weights or None)``."""
    if config.attention == "ssm":
        return SelectiveSSM(config)
    return MultiHeadAttention(config)


def make_cache(config: BlockConfig):
    """A fresh generation cache for one self-attention sub-block: the last ``window`` keys and
    values (:class:`~attnlab.nn.RollingKVCache`, ``[B, h_kv, <= W, d_k]``) for a windowed kind, the
    recurrent state for ``linear`` (``S [B, h, d_k, d_k]``, ``z [B, h, d_k]``) and ``ssm`` (conv
    tail ``[B, 3, d]``, ``h [B, d, n]``), every key and value (``[B, h_kv, T, d_k]``) otherwise."""
    if config.attention == "ssm":
        return SSMState()
    if config.attention == "linear":
        return LinearAttentionState()
    if config.window is not None:
        return RollingKVCache(config.window)
    return KVCache()


def _sublayers(layer: nn.Module, config: BlockConfig, ffn_norm: str) -> None:
    """The FFN, its norm (named ``ffn_norm``) and residual dropout of a layer; None when ffn='none'."""
    has_ffn = config.ffn != "none"
    layer.ffn = FeedForward(config) if has_ffn else None
    setattr(layer, ffn_norm, make_norm(config) if has_ffn else None)


# the residual stream around a block's sub-blocks (TransformerLens's names)
RESIDUAL_POINTS = {
    "resid_pre": "[B, T, d_model]",  # the layer's input
    "resid_mid": "[B, T, d_model]",  # after the (self-)attention sub-block
    "resid_post": "[B, T, d_model]",  # the layer's output
}


class EncoderLayer(HookPoints, nn.Module):
    """One encoder layer: self-attention then FFN, each in a residual branch with a norm.

    post: U = N_1(X + MHA(X)), Y = N_2(U + FFN(U));  pre: U = X + MHA(N_1(X)), Y = U + FFN(N_2(U)).
    Built from a :class:`~attnlab.nn.BlockConfig`. Submodules ``self_attn``, ``ffn``, ``norm1``,
    ``norm2`` (``ffn`` and ``norm2`` are None for ``ffn="none"``). Hook points: ``resid_pre``,
    ``resid_mid``, ``resid_post`` and those of ``self_attn`` (:class:`MultiHeadAttention`: its
    ``weights [B, h, T, T]``, ...) and ``ffn``.
    """

    POINTS = RESIDUAL_POINTS

    def __init__(self, config: BlockConfig):
        super().__init__()
        c = self.config = _check_config("EncoderLayer", config)
        if c.attention == "ssm":
            raise ValueError(
                "EncoderLayer: attention='ssm' is a causal recurrence; an encoder reads both ways"
            )
        self.norm_first = c.norm_place == "pre"
        self.self_attn = MultiHeadAttention(c)
        self.norm1 = make_norm(c)
        _sublayers(self, c, "norm2")
        self.dropout1 = nn.Dropout(c.dropout)
        self.dropout2 = nn.Dropout(c.dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        is_causal: bool = False,
        empty_rows: str = "error",
    ) -> torch.Tensor:
        """``x [B, T, d_model] -> [B, T, d_model]``. ``mask``: bool, broadcastable to ``[B, T, T]``
        (True = may attend); ``empty_rows`` as :meth:`MultiHeadAttention.forward`'s. The weights
        ``[B, h, T, T]`` are the hook point ``self_attn.weights``."""
        x = self._at("resid_pre", x)
        kw = dict(mask=mask, is_causal=is_causal, empty_rows=empty_rows)
        if self.norm_first:
            a, _ = self.self_attn(self.norm1(x), **kw)
            x = self._at("resid_mid", x + self.dropout1(a))
            if self.ffn is not None:
                x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:
            a, _ = self.self_attn(x, **kw)
            x = self._at("resid_mid", self.norm1(x + self.dropout1(a)))
            if self.ffn is not None:
                x = self.norm2(x + self.dropout2(self.ffn(x)))
        return self._at("resid_post", x)

    def _hook_children(self) -> dict:
        return {"norm1": self.norm1, "self_attn": self.self_attn, "norm2": self.norm2, "ffn": self.ffn}


class DecoderLayer(HookPoints, nn.Module):
    """One decoder layer: masked self-attention, cross-attention over the memory, FFN.

    post: A = N_1(Y + SelfAttn(Y)), C = N_2(A + CrossAttn(A, M)), Z = N_3(C + FFN(C));
    pre:  A = Y + SelfAttn(N_1(Y)), C = A + CrossAttn(N_2(A), M), Z = C + FFN(N_3(C)).
    Built from a :class:`~attnlab.nn.BlockConfig`. Submodules ``self_attn``, ``cross_attn``, ``ffn``,
    ``norm1``, ``norm2``, ``norm3``; with ``cross_attention=False`` (decoder-only models, GPT)
    ``cross_attn`` and ``norm2`` are ``None``; with ``ffn="none"`` ``ffn`` and ``norm3`` are.
    ``memory_dim``: width of the memory (default ``d_model``). Hook points: ``resid_pre``,
    ``resid_mid`` (after self-attention), ``resid_cross`` (after cross-attention, if any),
    ``resid_post`` and those of ``self_attn``, ``cross_attn`` and ``ffn``.
    """

    POINTS = {
        "resid_pre": RESIDUAL_POINTS["resid_pre"],
        "resid_mid": RESIDUAL_POINTS["resid_mid"],
        "resid_cross": "[B, T, d_model]",  # after the cross-attention sub-block
        "resid_post": RESIDUAL_POINTS["resid_post"],
    }

    def __init__(self, config: BlockConfig, *, cross_attention: bool = True, memory_dim: int | None = None):
        super().__init__()
        c = self.config = _check_config("DecoderLayer", config)
        if c.attention == "ssm" and cross_attention:
            raise ValueError(
                "DecoderLayer: attention='ssm' has no cross-attention (it mixes one sequence); "
                "pass cross_attention=False"
            )
        self.norm_first = c.norm_place == "pre"
        self.self_attn = make_mixer(c)
        self.norm1 = make_norm(c)
        self.dropout1 = nn.Dropout(c.dropout)
        if cross_attention:
            self.cross_attn = MultiHeadAttention(c, cross_attention=True, kv_dim=memory_dim)
            self.norm2 = make_norm(c)
        else:
            self.cross_attn = None
            self.norm2 = None
        self.dropout2 = nn.Dropout(c.dropout)
        _sublayers(self, c, "norm3")
        self.dropout3 = nn.Dropout(c.dropout)

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor | None = None,
        *,
        self_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        cache: KVCache | None = None,
        memory_cache: KVCache | None = None,
        empty_rows: str = "error",
    ) -> torch.Tensor:
        """``y [B, T, d_model]``, ``memory [B, S, d_model]`` -> ``[B, T, d_model]``.

        Args:
            self_mask: bool broadcastable to ``[B, T, T_k]`` (T_k counts cached positions).
            memory_mask: bool broadcastable to ``[B, T, S]`` (source padding).
            is_causal: lower-right causal self-attention (correct with a cache).
            cache: the self-attention :class:`KVCache`; memory_cache: a static cache for the
                cross-attention's K/V of the memory (then ``memory`` may be None after the first step).
            empty_rows: as :meth:`MultiHeadAttention.forward`'s (for both attentions).
        Returns:
            ``z [B, T, d_model]``. The weights are the hook points ``self_attn.weights [B, h, T, T_k]``
            and ``cross_attn.weights [B, h, T, S]``.
        """
        has_cross = self.cross_attn is not None
        if has_cross and memory is None and (memory_cache is None or memory_cache.length == 0):
            raise ValueError("this decoder layer has cross-attention: pass memory [B, S, d_model]")
        kw = dict(empty_rows=empty_rows)
        y = self._at("resid_pre", y)
        if self.norm_first:
            a, _ = self.self_attn(self.norm1(y), mask=self_mask, is_causal=is_causal, cache=cache, **kw)
            y = self._at("resid_mid", y + self.dropout1(a))
            if has_cross:
                c, _ = self.cross_attn(self.norm2(y), memory, mask=memory_mask, cache=memory_cache, **kw)
                y = self._at("resid_cross", y + self.dropout2(c))
            if self.ffn is not None:
                y = y + self.dropout3(self.ffn(self.norm3(y)))
        else:
            a, _ = self.self_attn(y, mask=self_mask, is_causal=is_causal, cache=cache, **kw)
            y = self._at("resid_mid", self.norm1(y + self.dropout1(a)))
            if has_cross:
                c, _ = self.cross_attn(y, memory, mask=memory_mask, cache=memory_cache, **kw)
                y = self._at("resid_cross", self.norm2(y + self.dropout2(c)))
            if self.ffn is not None:
                y = self.norm3(y + self.dropout3(self.ffn(y)))
        return self._at("resid_post", y)

    def _points(self) -> dict[str, str]:
        if self.cross_attn is None:
            return {k: v for k, v in self.POINTS.items() if k != "resid_cross"}
        return self.POINTS

    def _hook_children(self) -> dict:
        return {
            "norm1": self.norm1,
            "self_attn": self.self_attn,
            "norm2": self.norm2,
            "cross_attn": self.cross_attn,
            "norm3": self.norm3,
            "ffn": self.ffn,
        }


class _Stack(HookPoints, nn.Module):
    """``num_layers`` separately parameterised ``layer_class`` layers (``self.layers``) built from one
    :class:`~attnlab.nn.BlockConfig`, and an optional final norm (``self.norm``; by default only a
    pre-norm stack has one)."""

    layer_class: type[nn.Module]

    def __init__(self, num_layers: int, config: BlockConfig, *, final_norm: bool | None = None):
        super().__init__()
        config = _check_config(type(self).__name__, config)
        self.layers = nn.ModuleList(self.layer_class(config) for _ in range(num_layers))
        if final_norm is None:
            final_norm = config.norm_place == "pre"
        self.norm = make_norm(config) if final_norm else None

    def _hook_children(self) -> dict:
        return {**{f"layers.{i}": layer for i, layer in enumerate(self.layers)}, "norm": self.norm}


class Encoder(_Stack):
    """A stack of :class:`EncoderLayer` and an optional final norm (``norm``; pre-norm stacks
    need it, ``nn.TransformerEncoder`` in ``nn.Transformer`` always has one):
    ``Encoder(num_layers, config, final_norm=None)``.
    """

    layer_class = EncoderLayer

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x [B, S, d_model] -> [B, S, d_model]``; ``mask`` bool broadcastable to ``[B, S, S]``."""
        for layer in self.layers:
            x = layer(x, mask)  # [B, S, d]
        return x if self.norm is None else self.norm(x)


class Decoder(_Stack):
    """A stack of :class:`DecoderLayer` (with cross-attention) and an optional final norm (``norm``):
    ``Decoder(num_layers, config, final_norm=None)``."""

    layer_class = DecoderLayer

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor | None = None,
        *,
        self_mask=None,
        memory_mask=None,
        is_causal: bool = False,
        caches: list[KVCache] | None = None,
        memory_caches: list[KVCache] | None = None,
    ) -> torch.Tensor:
        """``y [B, T, d_model]``, ``memory [B, S, d_model]`` -> ``[B, T, d_model]`` (masks and caches as
        :meth:`DecoderLayer.forward`'s, one cache per layer)."""
        for i, layer in enumerate(self.layers):
            y = layer(
                y,
                memory,
                self_mask=self_mask,
                memory_mask=memory_mask,
                is_causal=is_causal,
                cache=None if caches is None else caches[i],
                memory_cache=None if memory_caches is None else memory_caches[i],
            )  # [B, T, d]
        return y if self.norm is None else self.norm(y)


class EncoderDecoder(HookPoints, nn.Module):
    """Encoder and decoder stacks on embeddings (the part of the model that ``nn.Transformer`` is),
    every layer built from one :class:`~attnlab.nn.BlockConfig`.

    ``forward(src [B, S, d], tgt [B, T, d]) -> [B, T, d]``; masks are boolean, True = may attend.
    """

    def __init__(
        self,
        config: BlockConfig,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        *,
        final_norm: bool | None = None,
    ):
        super().__init__()
        self.encoder = Encoder(num_encoder_layers, config, final_norm=final_norm)
        self.decoder = Decoder(num_decoder_layers, config, final_norm=final_norm)

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        *,
        src_mask=None,
        tgt_mask=None,
        memory_mask=None,
        tgt_is_causal: bool = False,
    ) -> torch.Tensor:
        """memory = Encoder(src), out = Decoder(tgt, memory): ``src [B, S, d_model]``,
        ``tgt [B, T, d_model]`` -> ``[B, T, d_model]``.

        Masks are boolean, True = may attend: ``src_mask`` broadcastable to ``[B, S, S]``,
        ``tgt_mask`` to ``[B, T, T]``, ``memory_mask`` to ``[B, T, S]``; ``tgt_is_causal`` adds the
        (lower-right aligned) causal mask to the decoder's self-attention.
        """
        memory = self.encoder(src, src_mask)  # [B, S, d]
        return self.decoder(
            tgt, memory, self_mask=tgt_mask, memory_mask=memory_mask, is_causal=tgt_is_causal
        )  # [B, T, d]

    def _hook_children(self) -> dict:
        return {"encoder": self.encoder, "decoder": self.decoder}
