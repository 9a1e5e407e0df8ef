"""The position-wise FFN, encoder and decoder layers, and stacks of them.

Post-norm (the original paper):  U = LN_1(X + MHA(X)),        Y = LN_2(U + FFN(U)).
Pre-norm (GPT-style):            U = X + MHA(LN_1(X)),        Y = U + FFN(LN_2(U)).
The decoder layer adds cross-attention over the encoder memory between the two (``norm2``);
its FFN's norm is always ``norm3``. Dropout sits where ``nn.TransformerEncoderLayer`` puts it:
on the attention weights, on each residual branch, and inside the FFN after the activation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.nn.multihead import KVCache, MultiHeadAttention

ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


def _check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


class FeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2 on every position: ``[..., d_model] -> [..., d_model]``.

    Submodules ``linear1 [d_model -> d_ff]``, ``linear2 [d_ff -> d_model]``; activation ``"relu"``,
    ``"gelu"`` or ``"gelu_tanh"``; dropout after the activation (training only).
    """

    def __init__(
        self, d_model: int, d_ff: int, activation: str = "relu", bias: bool = True, dropout: float = 0.0
    ):
        super().__init__()
        _check_choice("activation", activation, ACTIVATIONS)
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self._act = ACTIVATIONS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """FFN(x) = act(x W_1 + b_1) W_2 + b_2: ``x [..., d_model] -> [..., d_model]`` (hidden
        ``[..., d_ff]``), each position on its own."""
        if x.shape[-1] != self.linear1.in_features:
            raise ValueError(f"x must be [..., d_model={self.linear1.in_features}], got {list(x.shape)}")
        return self.linear2(self.dropout(self._act(self.linear1(x))))  # [..., d_ff] -> [..., d_model]


class EncoderLayer(nn.Module):
    """One encoder layer: self-attention then FFN, each in a residual branch with LayerNorm.

    post: U = LN_1(X + MHA(X)), Y = LN_2(U + FFN(U));  pre: U = X + MHA(LN_1(X)), Y = U + FFN(LN_2(U)).
    Submodules ``self_attn``, ``ffn``, ``norm1``, ``norm2``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        norm: str = "post",
        activation: str = "relu",
        dropout: float = 0.0,
        bias: bool = True,
        num_kv_heads: int | None = None,
        eps: float = 1e-5,
        positions: str | None = None,
        attention: str = "sdpa",
    ):
        super().__init__()
        _check_choice("norm", norm, ("post", "pre"))
        self.norm_first = norm == "pre"
        self.norm = norm
        self.self_attn = MultiHeadAttention(
            d_model,
            num_heads,
            num_kv_heads=num_kv_heads,
            bias=bias,
            positions=positions,
            dropout=dropout,
            attention=attention,
        )
        self.ffn = FeedForward(d_model, d_ff, activation, bias, dropout)
        self.norm1 = nn.LayerNorm(d_model, eps=eps)
        self.norm2 = nn.LayerNorm(d_model, eps=eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        is_causal: bool = False,
        need_weights: bool = False,
    ):
        """``x [B, T, d_model] -> [B, T, d_model]``; with ``need_weights`` also the self-attention
        weights ``[B, h, T, T]``. ``mask``: bool, broadcastable to ``[B, T, T]`` (True = may attend)."""
        if self.norm_first:
            a, w = self.self_attn(self.norm1(x), mask=mask, is_causal=is_causal, need_weights=need_weights)
            x = x + self.dropout1(a)
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:
            a, w = self.self_attn(x, mask=mask, is_causal=is_causal, need_weights=need_weights)
            x = self.norm1(x + self.dropout1(a))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return (x, w) if need_weights else x


class DecoderLayer(nn.Module):
    """One decoder layer: masked self-attention, cross-attention over the memory, FFN.

    post: A = LN_1(Y + SelfAttn(Y)), C = LN_2(A + CrossAttn(A, M)), Z = LN_3(C + FFN(C));
    pre:  A = Y + SelfAttn(LN_1(Y)), C = A + CrossAttn(LN_2(A), M), Z = C + FFN(LN_3(C)).
    Submodules ``self_attn``, ``cross_attn``, ``ffn``, ``norm1``, ``norm2``, ``norm3``; with
    ``cross_attention=False`` (decoder-only models) ``cross_attn`` and ``norm2`` are ``None``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        norm: str = "post",
        activation: str = "relu",
        dropout: float = 0.0,
        bias: bool = True,
        num_kv_heads: int | None = None,
        eps: float = 1e-5,
        cross_attention: bool = True,
        positions: str | None = None,
        attention: str = "sdpa",
        memory_dim: int | None = None,
    ):
        super().__init__()
        _check_choice("norm", norm, ("post", "pre"))
        self.norm_first = norm == "pre"
        self.norm = norm
        self.self_attn = MultiHeadAttention(
            d_model,
            num_heads,
            num_kv_heads=num_kv_heads,
            bias=bias,
            positions=positions,
            dropout=dropout,
            attention=attention,
        )
        self.norm1 = nn.LayerNorm(d_model, eps=eps)
        self.dropout1 = nn.Dropout(dropout)
        if cross_attention:
            self.cross_attn = MultiHeadAttention(
                d_model,
                num_heads,
                num_kv_heads=num_kv_heads,
                bias=bias,
                dropout=dropout,
                kv_dim=memory_dim,
                attention=attention,
            )
            self.norm2 = nn.LayerNorm(d_model, eps=eps)
        else:
            self.cross_attn = None
            self.norm2 = None
        self.dropout2 = nn.Dropout(dropout)
        self.ffn = FeedForward(d_model, d_ff, activation, bias, dropout)
        self.norm3 = nn.LayerNorm(d_model, eps=eps)
        self.dropout3 = nn.Dropout(dropout)

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
        need_weights: bool = False,
    ):
        """``y [B, T, d_model]``, ``memory [B, S, d_model]`` -> ``[B, T, d_model]``.

        Args:
            self_mask: bool broadcastable to ``[B, T, T_k]`` (T_k counts cached positions).
            memory_mask: bool broadcastable to ``[B, T, S]`` (source padding).
            is_causal: lower-right causal self-attention (correct with a cache).
            cache: the self-attention :class:`KVCache`; memory_cache: a static cache for the
                cross-attention's K/V of the memory (then ``memory`` may be None after the first step).
            need_weights: also return ``self_weights [B, h, T, T_k]`` and ``cross_weights [B, h, T, S]``.
        Returns:
            ``z`` or, with ``need_weights``, ``(z, self_weights, cross_weights)``.
        """
        has_cross = self.cross_attn is not None
        if has_cross and memory is None and (memory_cache is None or memory_cache.length == 0):
            raise ValueError("this decoder layer has cross-attention: pass memory [B, S, d_model]")
        cross_w = None
        if self.norm_first:
            a, self_w = self.self_attn(
                self.norm1(y), mask=self_mask, is_causal=is_causal, need_weights=need_weights, cache=cache
            )
            y = y + self.dropout1(a)
            if has_cross:
                c, cross_w = self.cross_attn(
                    self.norm2(y), memory, mask=memory_mask, need_weights=need_weights, cache=memory_cache
                )
                y = y + self.dropout2(c)
            y = y + self.dropout3(self.ffn(self.norm3(y)))
        else:
            a, self_w = self.self_attn(
                y, mask=self_mask, is_causal=is_causal, need_weights=need_weights, cache=cache
            )
            y = self.norm1(y + self.dropout1(a))
            if has_cross:
                c, cross_w = self.cross_attn(
                    y, memory, mask=memory_mask, need_weights=need_weights, cache=memory_cache
                )
                y = self.norm2(y + self.dropout2(c))
            y = self.norm3(y + self.dropout3(self.ffn(y)))
        return (y, self_w, cross_w) if need_weights else y


class _Stack(nn.Module):
    """``num_layers`` separately parameterised ``layer_class`` layers (``self.layers``) and an optional
    final LayerNorm (``self.norm``; by default only a pre-norm stack has one)."""

    layer_class: type[nn.Module]

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        final_norm: bool | None = None,
        eps: float = 1e-5,
        **layer_kwargs,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            self.layer_class(d_model, num_heads, d_ff, eps=eps, **layer_kwargs) for _ in range(num_layers)
        )
        if final_norm is None:
            final_norm = layer_kwargs.get("norm", "post") == "pre"
        self.norm = nn.LayerNorm(d_model, eps=eps) if final_norm else None


class Encoder(_Stack):
    """A stack of :class:`EncoderLayer` and an optional final LayerNorm (``norm``; pre-norm stacks
    need it, ``nn.TransformerEncoder`` in ``nn.Transformer`` always has one).

    Keyword arguments other than ``final_norm`` go to every :class:`EncoderLayer`.
    """

    layer_class = EncoderLayer

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, *, need_weights: bool = False):
        """``x [B, S, d_model] -> [B, S, d_model]`` (and a list of ``[B, h, S, S]`` with ``need_weights``)."""
        weights = []
        for layer in self.layers:
            if need_weights:
                x, w = layer(x, mask, need_weights=True)
                weights.append(w)
            else:
                x = layer(x, mask)
        if self.norm is not None:
            x = self.norm(x)
        return (x, weights) if need_weights else x


class Decoder(_Stack):
    """A stack of :class:`DecoderLayer` and an optional final LayerNorm (``norm``)."""

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
        need_weights: bool = False,
    ):
        """``y [B, T, d_model]``, ``memory [B, S, d_model]`` -> ``[B, T, d_model]``; with ``need_weights``
        also lists of self ``[B, h, T, T_k]`` and cross ``[B, h, T, S]`` weights, one per layer."""
        self_ws, cross_ws = [], []
        for i, layer in enumerate(self.layers):
            out = layer(
                y,
                memory,
                self_mask=self_mask,
                memory_mask=memory_mask,
                is_causal=is_causal,
                cache=None if caches is None else caches[i],
                memory_cache=None if memory_caches is None else memory_caches[i],
                need_weights=need_weights,
            )
            if need_weights:
                y, sw, cw = out
                self_ws.append(sw)
                cross_ws.append(cw)
            else:
                y = out
        if self.norm is not None:
            y = self.norm(y)
        return (y, self_ws, cross_ws) if need_weights else y


class EncoderDecoder(nn.Module):
    """Encoder and decoder stacks on embeddings (the part of the model that ``nn.Transformer`` is).

    ``forward(src [B, S, d], tgt [B, T, d]) -> [B, T, d]``; masks are boolean, True = may attend.
    """

    def __init__(
        self,
        d_model: int = 512,
        num_heads: int = 8,
        d_ff: int = 2048,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        *,
        final_norm: bool | None = None,
        **layer_kwargs,
    ):
        super().__init__()
        self.encoder = Encoder(
            num_encoder_layers, d_model, num_heads, d_ff, final_norm=final_norm, **layer_kwargs
        )
        self.decoder = Decoder(
            num_decoder_layers, d_model, num_heads, d_ff, final_norm=final_norm, **layer_kwargs
        )

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
