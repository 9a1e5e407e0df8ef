"""Pruning heads: remove them from the weights, and the importance-ordered pruning curve.

Removing head h of a layer deletes its ``d_k`` rows of W^Q, W^K, W^V (their outputs, and biases) and
its ``d_k`` rows of W^O (inputs; torch stores them as columns of ``out_proj.weight``). The layer then
computes exactly what it computed with the head's output zeroed (``ablate_heads``): the saving per
head is ``4 d_model d_k`` weights and ``3 d_k`` biases (W^O's bias stays). A layer keeps at least one
head: removing all of them is refused (the layer would only add its W^O bias).

:func:`pruning_curve` removes heads least important first (Michel et al. 2019) or in a random
order, and evaluates a metric at 0, 10, ..., 90% of the heads removed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
from torch import nn

from attnlab.interp.ablation import _check_head, attention_layers


def _keep_rows(linear: nn.Linear, rows: torch.Tensor) -> nn.Linear:
    """A new Linear with only output rows ``rows`` of ``linear`` (``weight [out, in]``)."""
    new = nn.Linear(linear.in_features, len(rows), bias=linear.bias is not None)
    with torch.no_grad():
        new.weight.copy_(linear.weight[rows])  # [len(rows), in]
        if linear.bias is not None:
            new.bias.copy_(linear.bias[rows])
    return new.to(linear.weight.device, linear.weight.dtype)


def _keep_cols(linear: nn.Linear, cols: torch.Tensor) -> nn.Linear:
    """A new Linear with only input columns ``cols`` of ``linear`` (bias unchanged)."""
    new = nn.Linear(len(cols), linear.out_features, bias=linear.bias is not None)
    with torch.no_grad():
        new.weight.copy_(linear.weight[:, cols])  # [out, len(cols)]
        if linear.bias is not None:
            new.bias.copy_(linear.bias)
    return new.to(linear.weight.device, linear.weight.dtype)


def prune_heads(model: nn.Module, heads: Sequence[tuple[int, int]]) -> nn.Module:
    """Remove heads ``(layer, head)`` (indices of :func:`attention_layers`, as in the unpruned model)
    from ``model``'s weights, in place; returns ``model``. GQA layers are refused (a key/value head
    serves several query heads)."""
    layers = attention_layers(model)
    by_layer: dict[int, set[int]] = {}
    for layer, head in heads:
        _check_head(layers, layer, head)
        by_layer.setdefault(layer, set()).add(head)
    for layer, drop in by_layer.items():
        name, attn = layers[layer]
        if attn.num_kv_heads != attn.num_heads:
            raise ValueError(
                f"layer {layer} ({name}) uses GQA ({attn.num_kv_heads} key/value heads): cannot prune"
            )
        keep = [h for h in range(attn.num_heads) if h not in drop]
        if not keep:
            raise ValueError(
                f"cannot remove all {attn.num_heads} heads of layer {layer}: keep at least one "
                f"(the layer would only add its W^O bias)"
            )
        d_k = attn.d_k
        index = torch.tensor([h * d_k + i for h in keep for i in range(d_k)])  # [len(keep) d_k]
        attn.q_proj = _keep_rows(attn.q_proj, index)  # [len(keep) d_k, d_model]
        attn.k_proj = _keep_rows(attn.k_proj, index)
        attn.v_proj = _keep_rows(attn.v_proj, index)
        attn.out_proj = _keep_cols(attn.out_proj, index)  # [d_model, len(keep) d_k]
        attn.num_heads = attn.num_kv_heads = len(keep)
    return model


def removal_order(importance: torch.Tensor, *, random_seed: int | None = None) -> list[tuple[int, int]]:
    """Heads ``(layer, head)`` of ``importance [L, h]`` least important first, or in a seeded random
    order; each layer's last head is left out (it cannot be removed)."""
    layers, heads = importance.shape
    if random_seed is None:
        order = importance.flatten().argsort().tolist()
    else:
        order = torch.randperm(layers * heads, generator=torch.Generator().manual_seed(random_seed)).tolist()
    left = dict.fromkeys(range(layers), heads)
    out = []
    for i in order:
        layer, head = divmod(i, heads)
        if left[layer] > 1:
            left[layer] -= 1
            out.append((layer, head))
    return out


def pruning_curve(
    model: nn.Module,
    order: Sequence[tuple[int, int]],
    metric: Callable[[nn.Module], dict],
    fractions: Sequence[float] = tuple(i / 10 for i in range(10)),
) -> list[dict]:
    """``metric(pruned copy)`` with the first ``round(f * total heads)`` heads of ``order`` removed,
    for each fraction f; each row also gives ``fraction``, ``removed`` and ``params``."""
    total = sum(a.num_heads for _, a in attention_layers(model))
    rows = []
    for f in fractions:
        n = min(round(f * total), len(order))
        pruned = prune_heads(copy.deepcopy(model), order[:n])
        rows.append(
            {
                "fraction": f,
                "removed": n,
                "params": sum(p.numel() for p in pruned.parameters()),
                **metric(pruned),
            }
        )
    return rows
