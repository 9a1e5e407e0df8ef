"""Signed grids as heatmaps: activation patching (layer x position, layer x head), direct logit
attribution per head, composition scores (sender head x receiver head).

One picture for all of them: a matrix ``[rows, cols]`` coloured on a scale centred on 0 that
reaches the largest |value| (red positive, blue negative), row and column labels, one panel per
grid side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.backend_bases import FigureCanvasBase  # noqa: E402

from attnlab.viz.legends import save_figure  # noqa: E402

LABELS_MAX = 40  # more tick labels than this on an axis: every k-th only
# the file formats a grid can be written in (the path's extension; none: png): every one matplotlib
# writes by itself; pgf is left out, as it runs a LaTeX install to measure the text
FORMATS = ("png", *sorted(set(FigureCanvasBase.get_supported_filetypes()) - {"png", "pgf"}))


def _ticks(ax, axis: str, labels: Sequence[str]) -> None:
    step = max(1, -(-len(labels) // LABELS_MAX))
    where = list(range(0, len(labels), step))
    if axis == "x":
        ax.set_xticks(where, [labels[i] for i in where], rotation=90, fontsize=8)
    else:
        ax.set_yticks(where, [labels[i] for i in where], fontsize=8)


def grids_figure(panels: Sequence[tuple], path: str | Path, *, title: str | None = None) -> Path:
    """Write the panels ``(title, grid [R, C], row_labels, col_labels, x_label, y_label)`` side by
    side into ``path`` (PNG or SVG); each grid coloured on its own scale centred on 0."""
    if not panels:
        raise ValueError("no grid to draw")
    widths = [max(3.0, 0.35 * np.asarray(p[1]).shape[1] + 1.5) for p in panels]
    height = max(3.0, 0.3 * max(np.asarray(p[1]).shape[0] for p in panels) + 1.8)
    fig, axes = plt.subplots(1, len(panels), figsize=(sum(widths), height), squeeze=False)
    for ax, (name, grid, rows, cols, x_label, y_label) in zip(axes[0], panels):
        a = np.asarray(grid, dtype=np.float64)
        if a.ndim != 2 or a.shape != (len(rows), len(cols)):
            raise ValueError(
                f"panel {name!r}: grid {list(a.shape)} does not match {len(rows)} x {len(cols)} labels"
            )
        if not np.all(np.isfinite(a)):
            raise ValueError(f"panel {name!r} holds NaN or infinite values")
        top = float(np.abs(a).max()) or 1.0
        image = ax.imshow(a, cmap="RdBu_r", vmin=-top, vmax=top, aspect="auto")
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        _ticks(ax, "x", list(cols))
        _ticks(ax, "y", list(rows))
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    try:
        return save_figure(fig, path)
    finally:
        plt.close(fig)
