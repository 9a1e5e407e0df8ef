"""The RoPE scaling dict: its registry of types and its one validator (pure Python, no NumPy or torch).

A scaling is the dict Hugging Face configs carry as ``rope_scaling``::

    {"rope_type": "linear",  "factor": s}
    {"rope_type": "dynamic", "factor": s, "original_max_position_embeddings": L}
    {"rope_type": "yarn",    "factor": s, "original_max_position_embeddings": L,
                             "beta_fast": 32, "beta_slow": 1, "attention_factor": ..., "mscale": ...,
                             "mscale_all_dim": ..., "truncate": True}
    {"rope_type": "llama3",  "factor": s, "original_max_position_embeddings": L,
                             "low_freq_factor": 1, "high_freq_factor": 4}

``None`` and ``{"rope_type": "default"}`` are plain RoPE; the older key ``"type"`` is read as
``"rope_type"``. :func:`check_rope_scaling` is what :class:`attnlab.nn.BlockConfig`, the reference
(:func:`attnlab.ref.rope_frequencies`) and the engine (:func:`attnlab.nn.rope_frequencies`) all
call, so a bad dict fails the same way, with one line, wherever it enters.
"""

from __future__ import annotations

import math

from attnlab._checks import _is_real, choice, positive_float, positive_int

# type -> (required keys, optional keys); the order is the registry's (CLI and docs read it)
ROPE_SCALINGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "default": ((), ()),
    "linear": (("factor",), ()),
    "dynamic": (("factor", "original_max_position_embeddings"), ()),
    "yarn": (
        ("factor", "original_max_position_embeddings"),
        ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"),
    ),
    "llama3": (("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"), ()),
}
ROPE_TYPES = tuple(ROPE_SCALINGS)
# the largest scaling factor read: published models scale by at most 128; past 1e6 a dynamic
# model's length (factor x its trained length) outgrows any context and float products overflow
MAX_ROPE_FACTOR = 1e6


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature term: ``0.1 * mscale * ln(s) + 1`` for ``s > 1``, else 1."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def check_rope_scaling(scaling, name: str = "rope_scaling") -> dict | None:
    """Validate a RoPE scaling dict and return it normalised, or ``None`` for plain RoPE.

    The normalised dict has ``rope_type`` (never ``type``), floats for the factors, an int
    ``original_max_position_embeddings`` and, for YaRN, every optional key filled in: ``beta_fast``
    32, ``beta_slow`` 1, ``truncate`` True and ``attention_factor`` (given, or
    ``mscale(s, mscale) / mscale(s, mscale_all_dim)`` when both are set, else ``0.1 ln s + 1``).

    Raises a one-line ``ValueError`` naming the key for: a non-dict; an unknown ``rope_type`` or
    key; a factor <= 0, not finite or above :data:`MAX_ROPE_FACTOR`; a missing
    ``original_max_position_embeddings`` (or any other required key); ``low_freq_factor >=
    high_freq_factor``.
    """
    if scaling is None:
        return None
    if not isinstance(scaling, dict) or not ({"rope_type", "type"} & set(scaling)):
        raise ValueError(f"{name} must be None or a dict with a 'rope_type', got {scaling!r}")
    given = dict(scaling)
    if "type" in given and "rope_type" not in given:
        given["rope_type"] = given.pop("type")
    elif "type" in given:
        if given.pop("type") != given["rope_type"]:
            raise ValueError(f"{name} has 'type' and 'rope_type' that disagree: {scaling!r}")
    kind = choice(f"{name}['rope_type']", given.get("rope_type"), ROPE_TYPES)
    if kind == "default":
        extra = sorted(set(given) - {"rope_type"})
        if extra:
            raise ValueError(f"{name} of rope_type 'default' takes no other keys, got {extra}")
        return None
    required, optional = ROPE_SCALINGS[kind]
    missing = [k for k in required if given.get(k) is None]
    if missing:
        raise ValueError(f"{name} of rope_type {kind!r} needs {missing} (got keys {sorted(given)})")
    unknown = sorted(set(given) - {"rope_type", *required, *optional})
    if unknown:
        raise ValueError(
            f"{name} of rope_type {kind!r} has unknown key(s) {unknown}; it takes {[*required, *optional]}"
        )
    out: dict = {"rope_type": kind, "factor": positive_float(f"{name}['factor']", given["factor"])}
    if out["factor"] > MAX_ROPE_FACTOR:
        raise ValueError(f"{name}['factor'] must be at most {MAX_ROPE_FACTOR:g}, got {given['factor']!r}")
    if "original_max_position_embeddings" in required:
        key = "original_max_position_embeddings"
        out[key] = positive_int(f"{name}['{key}']", given[key])
    if kind == "yarn":
        for key, default in (("beta_fast", 32.0), ("beta_slow", 1.0)):
            out[key] = positive_float(f"{name}['{key}']", given.get(key) or default)  # HF: 0/None = default
        truncate = given.get("truncate", True)
        if not isinstance(truncate, bool):
            raise ValueError(f"{name}['truncate'] must be true or false, got {truncate!r}")
        out["truncate"] = truncate
        mscales = []
        for key in ("mscale", "mscale_all_dim"):
            v = given.get(key)
            if v is not None and (not _is_real(v) or not math.isfinite(float(v)) or v < 0):
                raise ValueError(f"{name}['{key}'] must be a finite number >= 0, got {v!r}")
            mscales.append(v)
        if given.get("attention_factor") is not None:
            out["attention_factor"] = positive_float(f"{name}['attention_factor']", given["attention_factor"])
        elif mscales[0] and mscales[1]:  # DeepSeek's two temperatures (zero or absent: the paper's rule)
            out["attention_factor"] = yarn_mscale(out["factor"], mscales[0]) / yarn_mscale(
                out["factor"], mscales[1]
            )
        else:
            out["attention_factor"] = yarn_mscale(out["factor"])
    if kind == "llama3":
        low = positive_float(f"{name}['low_freq_factor']", given["low_freq_factor"])
        high = positive_float(f"{name}['high_freq_factor']", given["high_freq_factor"])
        if low >= high:
            raise ValueError(f"{name} needs low_freq_factor < high_freq_factor, got {low} >= {high}")
        out["low_freq_factor"], out["high_freq_factor"] = low, high
    return out


def check_head_dim(head_dim, scaling: dict | None) -> int:
    """``head_dim`` must be an even positive int (RoPE rotates pairs); dynamic NTK needs >= 4
    (its base exponent is ``d / (d - 2)``)."""
    d = positive_int("head_dim", head_dim)
    if d % 2:
        raise ValueError(f"RoPE needs an even head width, got head_dim={d}")
    if scaling is not None and scaling["rope_type"] == "dynamic" and d < 4:
        raise ValueError(f"dynamic NTK scaling needs head_dim >= 4 (exponent d/(d-2)), got head_dim={d}")
    return d


def check_seq_len(seq_len) -> int | None:
    """``None`` or a positive int: the current length dynamic NTK scales for."""
    return None if seq_len is None else positive_int("seq_len", seq_len)
