"""Reading the fields of a Hugging Face ``config.json`` with one-line errors that name them.

Every field is read with its JSON type checked (``"tie_word_embeddings": "false"`` is a string, not
false): :func:`size` a positive integer, :func:`flag` a JSON bool, :func:`number` a finite number,
:func:`text` a string; a wrong one is a ``ValueError`` naming the file, the key and the value.
"""

from __future__ import annotations

from typing import Any

from attnlab._checks import _is_int, _is_real
from attnlab._rope_config import ROPE_TYPES, check_rope_scaling

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
_ABSENT = object()


def need(hf: dict[str, Any], key: str, source: str) -> Any:
    """``hf[key]``; a ``ValueError`` naming the file and the field when it is absent or null."""
    if hf.get(key) is None:
        raise ValueError(f"{source} lacks the field {key!r}")
    return hf[key]


def _get(hf: dict[str, Any], key: str, source: str, default: Any) -> Any:
    """``hf[key]``, or ``default`` when it is absent or null (:func:`need` when ``default`` is absent)."""
    if default is _ABSENT:
        return need(hf, key, source)
    value = hf.get(key)
    return default if value is None else value


def size(hf: dict[str, Any], key: str, source: str, default: Any = _ABSENT) -> Any:
    """``hf[key]`` as a positive ``int`` (a JSON integer > 0, not a bool or 2.0); ``default`` when
    absent or null (required when no default is given)."""
    if hf.get(key) is None and default is not _ABSENT:
        return default
    value = need(hf, key, source)
    if not _is_int(value) or value <= 0:
        raise ValueError(f"{source}: {key} must be a positive integer, got {value!r}")
    return int(value)


def flag(hf: dict[str, Any], key: str, source: str, default: bool) -> bool:
    """``hf[key]`` as a bool: JSON ``true`` or ``false`` (``"false"``, ``"no"``, ``0`` are errors)."""
    value = _get(hf, key, source, default)
    if not isinstance(value, bool):
        raise ValueError(f"{source}: {key} must be true or false, got {value!r}")
    return value


def number(hf: dict[str, Any], key: str, source: str, default: float) -> float:
    """``hf[key]`` as a ``float``: a finite JSON number > 0 (an epsilon, a RoPE base)."""
    value = _get(hf, key, source, default)
    if not _is_real(value) or not 0 < float(value) < float("inf"):
        raise ValueError(f"{source}: {key} must be a finite number > 0, got {value!r}")
    return float(value)


def text(hf: dict[str, Any], key: str, source: str, default: str) -> str:
    """``hf[key]`` as a string (a name: an activation, a type)."""
    value = _get(hf, key, source, default)
    if not isinstance(value, str):
        raise ValueError(f"{source}: {key} must be a string, got {value!r}")
    return value


def activation(hf: dict[str, Any], key: str, default: str, source: str) -> str:
    """attnlab's activation for ``hf[key]`` (``gelu_new`` -> ``gelu_tanh``, ``silu`` -> ``silu``, ...)."""
    name = text(hf, key, source, default)
    if name not in ACTIVATIONS:
        raise ValueError(f"{source}: {key}={name!r} is not supported; supported: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def refuse(hf: dict[str, Any], source: str, **allowed: Any) -> None:
    """A ``ValueError`` for the first option ``key`` whose value is not ``allowed[key]``, of its JSON
    type (``1`` is not ``true``; absent or null is fine)."""
    for key, value in allowed.items():
        if key in hf and hf[key] is not None and (type(hf[key]) is not type(value) or hf[key] != value):
            raise ValueError(
                f"{source}: {key}={hf[key]!r} is not supported (attnlab implements {key}={value!r})"
            )


def rope(hf: dict[str, Any], source: str) -> tuple[float, dict | None]:
    """``(theta, scaling)`` of the rotary embedding: ``rope_theta`` and ``rope_scaling`` (transformers
    4.x, whose dict names its kind ``type`` or ``rope_type``) or ``rope_parameters`` (5.x). The
    scaling, checked by :func:`~attnlab._rope_config.check_rope_scaling`, names its kind
    ``rope_type`` always, or is None; a type attnlab does not implement is an error listing the ones
    it does."""
    params = hf.get("rope_parameters")
    params = {} if params is None else params
    if not isinstance(params, dict):
        raise ValueError(f"{source}: rope_parameters must be null or an object, got {params!r}")
    theta = number(params if params.get("rope_theta") is not None else hf, "rope_theta", source, 10000.0)
    scaling = hf.get("rope_scaling")
    if scaling is None and params.get("rope_type", "default") != "default":
        scaling = params
    if scaling is None:
        return theta, None
    if not isinstance(scaling, dict):
        raise ValueError(f"{source}: rope_scaling must be null or an object, got {scaling!r}")
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "default":
        return theta, None
    if kind not in ROPE_TYPES:
        raise ValueError(
            f"{source}: rope_scaling type {kind!r} is not supported; supported: null, {', '.join(ROPE_TYPES)}"
        )
    scaling = {k: v for k, v in scaling.items() if k != "rope_theta"}  # 5.x keeps theta in the dict
    if scaling.pop("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"{source}: partial_rotary_factor != 1 (RoPE on part of a head) is not supported")
    length = size(hf, "max_position_embeddings", source, None)
    key = "original_max_position_embeddings"
    if kind == "dynamic" and length is not None:  # transformers scales dynamic NTK from this length
        scaling[key] = length
    elif kind in ("yarn", "llama3") and scaling.get(key) is None:
        scaling[key] = length  # transformers' default
    if (
        kind == "yarn"
        and scaling.get("factor") is None
        and length
        and _is_int(scaling[key])
        and scaling[key] > 0
    ):
        scaling["factor"] = length / scaling[key]
    check_rope_scaling(scaling, f"{source}: rope_scaling")
    return theta, {"rope_type": kind, **{k: v for k, v in scaling.items() if k not in ("type", "rope_type")}}


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
            f"{source}: {key} {name!r} has no known size (known: {', '.join(DTYPE_BYTES)}); "
            "pass bytes_per_value=N"
        )
    return DTYPE_BYTES[text], text
