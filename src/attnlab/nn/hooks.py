"""Named hook points: read or replace any intermediate tensor of a model, by name.

Each hookable module declares its points once, as the class constant ``POINTS`` (name -> shape),
and passes every such tensor through ``self._at(name, t)`` in ``forward``. A model's points are
named by where they sit: ``embed``, ``blocks.2.resid_pre``, ``blocks.2.self_attn.weights``,
``blocks.2.ffn.hidden``, ``final_norm``; ``model.hook_points()`` lists them with their shapes.

- :func:`capture` records the points asked for (glob patterns allowed) and nothing else;
- :func:`patch` replaces a point's value with a function of it (ablation, activation patching).

Both accept TransformerLens's names as aliases (``blocks.0.attn.hook_pattern``:
:mod:`attnlab.nn._tl_names`). Every norm has a point ``scale [B, T, 1]`` (1/sigma or 1/RMS:
``blocks.0.norm1.scale``, ``final_norm.scale``), for analyses that hold it fixed.

Nothing is hooked by default, and then ``_at`` returns its tensor at once: no copy, no extra
kernel. Capturing or patching ``scores``/``weights`` runs that one attention layer on its explicit
path (the fused kernel never forms the weights); every other layer keeps the fused path.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import ClassVar

from torch import Tensor, nn

import attnlab.nn._tl_names as tl_names

Hook = Callable[[Tensor], Tensor | None]  # returns a replacement, or None to keep the value


class HookPoints:
    """Mixin for modules with named points: ``POINTS`` (name -> shape), ``_at`` and
    ``_hook_children`` (the hookable submodules by name, e.g. ``{"self_attn": self.self_attn}``)."""

    POINTS: ClassVar[dict[str, str]] = {}
    _hooks: dict[str, list[Hook]] | None = None  # per instance only while something is hooked

    def _at(self, name: str, t: Tensor) -> Tensor:
        """``t`` after the hooks at point ``name`` (in the order they were added); ``t`` if none."""
        hooks = self._hooks
        if hooks is None:
            return t
        for fn in hooks.get(name, ()):
            out = fn(t)
            if out is not None:
                t = out
        return t

    def _points(self) -> dict[str, str]:
        """This instance's own points (a subclass may drop points it does not have)."""
        return self.POINTS

    def _hook_children(self) -> dict[str, nn.Module | None]:
        return {}

    def hook_points(self) -> dict[str, str]:
        """Every point of this module and its submodules, full name -> shape (``"[B, h, T_q, T_k]"``)."""
        return {name: module._points()[point] for name, (module, point) in _walk(self)}


def _walk(module: HookPoints, prefix: str = "") -> Iterator[tuple[str, tuple[HookPoints, str]]]:
    """``(full name, (owner module, point))`` for every point under ``module``, in forward order."""
    for point in module._points():
        yield prefix + point, (module, point)
    for name, child in module._hook_children().items():
        if isinstance(child, HookPoints):
            yield from _walk(child, f"{prefix}{name}.")


def add_hook(module: HookPoints, point: str, fn: Hook) -> None:
    """Run ``fn`` on ``module``'s point ``point`` at every forward until :func:`remove_hook`:
    ``fn(t)`` gets the tensor in its declared shape (``POINTS[point]``, e.g. ``[B, h, T_q, T_k]``)
    and returns a replacement of the same shape, or None to keep it."""
    if module.__dict__.get("_hooks") is None:
        module._hooks = {}
    module._hooks.setdefault(point, []).append(fn)


def remove_hook(module: HookPoints, point: str, fn: Hook) -> None:
    """Undo :func:`add_hook` (``fn`` on ``[...]``-shaped tensors); with no hook left the module is back
    on its unhooked path."""
    hooks = module._hooks[point]
    hooks.remove(fn)
    if not hooks:
        del module._hooks[point]
    if not module._hooks:
        del module._hooks  # the class default (None) again


def resolve(model: HookPoints, patterns: Iterable[str]) -> list[tuple[str, HookPoints, str]]:
    """``(full name, module, point)`` of every point matching one of ``patterns`` (``fnmatch`` globs:
    ``blocks.*.resid_post``, a ``[B, T, d_model]`` point; TransformerLens's names are aliases,
    :mod:`attnlab.nn._tl_names`). A pattern that matches nothing is a ``ValueError`` naming close
    matches."""
    if not isinstance(model, HookPoints):
        raise ValueError(f"model must be an attnlab module with hook points, got {type(model).__name__}")
    if isinstance(patterns, str):
        patterns = [patterns]
    points = dict(_walk(model))
    layers = tl_names.layer_prefix(points)
    found: dict[str, tuple[HookPoints, str]] = {}
    for given in patterns:
        pattern = tl_names.translate(given, layers)
        hits = [name for name in points if fnmatch.fnmatchcase(name, pattern)]
        if not hits:
            close = difflib.get_close_matches(pattern, list(points), n=3, cutoff=0.6)
            hint = f"did you mean {close}?" if close else f"{type(model).__name__}.hook_points() lists them"
            hint = tl_names.no_twin(given) or hint
            alias = f" (the TransformerLens alias of {pattern!r})" if pattern != given else ""
            raise ValueError(f"no hook point matches {given!r}{alias}; {hint}")
        found.update((name, points[name]) for name in hits)
    return [(name, module, point) for name, (module, point) in found.items()]


@contextmanager
def capture(model: HookPoints, names: Iterable[str], *, detach: bool = True) -> Iterator[dict[str, Tensor]]:
    """Record the points ``names`` (globs allowed) of every forward inside the ``with`` block.

    ``with capture(model, ["blocks.2.self_attn.weights", "blocks.*.resid_post"]) as cache:`` then
    ``cache["blocks.2.self_attn.weights"]`` is ``[B, h, T_q, T_k]``. Only the points asked for are kept
    (the last forward's value of each), detached from the graph unless ``detach=False``. The keys
    are attnlab's names; a TransformerLens alias reads as its twin (``cache["blocks.2.attn.hook_pattern"]``).
    """
    cache = tl_names.Cache()
    added = []
    try:
        found = resolve(model, names)
        cache.layers = tl_names.layer_prefix(name for name, _, _ in found)
        for name, module, point in found:

            def record(t: Tensor, name: str = name) -> None:
                cache[name] = t.detach() if detach else t

            add_hook(module, point, record)
            added.append((module, point, record))
        yield cache
    finally:
        for module, point, fn in added:
            remove_hook(module, point, fn)


@contextmanager
def patch(model: HookPoints, replacements: dict[str, Hook]) -> Iterator[None]:
    """Replace points' values inside the ``with`` block: ``{name or glob: fn}``, ``fn(t) -> t'``
    (same shape; return None to keep ``t``). E.g. zero the output of head 0.3 (head 3 of layer 0):
    ``patch(model, {"blocks.0.self_attn.z": lambda z: z.index_fill(2, torch.tensor([3]), 0.0)})``."""
    added = []
    try:
        for pattern, fn in replacements.items():
            for name, module, point in resolve(model, [pattern]):
                checked = _checked(name, fn)
                add_hook(module, point, checked)
                added.append((module, point, checked))
        yield
    finally:
        for module, point, fn in added:
            remove_hook(module, point, fn)


def _describe(t) -> str:
    """``"[1, 11, 32] float32"`` for a tensor (plus its device when not the CPU), else the type name."""
    if not isinstance(t, Tensor):
        return f"a {type(t).__name__}, not a torch tensor"
    where = "" if t.device.type == "cpu" else f" on {t.device}"
    return f"{list(t.shape)} {str(t.dtype).removeprefix('torch.')}{where}"


def _checked(name: str, fn: Hook) -> Hook:
    """``fn`` for point ``name``, refusing a replacement that is not a tensor of the input's shape,
    dtype and device (a ``[1, 1, d]`` result would otherwise broadcast into a wrong answer)."""

    def run(t: Tensor) -> Tensor | None:
        out = fn(t)
        if out is None or (
            isinstance(out, Tensor)
            and out.shape == t.shape
            and out.dtype == t.dtype
            and out.device == t.device
        ):
            return out
        raise ValueError(f"patch for {name} returned {_describe(out)}; expected {_describe(t)}")

    return run
