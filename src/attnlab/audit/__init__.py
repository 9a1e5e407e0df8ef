"""Audits: parameters by group with formulas, shapes on every arrow, FLOPs/memory, machine peak.

Each audit takes a model (a :class:`ModelSpec`, an :class:`attnlab.nn.BlockConfig`, a model config
or a preset name from :data:`PRESETS`) and, for shapes and cost, a :class:`Workload`; it returns a
plain dict (what ``--json`` prints) and has a ``render_*`` for the table.
"""

from attnlab.audit.config import MODELS, ModelSpec, Workload
from attnlab.audit.cost import audit_cost, kv_cache_bytes, render_cost
from attnlab.audit.params import audit_params, render_params
from attnlab.audit.peak import measure_peak, mfu, render_peak
from attnlab.audit.presets import PRESETS, Preset
from attnlab.audit.shapes import audit_shapes, render_shapes
from attnlab.audit.spec import model_spec

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
