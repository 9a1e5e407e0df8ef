"""Direct logit attribution and the residual stream taken apart, for any decoder attnlab loads.

A pre-norm decoder's last residual stream is a sum of what each component wrote (eval mode):

    h_L = e + Σ_l (a_l + m_l),   a_l = Σ_h z_{l,h} W^O_{l,h} + b^O_l

(``e`` the embeddings with positions, ``z_{l,h} [B, T, d_k]`` head h's output — the point
``blocks.{l}.self_attn.z`` — and ``W^O_{l,h} [d_k, d_model]`` its rows of W^O, ``m_l`` the FFN's
write). The logit of token t is ``N_f(h_L) · u_t`` (``u_t`` the row of W_out). The final norm
``N_f(x) = (x - mu(x)) * s * g + b`` (RMSNorm: no ``mu``, no ``b``) is linear in ``x`` once its
scale ``s`` = 1/sigma (1/RMS) is held at the value of the real run — the point ``final_norm.scale``
— as TransformerLens does. So each component c gets the share

    DLA(c) = ((c - mu(c)) * s * g) · (u_t - u_w)                 (w: the wrong token, optional)

and the shares plus ``b · (u_t - u_w)`` (the final norm's bias) add up to the model's logit
(difference) exactly: :func:`logit_attribution` reports that sum beside the logit.

:func:`decompose_resid` returns the parts themselves (``[n, B, T, d]``), :func:`accumulated_resid`
the stream after each sub-block (``0_pre``, ``0_mid``, ``1_pre``, ..., ``final_post``:
TransformerLens's labels), :func:`head_outputs` every head's write ``z_{l,h} W^O_{l,h}``.

Arguments: ``ids`` is an integer tensor ``[B, T]`` (one sequence: ``ids[None]``); ``target`` and
``wrong`` are token ids in ``0..V-1`` (a Python or NumPy integer, or a 0-d integer tensor);
``position`` counts from 0 or, Python-style, from the end (-1, the default, is the last token);
``layer`` counts from 0, and a negative layer is refused (layers and heads are names, as in
``head 1.3``). After :func:`attnlab.interp.prune_heads` the heads keep their original numbers.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from attnlab.interp.ablation import as_index, kept_heads
from attnlab.models.capabilities import require_decoder
from attnlab.nn.hooks import capture
from attnlab.nn.layers import LayerNorm
from attnlab.nn.multihead import MultiHeadAttention

# the hook points of block l this module reads (one place, so a renaming touches only these lines)
RESID = "blocks.{l}.resid_{where}"  # where: pre | mid | post, [B, T, d_model]
Z = "blocks.{l}.self_attn.z"  # [B, T, h, d_k]
ATTN_OUT = "blocks.{l}.self_attn.out"  # [B, T, d_model]
FFN_OUT = "blocks.{l}.ffn.out"  # [B, T, d_model]
EMBED, FINAL_SCALE = "embed", "final_norm.scale"  # [B, T, d_model], [B, T, 1]


def check_decoder(model) -> None:
    """A ``ValueError`` unless ``model`` is an attnlab decoder (:func:`require_decoder`: GPT-2, Llama,
    Mistral, Qwen2, attnlab runs) in eval mode whose blocks hold multi-head attention."""
    require_decoder(model, "this analysis")
    if model.training:
        raise ValueError("put the model in eval mode first (dropout would make every write random)")
    if not all(isinstance(b.self_attn, MultiHeadAttention) for b in model.blocks):
        raise ValueError("this analysis needs softmax/linear attention heads; the model has SSM blocks")


def logits_of(out) -> Tensor:
    """The logits of a forward's result (a tensor, or an output object holding ``logits``)."""
    return out if isinstance(out, Tensor) else out.logits


def check_ids(ids) -> Tensor:
    """``ids`` if it is an integer tensor ``[B, T]`` with ``B, T >= 1``, else a ``ValueError`` naming
    what it is (a ``[T]`` row: add the batch axis, ``ids[None]``)."""
    if not isinstance(ids, Tensor):
        raise ValueError(f"ids must be an integer tensor [B, T], got {type(ids).__name__}")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ValueError(f"ids must be an integer tensor [B, T], got dtype {ids.dtype}")
    if ids.ndim != 2 or 0 in ids.shape:
        hint = " (one sequence: ids[None])" if ids.ndim == 1 else ""
        raise ValueError(
            f"ids must be an integer tensor [B, T] with B, T >= 1, got shape {list(ids.shape)}{hint}"
        )
    return ids


def check_position(position, t: int) -> int:
    """``position`` as an int in ``-t..t-1`` (Python-style: -1 is the last of ``t`` tokens)."""
    position = as_index("position", position)
    if not -t <= position < t:
        raise ValueError(f"position {position} is outside the {t} tokens (-{t}..{t - 1})")
    return position


def check_layer(model, layer) -> int:
    """``layer`` as an int in ``0..L-1`` (a decoder's blocks; negative numbers are refused)."""
    layer = as_index("layer", layer)
    if not 0 <= layer < len(model.blocks):
        raise ValueError(f"layer {layer} is out of range: the model has layers 0..{len(model.blocks) - 1}")
    return layer


def run_with_cache(model, ids: Tensor, names: list[str] | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """``(logits [B, T, V], cache)``: one forward of ``ids [B, T]`` keeping the points ``names``
    (default: every point this module reads)."""
    check_decoder(model)
    check_ids(ids)
    if names is None:
        names = [EMBED, FINAL_SCALE, "blocks.*.resid_*", "blocks.*.self_attn.z", "blocks.*.self_attn.out"]
        if any(b.ffn is not None for b in model.blocks):
            names.append("blocks.*.ffn.out")
    with torch.no_grad(), capture(model, names) as cache:
        logits = logits_of(model(ids))
    return logits, dict(cache)


@torch.no_grad()
def head_outputs(model, cache: dict[str, Tensor], layer: int) -> Tensor:
    """Each head's write ``z_{l,h} W^O_{l,h}``: ``[B, T, h, d_model]`` (summed over h and plus b^O,
    the attention sub-block's output); after pruning, ``h`` is the heads left (:func:`kept_heads`)."""
    layer = check_layer(model, layer)
    attn = model.blocks[layer].self_attn
    z = cache[Z.format(l=layer)]  # [B, T, h, d_k]
    w = attn.out_proj.weight.view(attn.d_model, attn.num_heads, attn.d_k)  # [d_model, h, d_k] (torch's W^O^T)
    return torch.einsum("bthk,dhk->bthd", z, w.to(z.dtype))  # [B, T, h, d_model]


@dataclasses.dataclass
class Parts:
    """Components of the residual stream: ``labels`` (n) and ``stack [n, B, T, d_model]``."""

    labels: list[str]
    stack: Tensor

    def __post_init__(self) -> None:
        if len(self.labels) != self.stack.shape[0]:
            raise ValueError(f"{len(self.labels)} labels for {self.stack.shape[0]} parts")


@torch.no_grad()
def decompose_resid(model, cache: dict[str, Tensor], *, heads: bool = False) -> Parts:
    """The parts whose sum is the last residual stream ``h_L`` (``blocks.{L-1}.resid_post``): ``embed``,
    then per layer ``attn {l}`` (or, with ``heads``, ``head {l}.{h}`` for each head and ``attn bias
    {l}`` for b^O when the layer has one) and ``mlp {l}`` (when it has an FFN)."""
    labels, parts = [EMBED], [cache[EMBED]]
    for l, block in enumerate(model.blocks):
        if heads:
            per_head = head_outputs(model, cache, l)  # [B, T, h, d]
            labels += [f"head {l}.{h}" for h in kept_heads(block.self_attn)]  # original numbers
            parts += list(per_head.unbind(2))
            bias = block.self_attn.out_proj.bias
            if bias is not None:
                labels.append(f"attn bias {l}")
                parts.append(bias.to(per_head.dtype).expand_as(parts[0]))
        else:
            labels.append(f"attn {l}")
            parts.append(cache[ATTN_OUT.format(l=l)])
        if block.ffn is not None:
            labels.append(f"mlp {l}")
            parts.append(cache[FFN_OUT.format(l=l)])
    return Parts(labels, torch.stack(parts))  # [n, B, T, d]


def accumulated_resid(model, cache: dict[str, Tensor], *, mid: bool = True) -> Parts:
    """The residual stream as it grows: ``{l}_pre`` (block l's input) and, with ``mid``, ``{l}_mid``
    (after its attention), for every l, then ``final_post`` (``h_L``, what the final norm reads)."""
    labels, parts = [], []
    for l in range(len(model.blocks)):
        labels.append(f"{l}_pre")
        parts.append(cache[RESID.format(l=l, where="pre")])
        if mid:
            labels.append(f"{l}_mid")
            parts.append(cache[RESID.format(l=l, where="mid")])
    labels.append("final_post")
    parts.append(cache[RESID.format(l=len(model.blocks) - 1, where="post")])
    return Parts(labels, torch.stack(parts))  # [n, B, T, d]


@torch.no_grad()
def frozen_final_norm(model, stack: Tensor, scale: Tensor) -> Tensor:
    """``(x - mu(x)) * s * g`` for each ``x`` of ``stack [..., B, T, d]`` with the real run's scale
    ``s [B, T, 1]`` (the final norm made linear; its bias left out: it belongs to no component)."""
    norm = model.norm
    if isinstance(norm, LayerNorm):
        stack = stack - stack.mean(dim=-1, keepdim=True)
    out = stack * scale
    return out if norm.weight is None else out * norm.weight.to(out.dtype)


@dataclasses.dataclass
class Attribution:
    """Direct logit attribution at one position: ``labels`` (n parts, the last ``final_norm bias``
    for a LayerNorm), ``values [n, B]``, and the model's own ``logit [B]`` (of the target, or target
    minus wrong); ``values.sum(0)`` equals it up to rounding."""

    labels: list[str]
    values: Tensor
    logit: Tensor
    target: int
    wrong: int | None
    position: int

    def heads(self) -> Tensor:
        """The heads' values ``[L, h, B]`` (from the ``head {l}.{h}`` labels). A model with heads
        removed (:func:`attnlab.interp.prune_heads`) has no full grid: a ``ValueError`` naming the
        layer (read its heads by label instead)."""
        found = [(lab, v) for lab, v in zip(self.labels, self.values) if lab.startswith("head ")]
        if not found:
            raise ValueError("no per-head values: this attribution was made with heads=False")
        by_layer: dict[int, list[int]] = {}
        for lab, _ in found:
            layer, head = lab[5:].split(".")
            by_layer.setdefault(int(layer), []).append(int(head))
        full = max(len(h) for h in by_layer.values())
        for layer, heads in by_layer.items():
            if heads != list(range(full)):
                raise ValueError(
                    f"heads() lays heads out as [L, h], but layer {layer} has only heads {heads} "
                    "(prune_heads removed the others): read its heads by label from labels and values"
                )
        return torch.stack([v for _, v in found]).view(len(by_layer), full, self.values.shape[1])

    def top(self, n: int = 10, row: int = 0) -> list[tuple[str, float]]:
        """The ``n`` parts of largest |value| in batch row ``row``, largest first."""
        order = self.values[:, row].abs().argsort(descending=True)[:n]
        return [(self.labels[i], float(self.values[i, row])) for i in order.tolist()]


def check_token(name: str, token, vocab: int) -> int:
    """``token`` as an int id in ``0..vocab-1`` (a Python or NumPy integer or a 0-d integer tensor)."""
    try:
        token = as_index(name, token)
    except ValueError:
        raise ValueError(f"{name} must be a token id (an integer) in 0..{vocab - 1}, got {token!r}") from None
    if not 0 <= token < vocab:
        raise ValueError(f"{name} must be a token id in 0..{vocab - 1}, got {token!r}")
    return token


@torch.no_grad()
def logit_attribution(
    model, ids: Tensor, target: int, wrong: int | None = None, *, position: int = -1, heads: bool = True
) -> Attribution:
    """Direct logit attribution of the logit of ``target`` (minus that of ``wrong``) at ``position``
    of ``ids [B, T]`` to every part of :func:`decompose_resid` (module doc: the final norm's scale
    frozen). The parts' sum is the logit (difference) the model computes, to float rounding."""
    check_decoder(model)
    vocab = model.lm_head.weight.shape[0]
    target = check_token("target", target, vocab)
    if wrong is not None:
        wrong = check_token("wrong", wrong, vocab)
    position = check_position(position, check_ids(ids).shape[1])
    logits, cache = run_with_cache(model, ids)
    parts = decompose_resid(model, cache, heads=heads)
    u = model.lm_head.weight[target]  # [d]
    if wrong is not None:
        u = u - model.lm_head.weight[wrong]
    u = u.to(logits.dtype)
    stack = parts.stack[:, :, position]  # [n, B, d]
    scale = cache[FINAL_SCALE][:, position]  # [B, 1]
    values = frozen_final_norm(model, stack, scale) @ u  # [n, B]
    labels = list(parts.labels)
    bias = getattr(model.norm, "bias", None)
    if bias is not None:
        labels.append("final_norm bias")
        values = torch.cat([values, (bias.to(u.dtype) @ u).expand(1, values.shape[1])])
    logit = logits[:, position, target] - (logits[:, position, wrong] if wrong is not None else 0.0)
    return Attribution(labels, values, logit, target, wrong, position)


@torch.no_grad()
def accumulated_attribution(
    model, ids: Tensor, target: int, wrong: int | None = None, *, position: int = -1
) -> tuple[list[str], Tensor]:
    """The accumulated residual stream (:func:`accumulated_resid`) read as the logit of ``target``
    (minus ``wrong``) through the final norm frozen at the real run's scale, plus its bias:
    ``(labels, values [n, B])``; the last, ``final_post``, is the model's logit (difference)."""
    check_decoder(model)
    vocab = model.lm_head.weight.shape[0]
    target = check_token("target", target, vocab)
    u = model.lm_head.weight[target]  # [d]
    if wrong is not None:
        u = u - model.lm_head.weight[check_token("wrong", wrong, vocab)]
    position = check_position(position, check_ids(ids).shape[1])
    _, cache = run_with_cache(model, ids)
    acc = accumulated_resid(model, cache)
    scale = cache[FINAL_SCALE][:, position]  # [B, 1]
    values = frozen_final_norm(model, acc.stack[:, :, position], scale) @ u.to(scale.dtype)  # [n, B]
    bias = getattr(model.norm, "bias", None)
    if bias is not None:
        values = values + bias.to(u.dtype) @ u
    return acc.labels, values
