"""attnlab.viz: the notes' figures, heatmaps of any attention matrix, and the attention explorer page.

* :func:`heatmap` -- draw ``A [T_q, T_k]`` with query labels down the side and key labels on top.
* :func:`draw_figures` and ``fig1_*`` .. ``fig5_*`` -- the five figures of the Week 1 notes.
* :func:`scaled_frequencies` (RoPE's frequencies under each scaling) and :func:`accuracy_vs_length`
  (the extrapolation experiment's curves).
* :func:`explorer_html`, :func:`explore`, :func:`write_explorer`, :class:`AttentionView`,
  :func:`render_html` -- one self-contained HTML page per sentence and model.
* :func:`logit_lens_figure`, :func:`residual_norms_figure` -- the logit lens and the residual
  stream's writes (:mod:`attnlab.interp.lens`).
* :func:`grids_figure` -- signed grids side by side: activation patching, attribution per head.

Names are imported on first use, so the explorer does not pay for matplotlib and the figures do not
pay for the model code.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "heatmap": "attnlab.viz.heatmaps",
    "draw_figures": "attnlab.viz.figures",
    "fig1_fixed_vs_additive": "attnlab.viz.figures",
    "fig2_toy_weights": "attnlab.viz.figures",
    "fig3_scaling": "attnlab.viz.figures",
    "fig4_heads": "attnlab.viz.figures",
    "fig5_parameter_groups": "attnlab.viz.figures",
    "AttentionView": "attnlab.viz.explorer",
    "Explorer": "attnlab.viz.explorer",
    "attention_views": "attnlab.viz.explorer",
    "explore": "attnlab.viz.explorer",
    "explorer_html": "attnlab.viz.explorer",
    "render_html": "attnlab.viz.explorer",
    "write_explorer": "attnlab.viz.explorer",
    "scaled_frequencies": "attnlab.viz.positions",
    "accuracy_vs_length": "attnlab.viz.positions",
    "logit_lens_figure": "attnlab.viz.lens",
    "residual_norms_figure": "attnlab.viz.lens",
    "grids_figure": "attnlab.viz.grids",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'attnlab.viz' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (imported lazily) next to the module's own, so ``dir(attnlab.viz)`` lists them."""
    return sorted({*globals(), *_EXPORTS})
