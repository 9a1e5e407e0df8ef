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

Heads are named one way in this package: ``(layer, head)``, integers from 0 (a NumPy integer or a
0-d integer tensor will do; a float, a bool or a negative number will not), or the string
``"layer.head"``. ``layer`` counts within one attention stack (:func:`attention_layers`): a model
with several (a Transformer's encoder self-attention, decoder self-attention and cross-attention)
needs ``stack=``. ``head`` is the head's number in the unpruned model, also after
:func:`attnlab.interp.prune_heads` (each cut layer records ``kept_heads``).
"""

from __future__ import annotations

import contextlib
import numbers
import re
from collections.abc import Callable, Iterable, Iterator

import torch
from torch import Tensor

from attnlab._checks import did_you_mean
from attnlab.nn.hooks import patch
from attnlab.nn.multihead import MultiHeadAttention

_NUMBER = re.compile(r"(^|\.)\d+(?=\.|$)")  # a layer's number inside a module path: ``blocks.3.self_attn``
_HEAD = re.compile(r"(\d+)\.(\d+)")  # the library's spelling of a head: ``"1.3"``


def stack_name(path: str) -> str:
    """The stack a module path belongs to: its layer number replaced by ``*``
    (``decoder.layers.1.cross_attn`` -> ``decoder.layers.*.cross_attn``)."""
    return _NUMBER.sub(r"\1*", path)


def as_index(name: str, value) -> int:
    """``value`` as an ``int``: a Python or NumPy integer or a 0-d integer tensor; a bool, a float,
    a string or a longer tensor is a ``ValueError`` naming ``name``."""
    if isinstance(value, Tensor):
        d = value.dtype
        if value.ndim == 0 and not (d.is_floating_point or d.is_complex or d == torch.bool):
            return int(value)
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    raise ValueError(f"{name} must be an integer, got {value!r}")


def parse_head(head, name: str = "head") -> tuple[int, int]:
    """``(layer, head)`` from a pair of integers (:func:`as_index`) or the library's own spelling
    ``"layer.head"`` (``"0.1"``). Both count from 0; a negative number is a ``ValueError`` (a head is
    a name here, not a Python index)."""
    if isinstance(head, str):
        found = _HEAD.fullmatch(head.strip())
        if found is None:
            raise ValueError(
                f"{name} {head!r} is not a head: write 'layer.head' (e.g. '0.1') or a pair (0, 1)"
            )
        return int(found[1]), int(found[2])
    if not isinstance(head, (tuple, list)) or len(head) != 2:
        raise ValueError(f"{name} must be a pair (layer, head) or 'layer.head', got {head!r}")
    layer, index = (
        as_index(f"{name} {tuple(head)!r}: the layer", head[0]),
        as_index(f"{name} {tuple(head)!r}: the head", head[1]),
    )
    if layer < 0 or index < 0:
        raise ValueError(f"{name} {tuple(head)!r}: layers and heads count from 0 (no negative indices)")
    return layer, index


def attention_stacks(model: torch.nn.Module) -> dict[str, list[tuple[str, MultiHeadAttention]]]:
    """Every :class:`~attnlab.nn.MultiHeadAttention` of ``model`` by stack (:func:`stack_name`, the
    names :func:`attnlab.interp.read.attention` takes), ``(qualified name, module)`` in module order:
    a GPT has ``blocks.*.self_attn``, BERT ``layers.*.self_attn``, a Transformer
    ``encoder.layers.*.self_attn``, ``decoder.layers.*.self_attn`` and ``decoder.layers.*.cross_attn``."""
    found: dict[str, list[tuple[str, MultiHeadAttention]]] = {}
    for n, m in model.named_modules():
        if isinstance(m, MultiHeadAttention):
            found.setdefault(stack_name(n), []).append((n, m))
    if not found:
        raise ValueError(f"{type(model).__name__} has no attnlab MultiHeadAttention layer")
    return found


def attention_layers(
    model: torch.nn.Module, stack: str | None = None
) -> list[tuple[str, MultiHeadAttention]]:
    """The layers of one attention stack of ``model`` (:func:`attention_stacks`), ``(qualified name,
    module)`` in order: layer ``l`` of every ``(layer, head)`` index in this package is entry ``l``
    (GPT: ``blocks.{l}.self_attn``; BERT: ``layers.{l}.self_attn``). A model with several stacks (a
    Transformer) needs ``stack``: its layers then count from 0 within that stack, as
    ``attnlab heads`` and :func:`attnlab.interp.scan.scan_text` number each view's layers."""
    stacks = attention_stacks(model)
    if stack is None:
        if len(stacks) > 1:
            raise ValueError(
                f"{type(model).__name__} has {len(stacks)} attention stacks ({', '.join(stacks)}): pass "
                "stack= one of them (its layers count from 0)"
            )
        return next(iter(stacks.values()))
    if stack not in stacks:
        raise ValueError(f"stack must be one of {list(stacks)}, got {stack!r}{did_you_mean(stack, stacks)}")
    return stacks[stack]


def kept_heads(attn: MultiHeadAttention) -> tuple[int, ...]:
    """The original numbers of ``attn``'s heads, in order: ``0..h-1``, or the ones
    :func:`attnlab.interp.prune_heads` kept."""
    return tuple(range(attn.num_heads)) if attn.kept_heads is None else attn.kept_heads


def refuse_pruned(model: torch.nn.Module, tool: str) -> None:
    """A ``ValueError`` naming the first layer :func:`attnlab.interp.prune_heads` cut, for ``tool``s
    that lay heads out as a layer x head grid (they need every head of every layer)."""
    for name, m in model.named_modules():
        if isinstance(m, MultiHeadAttention) and m.kept_heads is not None:
            raise ValueError(
                f"{tool} lays heads out as a layer x head grid, but prune_heads removed heads of {name} "
                f"(it keeps heads {list(m.kept_heads)} of {m.config.num_heads}): run it on the unpruned "
                "model (mask_heads or ablate_heads give the pruned outputs)"
            )


def _head_position(layers, head) -> tuple[int, int, int]:
    """``(layer, head, position)``: ``head`` parsed (:func:`parse_head`) and checked against
    ``layers``, and its position in its layer's ``z [B, T, h, d_k]`` (after pruning, not its number)."""
    layer, index = parse_head(head)
    if layer >= len(layers):
        stack = stack_name(layers[0][0])
        raise ValueError(
            f"layer {layer} is out of range: the model has {len(layers)} attention layers ({stack})"
        )
    name, attn = layers[layer]
    kept = kept_heads(attn)
    if index in kept:
        return layer, index, kept.index(index)
    if attn.kept_heads is not None and index < attn.config.num_heads:
        raise ValueError(f"head {layer}.{index} was removed by prune_heads: {name} keeps heads {list(kept)}")
    raise ValueError(f"head {index} is out of range: layer {layer} has {len(kept)} heads ({name})")


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
    heads: Iterable,
    means: dict[tuple[int, int], Tensor] | None = None,
    *,
    stack: str | None = None,
) -> Iterator[None]:
    """Within the block, heads ``(layer, head)`` of ``model`` write nothing (zero ablation: ``z_h := 0``)
    or, with ``means[(layer, head)] [d_k]`` (e.g. the head's mean output over a dataset), that
    constant (mean ablation: ``z_h := E[z_h]``). A head is a pair of integers or ``"layer.head"``
    (:func:`parse_head`); layers index :func:`attention_layers` (of ``stack`` when the model has
    several), heads their original numbers (after :func:`attnlab.interp.prune_heads` too). Each
    ablated layer's hook point ``z [B, T, h, d_k]`` is patched (:func:`attnlab.nn.patch`), and the
    weights are never touched."""
    layers = attention_layers(model, stack)
    by_layer: dict[int, dict[int, Tensor | None]] = {}
    for head in heads:
        layer, index, position = _head_position(layers, head)
        by_layer.setdefault(layer, {})[position] = None if means is None else means[(layer, index)]
    with contextlib.ExitStack() as stack_:
        for layer, values in by_layer.items():
            stack_.enter_context(patch(layers[layer][1], {"z": _set_heads(values)}))
        yield


def head_importance(
    model: torch.nn.Module,
    loss_fn: Callable[[torch.nn.Module, object], Tensor],
    batches: Iterable,
    *,
    stack: str | None = None,
) -> Tensor:
    """Michel et al.'s importance ``I [L, h]`` of the layers of :func:`attention_layers` (``stack``):
    Σ over ``batches`` of |∂L/∂ξ_h| at ξ = 1, each layer's row divided by its L2 norm.
    ``loss_fn(model, batch)`` returns the scalar loss of one batch."""
    refuse_pruned(model, "head_importance")
    layers = attention_layers(model, stack)
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
