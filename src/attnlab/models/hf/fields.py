"""Reading the fields of a Hugging Face ``config.json`` with one-line errors that name them."""

from __future__ import annotations

from typing import Any

from attnlab._rope_scaling import ROPE_TYPES, check_rope_scaling

# Hugging Face ``hidden_act`` / ``activation_function`` -> attnlab's activation (BlockConfig names).
ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}


def need(hf: dict[str, Any], key: str, source: str) -> Any:
    """``hf[key]``; a ``ValueError`` naming the file and the field when it is absent or null."""
    if hf.get(key) is None:
        raise ValueError(f"{source} lacks the field {key!r}")
    return hf[key]


def activation(hf: dict[str, Any], key: str, default: str, source: str) -> str:
    """attnlab's activation for ``hf[key]`` (``gelu_new`` -> ``gelu_tanh``, ``silu`` -> ``silu``, ...)."""
    name = hf.get(key) or default
    if name not in ACTIVATIONS:
        raise ValueError(f"{source}: {key}={name!r} is not supported; supported: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def refuse(hf: dict[str, Any], source: str, **allowed: Any) -> None:
    """A ``ValueError`` for the first option ``key`` whose value is not ``allowed[key]`` (absent is fine)."""
    for key, value in allowed.items():
        if key in hf and hf[key] is not None and hf[key] != value:
            raise ValueError(
                f"{source}: {key}={hf[key]!r} is not supported (attnlab implements {key}={value!r})"
            )


def rope(hf: dict[str, Any], source: str) -> tuple[float, dict | None]:
    """``(theta, scaling)`` of the rotary embedding: ``rope_theta`` and ``rope_scaling`` (transformers
    4.x) or ``rope_parameters`` (5.x); a scaling of a type attnlab does not implement is an error
    listing the ones it does."""
    params = hf.get("rope_parameters") or {}
    if not isinstance(params, dict):
        raise ValueError(f"{source}: rope_parameters must be an object, got {params!r}")
    theta = params.get("rope_theta", hf.get("rope_theta", 10000.0))
    scaling = hf.get("rope_scaling") or (params if params.get("rope_type", "default") != "default" else None)
    if scaling is None:
        return float(theta), None
    if not isinstance(scaling, dict):
        raise ValueError(f"{source}: rope_scaling must be null or an object, got {scaling!r}")
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "default":
        return float(theta), None
    if kind not in ROPE_TYPES:
        raise ValueError(
            f"{source}: rope_scaling type {kind!r} is not supported; supported: null, {', '.join(ROPE_TYPES)}"
        )
    scaling = {k: v for k, v in scaling.items() if k != "rope_theta"}  # 5.x keeps theta in the dict
    if scaling.pop("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"{source}: partial_rotary_factor != 1 (RoPE on part of a head) is not supported")
    length = hf.get("max_position_embeddings")
    if kind == "dynamic" and length is not None:  # transformers scales dynamic NTK from this length
        scaling["original_max_position_embeddings"] = length
    elif kind in ("yarn", "llama3") and scaling.get("original_max_position_embeddings") is None:
        scaling["original_max_position_embeddings"] = length  # transformers' default
    if kind == "yarn" and scaling.get("factor") is None and length and hf.get("max_position_embeddings"):
        scaling["factor"] = hf["max_position_embeddings"] / scaling["original_max_position_embeddings"]
    check_rope_scaling(scaling, f"{source}: rope_scaling")
    return float(theta), scaling


# Hugging Face ``torch_dtype`` (``dtype`` in files written by newer transformers) -> bytes per value.
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def dtype_bytes(hf: dict[str, Any], source: str) -> tuple[int, str] | None:
    """``(bytes per value, dtype name)`` of the checkpoint's ``torch_dtype``; ``None`` when the file
    names none. A dtype outside :data:`DTYPE_BYTES` is a ``ValueError`` naming the field."""
    key = "torch_dtype" if hf.get("torch_dtype") is not None else "dtype"
    name = hf.get(key)
    if name is None:
        return None
    text = str(name).removeprefix("torch.")
    if text not in DTYPE_BYTES:
        raise ValueError(
            f"{source}: {key} {name!r} has no known size (known: {', '.join(DTYPE_BYTES)}); pass --bytes N"
        )
    return DTYPE_BYTES[text], text
