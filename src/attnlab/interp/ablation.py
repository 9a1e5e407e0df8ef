"""Head ablation by patching each head's output, and Michel et al.'s head importance on W^O.

A layer's output is ``out = Σ_h z_h W^O_h + b^O`` (``z_h [B, T, d_k]`` the output of head h, the
hook point ``self_attn.z [B, T, h, d_k]`` of its layer, and ``W^O_h [d_k, d_model]`` its block of
rows of W^O). So

- zero-ablating head h sets ``z_h := 0`` (the same as zeroing ``W^O_h``);
- mean-ablating it sets ``z_h := E[z_h]``, the mean over a dataset's positions;
- a head mask ξ (Michel et al. 2019, ``out = Σ_h ξ_h z_h W^O_h + b^O``) is ``W^O_h := ξ_h W^O_h``,
  and at ξ = 1 its gradient is ``∂L/∂ξ_h = Σ W^O_h ⊙ ∂L/∂W^O_h`` — one backward pass gives every
  head's importance ``I_h = Σ_batches |∂L/∂ξ_h|``, normalised per layer (L2 over its heads).

torch's ``nn.Linear`` stores W^O transposed (``out_proj.weight [d_model, h d_k]``), so head h's
block is the columns ``h d_k .. (h+1) d_k - 1`` there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator

import torch
from torch import Tensor

from attnlab.nn.hooks import patch
from attnlab.nn.multihead import MultiHeadAttention


def attention_layers(model: torch.nn.Module) -> list[tuple[str, MultiHeadAttention]]:
    """Every :class:`~attnlab.nn.MultiHeadAttention` of ``model``, ``(qualified name, module)`` in
    module order (GPT: ``blocks.{i}.self_attn``; BERT: ``layers.{i}.self_attn``)."""
    found = [(n, m) for n, m in model.named_modules() if isinstance(m, MultiHeadAttention)]
    if not found:
        raise ValueError(f"{type(model).__name__} has no attnlab MultiHeadAttention layer")
    return found


def _check_head(layers, layer: int, head: int) -> MultiHeadAttention:
    if not 0 <= layer < len(layers):
        raise ValueError(f"layer {layer} is out of range: the model has {len(layers)} attention layers")
    attn = layers[layer][1]
    if not 0 <= head < attn.num_heads:
        raise ValueError(f"head {head} is out of range: layer {layer} has {attn.num_heads} heads")
    return attn


def _set_heads(values: dict[int, Tensor | None]) -> Callable[[Tensor], Tensor]:
    """A patch of ``z [B, T, h, d_k]`` that sets head ``j`` to ``values[j]`` (``[d_k]``, or 0 for None)."""

    def fn(z: Tensor) -> Tensor:
        z = z.clone()
        for head, value in values.items():
            z[:, :, head] = 0.0 if value is None else value.to(z.dtype)
        return z

    return fn


@contextlib.contextmanager
def ablate_heads(
    model: torch.nn.Module,
    heads: Iterable[tuple[int, int]],
    means: dict[tuple[int, int], Tensor] | None = None,
) -> Iterator[None]:
    """Within the block, heads ``(layer, head)`` of ``model`` write nothing (zero ablation: ``z_h := 0``)
    or, with ``means[(layer, head)] [d_k]`` (e.g. the head's mean output over a dataset), that
    constant (mean ablation: ``z_h := E[z_h]``). Layers index :func:`attention_layers`; each
    ablated layer's hook point ``z [B, T, h, d_k]`` is patched (:func:`attnlab.nn.patch`), and the
    weights are never touched."""
    layers = attention_layers(model)
    by_layer: dict[int, dict[int, Tensor | None]] = {}
    for layer, head in heads:
        _check_head(layers, layer, head)
        by_layer.setdefault(layer, {})[head] = None if means is None else means[(layer, head)]
    with contextlib.ExitStack() as stack:
        for layer, values in by_layer.items():
            stack.enter_context(patch(layers[layer][1], {"z": _set_heads(values)}))
        yield


def head_importance(
    model: torch.nn.Module, loss_fn: Callable[[torch.nn.Module, object], Tensor], batches: Iterable
) -> Tensor:
    """Michel et al.'s importance ``I [L, h]``: Σ over ``batches`` of |∂L/∂ξ_h| at ξ = 1, each layer's
    row divided by its L2 norm. ``loss_fn(model, batch)`` returns the scalar loss of one batch."""
    layers = attention_layers(model)
    heads = layers[0][1].num_heads
    if any(a.num_heads != heads for _, a in layers):
        raise ValueError("head_importance needs the same number of heads in every layer")
    total = torch.zeros(len(layers), heads, dtype=torch.float64)
    params = [a.out_proj.weight for _, a in layers]
    for batch in batches:
        grads = torch.autograd.grad(loss_fn(model, batch), params)  # each [d_model, h d_k]
        for i, ((_, attn), w, g) in enumerate(zip(layers, params, grads)):
            per_head = (w.detach() * g).double().view(w.shape[0], heads, attn.d_k)  # [d_model, h, d_k]
            total[i] += per_head.sum(dim=(0, 2)).abs()  # |∂L/∂ξ_h| of this batch
    return total / total.norm(dim=1, keepdim=True).clamp_min(1e-30)
