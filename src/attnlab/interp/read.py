"""Read a model's attention through its hook points: one way for every model and every tool.

Every attention layer of an attnlab model declares the hook point ``weights`` (``[B, h, T_q, T_k]``,
A = softmax(Q K^T / sqrt(d_k) + M), each row summing to one over the keys); an attention RNN
declares its alignment ``attention.weights`` (``[B, T, S]``, alpha_ti). A point's name is the
module path of the layer that owns it, so the layers of one stack differ only in their number:
``blocks.0.self_attn.weights``, ``blocks.1.self_attn.weights``, ... form the stack
``blocks.*.self_attn``. :func:`attention_maps` runs the model once under
:func:`attnlab.nn.capture` and returns each stack's weights stacked over its layers; only the
captured layers leave the fused kernel (see :mod:`attnlab.nn.hooks`). No model kind is named here:
a new model with hook points is read the same way.
"""

from __future__ import annotations

import dataclasses
import inspect

import torch
from torch import Tensor

from attnlab._checks import did_you_mean
from attnlab.interp.ablation import stack_name
from attnlab.nn.hooks import HookPoints, capture, resolve


@dataclasses.dataclass
class AttentionMaps:
    """One stack's attention on one batch.

    ``stack``: the points' common name with ``*`` for the layer number (``"decoder.layers.*.cross_attn"``);
    ``layers``: each layer's module path (``"decoder.layers.0"``, ...); ``weights``: ``[L, B, h, T_q, T_k]``
    (an RNN's alignment ``[B, T, S]`` is one layer with one head); ``cross``: queries and keys come from
    different sequences (cross-attention, or a recurrent decoder's alignment over the source);
    ``causal``: measured, every weight above the diagonal is exactly 0 (``T_q == T_k``).
    """

    stack: str
    layers: list[str]
    weights: Tensor
    cross: bool

    @property
    def causal(self) -> bool:
        """No query puts weight on a later key: ``A[..., i, j] == 0`` for every ``j > i``."""
        t_q, t_k = self.weights.shape[-2:]
        if self.cross or t_q != t_k:
            return False
        above = torch.ones(t_q, t_k, dtype=torch.bool, device=self.weights.device).triu(1)  # [T, T]
        return not bool(self.weights[..., above].any())


def _layer(point: str) -> str:
    """The module path of the layer that owns ``point``: ``blocks.0.self_attn.weights`` -> ``blocks.0``
    (the attention's parent); an RNN's ``attention.weights`` -> ``attention``."""
    parts = point.split(".")
    return ".".join(parts[:-2]) if len(parts) > 2 else parts[0]


def weight_points(model) -> dict[str, list[str]]:
    """The attention-weight points of ``model`` by stack, in forward order:
    ``{"encoder.layers.*.self_attn": ["encoder.layers.0.self_attn.weights", ...], ...}``. A model
    without one (a fixed-context RNN, a state-space GPT) is a ``ValueError``."""
    points = model.hook_points() if isinstance(model, HookPoints) else {}
    groups: dict[str, list[str]] = {}
    for name in points:
        if name.rsplit(".", 1)[-1] == "weights":
            groups.setdefault(stack_name(name.removesuffix(".weights")), []).append(name)
    if not groups:
        raise ValueError(
            f"{type(model).__name__} has no attention weights to read (no 'weights' hook point: "
            "a fixed-context RNN or a state-space model has none)"
        )
    return groups


def cross_stacks(model) -> list[str]:
    """The stacks of :func:`weight_points` whose queries and keys come from different sequences
    (their layers were built as cross-attention, or the point is a ``[B, T, S]`` alignment)."""
    groups = weight_points(model)  # refuses a model without attention weights
    points = model.hook_points()
    out = []
    for stack, names in groups.items():
        (_, module, _), *_ = resolve(model, names[:1])
        if getattr(module, "cross_attention", False) or points[names[0]].count(",") == 2:
            out.append(stack)
    return out


def attention_maps(model, *inputs, **kwargs) -> list[AttentionMaps]:
    """Run ``model(*inputs, **kwargs)`` once (no gradients; the caller sets eval mode) capturing every
    attention-weight point; one :class:`AttentionMaps` per stack, in forward order.

    A stack whose layers have different numbers of heads (after :func:`attnlab.interp.prune_heads`)
    cannot be stacked: capture its points with :func:`attnlab.nn.capture` instead.
    """
    groups = weight_points(model)
    cross = set(cross_stacks(model))
    _check_inputs(model, inputs, kwargs)
    with torch.no_grad(), capture(model, [n for names in groups.values() for n in names]) as cache:
        model(*inputs, **kwargs)
    out = []
    for stack, names in groups.items():
        missing = [n for n in names if n not in cache]
        if missing:
            raise ValueError(f"the forward did not reach {missing[0]} (no attention weights formed there)")
        per_layer = [cache[n] if cache[n].ndim == 4 else cache[n][:, None] for n in names]  # [B, h, T_q, T_k]
        heads = {w.shape[1] for w in per_layer}
        if len(heads) > 1:
            raise ValueError(
                f"the layers of {stack} have {sorted(heads)} heads: capture {stack}.weights layer by layer"
            )
        weights = torch.stack(per_layer)  # [L, B, h, T_q, T_k]
        out.append(AttentionMaps(stack, [_layer(n) for n in names], weights, stack in cross))
    return out


def attention(model, *inputs, stack: str | None = None, **kwargs) -> Tensor:
    """The attention weights ``[L, B, h, T_q, T_k]`` of one stack of ``model`` on ``inputs``:
    the only one (a GPT's ``blocks.*.self_attn``, BERT's ``layers.*.self_attn``) or the one named
    (a Transformer's ``encoder.layers.*.self_attn``, ``decoder.layers.*.self_attn``,
    ``decoder.layers.*.cross_attn``). E.g. ``attention(gpt, ids)[1, :, 3]`` is head ``1.3``'s
    ``[B, T, T]``. A ``ValueError`` names what is missing: ``stack`` when the model has several, an
    input its forward needs (an encoder-decoder's target ``tgt_in [B, T_tgt]``)."""
    stacks = list(weight_points(model))
    _check_inputs(model, inputs, kwargs)
    if stack is None and len(stacks) > 1:
        raise ValueError(
            f"{type(model).__name__} has {len(stacks)} attention stacks ({', '.join(stacks)}): pass "
            "stack= the one to read"
        )
    if stack is not None and stack not in stacks:
        raise ValueError(f"stack must be one of {stacks}, got {stack!r}{did_you_mean(stack, stacks)}")
    maps = {m.stack: m for m in attention_maps(model, *inputs, **kwargs)}
    return maps[stacks[0] if stack is None else stack].weights


def _check_inputs(model, inputs: tuple, kwargs: dict) -> None:
    """A ``ValueError`` naming the arguments ``model``'s forward still needs (an encoder-decoder's
    target: ``attention(transformer, src)`` without ``tgt_in``), before it runs."""
    try:
        inspect.signature(model.forward).bind(*inputs, **kwargs)
    except TypeError as exc:
        params = inspect.signature(model.forward).parameters
        needed = [
            n
            for n, p in params.items()
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        missing = [n for n in needed[len(inputs) :] if n not in kwargs]
        if missing:
            raise ValueError(
                f"{type(model).__name__}.forward needs {', '.join(missing)} too: call "
                f"attention(model, {', '.join(needed)})"
            ) from None
        raise ValueError(f"{type(model).__name__} cannot run on these inputs: {exc}") from None
