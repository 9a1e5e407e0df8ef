"""Audits: parameters by group with formulas, shapes on every arrow, FLOPs/memory, machine peak.

Each audit takes a model (a :class:`ModelSpec`, an :class:`attnlab.nn.BlockConfig`, a model config
or a preset name from :data:`PRESETS`) and, for shapes and cost, a :class:`Workload`; it returns a
plain dict (what ``--json`` prints) and has a ``render_*`` for the table.

Names are imported on first use, so that the presets and the model configurations are read without
torch: what ``attnlab audit ... --help`` lists.
"""

from __future__ import annotations

import importlib

_EXPORTS = {  # name -> the module defining it, imported on first use
    "MODELS": "attnlab.audit.config",
    "ModelSpec": "attnlab.audit.config",
    "Workload": "attnlab.audit.config",
    "audit_cost": "attnlab.audit.cost",
    "kv_cache_bytes": "attnlab.audit.cost",
    "render_cost": "attnlab.audit.cost",
    "audit_params": "attnlab.audit.params",
    "render_params": "attnlab.audit.params",
    "measure_peak": "attnlab.audit.peak",
    "mfu": "attnlab.audit.peak",
    "render_peak": "attnlab.audit.peak",
    "PRESETS": "attnlab.audit.presets",
    "Preset": "attnlab.audit.presets",
    "audit_shapes": "attnlab.audit.shapes",
    "render_shapes": "attnlab.audit.shapes",
    "model_spec": "attnlab.audit.spec",
}

__all__ = [
    "MODELS",
    "PRESETS",
    "ModelSpec",
    "Preset",
    "Workload",
    "audit_cost",
    "audit_params",
    "audit_shapes",
    "kv_cache_bytes",
    "measure_peak",
    "mfu",
    "model_spec",
    "render_cost",
    "render_params",
    "render_peak",
    "render_shapes",
]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'attnlab.audit' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (imported lazily) next to the module's own, so ``dir(attnlab.audit)`` lists them."""
    return sorted({*globals(), *_EXPORTS})
