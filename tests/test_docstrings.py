"""House rule: every public function of attnlab.ref and attnlab.nn (and every module's forward)
has its own docstring naming its equation and shapes; here, at least one ``[...]`` shape."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import torch

import attnlab.nn
import attnlab.ref

# functions whose arguments and results are modules, not tensors: no shape to name
NO_TENSORS = {"attnlab.nn.convert"}


def _public():
    for pkg in (attnlab.ref, attnlab.nn):
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name.startswith("_"):
                continue
            mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
            for name, obj in vars(mod).items():
                if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                    continue
                if inspect.isfunction(obj):
                    yield f"{mod.__name__}.{name}", obj, mod.__name__ not in NO_TENSORS
                elif inspect.isclass(obj):
                    yield f"{mod.__name__}.{name}", obj, False
                    if issubclass(obj, (torch.nn.Module, torch.autograd.Function)) and "forward" in vars(obj):
                        yield f"{mod.__name__}.{name}.forward", vars(obj)["forward"], True


PUBLIC = list(_public())


def test_the_walk_finds_the_api():
    names = {n for n, _, _ in PUBLIC}
    assert "attnlab.ref.attention.scaled_dot_product_attention" in names
    assert "attnlab.nn.layers.FeedForward.forward" in names and len(names) > 60


@pytest.mark.parametrize("name, obj, shapes", PUBLIC, ids=[n for n, _, _ in PUBLIC])
def test_public_api_has_its_own_docstring_with_shapes(name, obj, shapes):
    fn = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
    doc = fn.__doc__  # its own, not one inherited from torch.nn.Module
    assert doc and doc.strip(), f"{name} has no docstring"
    if shapes:
        assert "[" in doc, f"{name}'s docstring names no shape"
