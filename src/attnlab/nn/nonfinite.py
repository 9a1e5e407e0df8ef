"""Finding where a NaN or an infinity is born: :func:`detect_nonfinite` checks every hook point.

NaN inputs propagate through ``attnlab.nn`` as they do through PyTorch (checking every forward
would cost a device synchronisation per tensor). When a model's output is non-finite, run it once
inside ``with detect_nonfinite(model):`` (or with ``ATTNLAB_DETECT_NONFINITE=1`` in the
environment, which every model attnlab builds or loads honours) and the first point, in forward
order, whose tensor holds a NaN or an infinity raises :class:`NonFiniteError` naming it::

    non-finite value first at blocks.1.self_attn.scores (3 of 512 entries are inf)

Models with hook points (``model.hook_points()``: GPT, the Transformer, BERT, every layer) are
checked at each point; any other module (the RNN models) at each submodule's output. Nothing is
hooked outside the ``with`` block, so it costs nothing when unused.

Weights are checked once, when a model is loaded (:func:`mark_nonfinite_weights`, by
``attnlab.models.load`` and the training checkpoint reader), never per forward: the names of the
tensors holding NaN or infinity are kept on the model, analyses warn
(:class:`NonFiniteWeightsWarning`) and generation and training refuse through
:func:`require_finite_weights`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from attnlab.nn.hooks import HookPoints, _walk, add_hook, remove_hook

ENV = "ATTNLAB_DETECT_NONFINITE"


class NonFiniteError(FloatingPointError, ValueError):
    """A hook point (or submodule output) held a NaN or an infinity; the message names the first."""


def describe_nonfinite(t: Tensor) -> str | None:
    """``"3 of 512 entries are inf"`` (or ``"... are non-finite: 2 nan, 1 -inf"``) for a floating
    tensor of any shape ``[...]`` holding a NaN or an infinity; None when every entry is finite (or
    the tensor is not floating point)."""
    if not (t.is_floating_point() or t.is_complex()):
        return None
    bad = ~torch.isfinite(t)  # [...] bool
    n = int(bad.sum())  # one synchronisation per point: the price of the debugging mode
    if n == 0:
        return None
    real = torch.view_as_real(t) if t.is_complex() else t
    kinds = {
        "nan": int(torch.isnan(real).sum()),
        "inf": int((real == float("inf")).sum()),
        "-inf": int((real == float("-inf")).sum()),
    }
    present = [f"{count} {kind}" for kind, count in kinds.items() if count]
    if len(present) == 1:
        return f"{n} of {t.numel()} entries are {present[0].split(' ', 1)[1]}"
    return f"{n} of {t.numel()} entries are non-finite: {', '.join(present)}"


class NonFiniteWeightsWarning(UserWarning):
    """A model was loaded whose weights hold NaN or infinity: what it computes will too."""


def find_nonfinite_weights(tensors: Mapping[str, Tensor] | nn.Module) -> tuple[str, ...]:
    """``("model.layers.0.self_attn.q_proj.weight (2304 of 2304 entries are nan)", ...)``: each
    floating tensor of ``tensors`` (a state dict by the names its file uses, or a module's
    parameters and buffers) holding a NaN or an infinity, in order; ``()`` when all are finite.
    One pass over the weights (each tensor ``[...]``, any shape): call it once, at load."""
    if isinstance(tensors, nn.Module):
        tensors = dict(tensors.named_parameters()) | dict(tensors.named_buffers())
    found = []
    for name, t in tensors.items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            found.append(f"{name} ({describe_nonfinite(t)})")
    return tuple(found)


def mark_nonfinite_weights(model: nn.Module, tensors: Mapping[str, Tensor] | None = None) -> tuple[str, ...]:
    """Record on ``model`` (its ``nonfinite_weights``) and return :func:`find_nonfinite_weights` of
    ``tensors`` (the state dict it was loaded from, ``{name: [...]}``, so the names are the file's),
    else of ``model``."""
    found = find_nonfinite_weights(model if tensors is None else tensors)
    model.nonfinite_weights = found
    return found


def say_nonfinite_weights(found: tuple[str, ...]) -> str:
    """``"tensor NAME (3 of 512 entries are nan)"`` and how many more, for a message (``found``: the
    names :func:`find_nonfinite_weights` gave, of tensors ``[...]`` of any shape)."""
    more = f" and {len(found) - 1} more tensor{'s' * (len(found) > 2)}" if len(found) > 1 else ""
    return f"tensor {found[0]}{more}"


def require_finite_weights(model: nn.Module, what: str = "generate") -> None:
    """A :class:`NonFiniteError` (a ``ValueError``) naming the first tensor if ``model`` was loaded
    with weights holding NaN or infinity (as :func:`mark_nonfinite_weights` recorded: no pass over the
    weights ``[...]`` here); nothing for a model built in memory or with finite weights."""
    found = getattr(model, "nonfinite_weights", ())
    if found:
        raise NonFiniteError(
            f"cannot {what}: the weights hold NaN or infinity, {say_nonfinite_weights(found)}"
        )


def _checker(name: str) -> Callable[[Tensor], None]:
    def check(t: Tensor) -> None:
        what = describe_nonfinite(t)
        if what is not None:
            raise NonFiniteError(f"non-finite value first at {name} ({what})")

    return check


def _install(model: nn.Module) -> Callable[[], None]:
    """Hook a finiteness check onto every point of ``model``; returns the function that removes them."""
    if isinstance(model, HookPoints):
        added = []
        for name, (module, point) in _walk(model):
            fn = _checker(name)
            add_hook(module, point, fn)
            added.append((module, point, fn))

        def undo() -> None:
            for module, point, fn in added:
                remove_hook(module, point, fn)

        return undo
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    handles = []
    for name, module in model.named_modules():
        check = _checker(name or type(model).__name__)

        def on_output(_m, _inputs, output, check=check) -> None:
            for t in output if isinstance(output, (tuple, list)) else (output,):
                if isinstance(t, Tensor):
                    check(t)

        handles.append(module.register_forward_hook(on_output))
    return lambda: [h.remove() for h in handles]


@contextmanager
def detect_nonfinite(model: nn.Module) -> Iterator[None]:
    """Inside the ``with`` block, every forward of ``model`` checks each hook point's tensor (in its
    declared shape, e.g. ``blocks.1.self_attn.scores [B, h, T_q, T_k]``) in forward order, and raises
    :class:`NonFiniteError` at the first holding a NaN or an infinity, naming the point and how many
    of its entries are which. Checking ``scores`` or ``weights`` runs attention on its explicit path
    (the fused kernel never forms them)."""
    undo = _install(model)
    try:
        yield
    finally:
        undo()


def _enabled_by_env() -> bool:
    """True when ``ATTNLAB_DETECT_NONFINITE`` is set to anything but ``""``, ``0``, ``false`` or ``no``."""
    return os.environ.get(ENV, "").strip().lower() not in ("", "0", "false", "no")


def detect_from_env(model: nn.Module) -> nn.Module:
    """``model``, with the checks of :func:`detect_nonfinite` (every point's ``[...]`` tensor)
    installed for good when ``ATTNLAB_DETECT_NONFINITE`` is set (to anything but ``0``, ``false``,
    ``no``); otherwise untouched."""
    if _enabled_by_env():
        _install(model)
    return model
