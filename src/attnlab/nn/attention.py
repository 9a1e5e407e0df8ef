"""Attention of the recurrent encoder-decoders: additive (Bahdanau) and multiplicative (Luong).

Both score every encoder annotation ``h_i`` against a decoder state, turn the scores into an
alignment row with a softmax over source positions and return the weighted sum of annotations:

    e_ti = score(s, h_i),   alpha_ti = softmax_i(e_ti),   c_t = sum_i alpha_ti h_i.

Shapes (row convention of the notes): decoder states ``s [B, T_tgt, d_s]``, annotations
``h [B, T_src, d_h]``, alignment ``alpha [B, T_tgt, T_src]``, context ``c [B, T_tgt, d_h]``.
Masks are boolean, ``True`` where the source position is real, broadcastable to
``[B, T_tgt, T_src]`` (a source padding mask ``[B, S]`` is passed as ``mask[:, None, :]``).

The part of a score that depends only on the source (``U_a h_i`` for Bahdanau, ``W_a h_i`` for
Luong's general score) is computed once per source by :meth:`project_keys`; a decoder that runs
step by step passes it to :meth:`attend` instead of recomputing it at every step.

The NumPy twin is :mod:`attnlab.ref.attention` (``additive_attention``, ``luong_attention``):
with ``W_a = module.W_a.weight.T`` etc. the two agree to float64 rounding (tests/nn).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab._checks import choice, positive_int

LUONG_KINDS = ("dot", "general", "concat")


def _check_inputs(s: Tensor, h: Tensor, d_s: int, d_h: int) -> None:
    if s.dim() != 3 or s.shape[-1] != d_s:
        raise ValueError(f"s must be [B, T_tgt, d_s={d_s}], got shape {list(s.shape)}")
    if h.dim() != 3 or h.shape[-1] != d_h:
        raise ValueError(f"h must be [B, T_src, d_h={d_h}], got shape {list(h.shape)}")
    if s.shape[0] != h.shape[0]:
        raise ValueError(
            f"s has batch {s.shape[0]} but h has batch {h.shape[0]} (s {list(s.shape)}, h {list(h.shape)})"
        )


def masked_softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """alpha = softmax(scores + M) over source positions, M = -inf where ``mask`` is False.

    Args:
        scores: ``[B, T_tgt, T_src]``.
        mask: bool broadcastable to ``scores`` (True = real source position), or None.
    Returns:
        weights ``[B, T_tgt, T_src]``, every row sums to one. A row with no real source
        position is a ``ValueError`` (it would be NaN).
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be boolean (True = real source position), got dtype {mask.dtype}")
    try:
        mask = mask.expand_as(scores)  # [B, T_tgt, T_src]
    except RuntimeError:
        raise ValueError(
            f"mask of shape {list(mask.shape)} does not broadcast to the scores' shape {list(scores.shape)}"
        ) from None
    if not bool(mask.any(dim=-1).all()):
        raise ValueError("mask leaves a decoder step with no source position to attend to")
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


class AdditiveAttention(nn.Module):
    """Bahdanau attention: e_ti = v_a^T tanh(W_a s_{t-1} + U_a h_i).

    Parameters (``nn.Linear`` without bias, torch layout ``[d_out, d_in]``): ``W_a`` maps
    ``d_s -> d_a``, ``U_a`` maps ``d_h -> d_a``, ``v_a`` maps ``d_a -> 1``. The reference's
    matrices are ``W_a.weight.T [d_s, d_a]``, ``U_a.weight.T [d_h, d_a]``, ``v_a.weight[0] [d_a]``.
    """

    def __init__(self, d_s: int, d_h: int, d_a: int) -> None:
        super().__init__()
        self.d_s, self.d_h = positive_int("d_s", d_s), positive_int("d_h", d_h)
        self.d_a = positive_int("d_a", d_a)
        self.W_a = nn.Linear(d_s, d_a, bias=False)
        self.U_a = nn.Linear(d_h, d_a, bias=False)
        self.v_a = nn.Linear(d_a, 1, bias=False)

    def project_keys(self, h: Tensor) -> Tensor:
        """U_a h_i for every annotation: ``h [B, T_src, d_h] -> [B, T_src, d_a]``."""
        return self.U_a(h)

    def attend(self, s: Tensor, h: Tensor, keys: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Alignment and context given precomputed ``keys = project_keys(h)`` ``[B, T_src, d_a]``.

        Returns ``(context [B, T_tgt, d_h], weights [B, T_tgt, T_src])``."""
        _check_inputs(s, h, self.d_s, self.d_h)
        proj_s = self.W_a(s).unsqueeze(2)  # [B, T_tgt, 1, d_a]
        scores = self.v_a(torch.tanh(proj_s + keys.unsqueeze(1))).squeeze(-1)  # [B, T_tgt, T_src]
        weights = masked_softmax(scores, mask)  # [B, T_tgt, T_src]
        return weights @ h, weights  # context [B, T_tgt, d_h]

    def forward(self, s: Tensor, h: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """c_t = sum_i softmax_i(v_a^T tanh(W_a s_{t-1} + U_a h_i)) h_i.

        Args:
            s: previous decoder states ``[B, T_tgt, d_s]``.
            h: encoder annotations ``[B, T_src, d_h]``.
            mask: bool broadcastable to ``[B, T_tgt, T_src]``, True = real source position.
        Returns:
            ``(context [B, T_tgt, d_h], weights [B, T_tgt, T_src])``; each weight row sums to one.
        """
        _check_inputs(s, h, self.d_s, self.d_h)
        return self.attend(s, h, self.project_keys(h), mask)


class LuongAttention(nn.Module):
    """Luong attention with the current decoder state s_t:

        score(s_t, h_i) = s_t^T h_i                    ("dot", needs d_s == d_h)
                        = s_t^T W_a h_i                ("general")
                        = v_a^T tanh(W_a [s_t; h_i])   ("concat")

    Parameters: general has ``W_a = nn.Linear(d_h, d_s, bias=False)`` (its weight ``[d_s, d_h]``
    is the reference's ``W``); concat has ``W_a = nn.Linear(d_s + d_h, d_a, bias=False)`` (the
    reference's ``W = W_a.weight.T``) and ``v_a = nn.Linear(d_a, 1, bias=False)``; dot has none.
    ``d_a`` (concat only) defaults to ``d_s``.
    """

    def __init__(self, d_s: int, d_h: int, kind: str = "dot", d_a: int | None = None) -> None:
        super().__init__()
        choice("kind", kind, LUONG_KINDS)
        self.d_s, self.d_h, self.kind = positive_int("d_s", d_s), positive_int("d_h", d_h), kind
        if kind == "dot" and d_s != d_h:
            raise ValueError(f"the dot score needs d_s == d_h, got d_s={d_s}, d_h={d_h}")
        if d_a is not None and kind != "concat":
            raise ValueError(f"d_a is used by kind='concat' only, got d_a={d_a} with kind={kind!r}")
        self.d_a = positive_int("d_a", d_a if d_a is not None else d_s) if kind == "concat" else None
        if kind == "general":
            self.W_a = nn.Linear(d_h, d_s, bias=False)
        elif kind == "concat":
            self.W_a = nn.Linear(d_s + d_h, self.d_a, bias=False)
            self.v_a = nn.Linear(self.d_a, 1, bias=False)

    def project_keys(self, h: Tensor) -> Tensor:
        """The source-only part of the score: ``h`` (dot), ``h W_a^T [B, T_src, d_s]`` (general),
        ``h @ W[d_s:] [B, T_src, d_a]`` (concat)."""
        if self.kind == "dot":
            return h
        if self.kind == "general":
            return self.W_a(h)  # [B, T_src, d_s]
        return F.linear(h, self.W_a.weight[:, self.d_s :])  # [B, T_src, d_a]

    def attend(self, s: Tensor, h: Tensor, keys: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Alignment and context given precomputed ``keys = project_keys(h)``.

        Returns ``(context [B, T_tgt, d_h], weights [B, T_tgt, T_src])``."""
        _check_inputs(s, h, self.d_s, self.d_h)
        if self.kind == "concat":
            # W_a [s; h] = W_a[:, :d_s] s + W_a[:, d_s:] h
            proj_s = F.linear(s, self.W_a.weight[:, : self.d_s]).unsqueeze(2)  # [B, T_tgt, 1, d_a]
            scores = self.v_a(torch.tanh(proj_s + keys.unsqueeze(1))).squeeze(-1)  # [B, T_tgt, T_src]
        else:
            scores = s @ keys.transpose(1, 2)  # [B, T_tgt, T_src]
        weights = masked_softmax(scores, mask)  # [B, T_tgt, T_src]
        return weights @ h, weights  # context [B, T_tgt, d_h]

    def forward(self, s: Tensor, h: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """c_t = sum_i softmax_i(score(s_t, h_i)) h_i.

        Args:
            s: current decoder states ``[B, T_tgt, d_s]``.
            h: encoder states ``[B, T_src, d_h]``.
            mask: bool broadcastable to ``[B, T_tgt, T_src]``, True = real source position.
        Returns:
            ``(context [B, T_tgt, d_h], weights [B, T_tgt, T_src])``; each weight row sums to one.
        """
        _check_inputs(s, h, self.d_s, self.d_h)
        return self.attend(s, h, self.project_keys(h), mask)
