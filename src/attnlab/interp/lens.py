"""The logit lens and the residual stream of a decoder-only model (:class:`attnlab.models.GPT`).

Residual stream: ``h_0`` = the embeddings; pre-norm block l reads ``h_{l-1}`` and writes twice,
``h_l = h_{l-1} + a_l + m_l`` with ``a_l = MHA(LN_1(h_{l-1}))`` (the attention sub-block's write) and
``m_l = FFN(LN_2(h_{l-1} + a_l))`` (the MLP's; zero in an attention-only model).

Logit lens (nostalgebraist 2020): read every ``h_l`` as if it were the last one,
``logits_l = LN_f(h_l) W_U`` — the final norm *recomputed from h_l* (its own mean and variance), the
standard definition; ``logits_L`` are the model's logits exactly.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from attnlab.models.capabilities import layer_point, require_decoder
from attnlab.nn.hooks import capture


@dataclasses.dataclass
class ResidualStream:
    """``resid`` (L + 1 tensors ``[B, T, d]``: h_0 .. h_L), ``attn`` and ``mlp`` (L tensors ``[B, T, d]``:
    each sub-block's write a_l, m_l)."""

    resid: list[Tensor]
    attn: list[Tensor]
    mlp: list[Tensor]

    def norms(self) -> dict[str, Tensor]:
        """Mean L2 norm over the batch per layer and position: ``resid [L+1, T]``, ``attn``/``mlp [L, T]``."""
        return {
            name: torch.stack([x.norm(dim=-1).mean(dim=0) for x in getattr(self, name)])
            for name in ("resid", "attn", "mlp")
        }


# the hook points the residual stream is read at (names equal module paths; see attnlab.nn.hooks)
STREAM_POINTS = ("resid_post", "self_attn.out", "ffn.out")  # of each layer of the model's stack, after embed


def residual_stream(model, ids: Tensor) -> ResidualStream:
    """Run ``model`` (a GPT, eval mode) once on ``ids [B, T]``, capturing h_0 (``embed``), each block's
    output h_l (``blocks.{l}.resid_post``) and its two writes, a_l (``blocks.{l}.self_attn.out``) and
    m_l (``blocks.{l}.ffn.out``; zeros for an attention-only block): every ``[B, T, d]``."""
    require_decoder(model, "the residual stream view")
    if model.training:
        raise ValueError("put the model in eval mode first (dropout would make the writes random)")
    kept = [p for p in STREAM_POINTS if not (p == "ffn.out" and model.config.ffn == "none")]
    with torch.no_grad(), capture(model, ["embed"] + [layer_point(model, p, "*") for p in kept]) as cache:
        model(ids)
    n = model.config.num_layers
    resid = [cache["embed"]] + [cache[layer_point(model, "resid_post", i)] for i in range(n)]
    attn = [cache[layer_point(model, "self_attn.out", i)] for i in range(n)]
    mlp = [cache.get(layer_point(model, "ffn.out", i), torch.zeros_like(a)) for i, a in enumerate(attn)]
    return ResidualStream(resid, attn, mlp)


def logit_lens(model, ids: Tensor, stream: ResidualStream | None = None) -> Tensor:
    """``logits_l = LN_f(h_l) W_U`` for l = 0..L: ``[L + 1, B, T, V]`` (row L = ``model(ids)``)."""
    stream = residual_stream(model, ids) if stream is None else stream
    with torch.no_grad():
        return torch.stack([model.lm_head(model.norm(h)) for h in stream.resid])  # [L+1, B, T, V]


def eventual_token_by_layer(lens: Tensor) -> dict[str, Tensor]:
    """For the eventual output (the last layer's argmax at each position), its ``rank`` (0 = top) and
    ``prob`` under every layer's logits, averaged over the batch: ``[L + 1, T]`` each."""
    final = lens[-1].argmax(dim=-1)  # [B, T]
    target = final[None, ..., None].expand(lens.shape[0], -1, -1, 1)  # [L+1, B, T, 1]
    chosen = lens.gather(-1, target)  # [L+1, B, T, 1]
    rank = (lens > chosen).sum(dim=-1).float()  # [L+1, B, T]
    prob = lens.softmax(dim=-1).gather(-1, target)[..., 0]  # [L+1, B, T]
    return {"rank": rank.mean(dim=1), "prob": prob.mean(dim=1)}
