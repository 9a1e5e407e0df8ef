"""Audits: parameters by group with formulas, shapes on every arrow, FLOPs/memory, machine peak.

Each audit returns a plain dict (what ``--json`` prints) and has a ``render_*`` for the table.
"""

from attnlab.audit.cost import audit_cost, kv_cache_bytes, render_cost
from attnlab.audit.params import audit_params, render_params
from attnlab.audit.peak import measure_peak, mfu, render_peak
from attnlab.audit.shapes import audit_shapes, render_shapes

__all__ = [
    "audit_cost",
    "audit_params",
    "audit_shapes",
    "kv_cache_bytes",
    "measure_peak",
    "mfu",
    "render_cost",
    "render_params",
    "render_peak",
    "render_shapes",
]
