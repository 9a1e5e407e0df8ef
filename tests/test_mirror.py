"""``attnlab.nn`` mirrors ``attnlab.ref`` file by file: the same file names, and the same function
names (in the same-named files) where both implement the same thing, with the same numbers."""

from __future__ import annotations

import pkgutil

import numpy as np
import torch

import attnlab.nn
import attnlab.ref
from attnlab import nn as engine
from attnlab import ref

# functions both halves implement under one name (the README's "mirror" claim)
MIRRORED = (
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "causal_mask",
    "elu_feature_map",
    "flash_attention",
    "linear_attention",
    "merge_heads",
    "padding_mask",
    "selective_scan",
    "sinusoidal_positions",
    "sliding_window_mask",
    "sparse_pattern_mask",
    "split_heads",
)


def _files(pkg) -> set[str]:
    return {m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")}


def test_files_mirror():
    only_ref = _files(attnlab.ref) - _files(attnlab.nn)
    only_nn = _files(attnlab.nn) - _files(attnlab.ref)
    assert only_ref == {"softmax"}  # the engine uses PyTorch's softmax
    # modules only: block config, hooks and their non-finite check, rolling and static KV caches; the
    # block-sparse kernel (its patterns mirror ref/masks.py's sparse_pattern_mask); the SSM layer
    # (a module around the scan that mirrors ref/linear.py's selective_scan)
    assert only_nn <= {
        "config",
        "hooks",
        "nonfinite",
        "rolling_cache",
        "sparse",
        "state_space",
        "static_cache",
    }


def test_same_names_in_same_files():
    for name in MIRRORED:
        r, n = getattr(ref, name), getattr(engine, name)
        assert r.__module__.rsplit(".", 1)[-1] == n.__module__.rsplit(".", 1)[-1], name


def test_sinusoidal_positions_agree():
    np.testing.assert_allclose(
        engine.sinusoidal_positions(20, 16).numpy(), ref.sinusoidal_positions(20, 16), atol=1e-12
    )


def test_split_and_merge_heads_agree():
    x = np.random.default_rng(0).normal(size=(2, 5, 12))  # [B, T, h*d_h]
    split = engine.split_heads(torch.from_numpy(x), 3)  # [B, h, T, d_h]
    np.testing.assert_array_equal(split.numpy(), ref.split_heads(x, 3))
    np.testing.assert_array_equal(engine.merge_heads(split).numpy(), ref.merge_heads(ref.split_heads(x, 3)))
    np.testing.assert_array_equal(engine.merge_heads(split).numpy(), x)


def test_params_from_attnlab_round_trip():
    """The converter the engine tests use, now in src: nn layers run through ref equal the layers."""
    from attnlab.audit import ModelSpec
    from attnlab.audit.build import build

    torch.manual_seed(0)
    stack = build(ModelSpec.from_sizes(d_model=16, heads=4, d_ff=32, layers=2, kv_heads=2)).double()
    x = np.random.default_rng(1).normal(size=(2, 5, 16))  # [B, T, d]
    with torch.no_grad():
        expected = stack(torch.from_numpy(x)).numpy()  # [B, T, d]
    h = x
    for layer in stack.layers:
        h = ref.encoder_layer(h, ref.params_from_attnlab(layer), 4, num_kv_heads=2)
    np.testing.assert_allclose(h, expected, atol=1e-10)
    assert (
        ref.params_from_torch(stack.layers[0].self_attn).keys()
        == ref.params_from_attnlab(stack.layers[0].self_attn).keys()
    )
