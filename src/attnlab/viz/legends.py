"""Legends that hide no data, and one way to save a figure.

:func:`place_legend` tries the usual spots inside the axes and keeps the first whose box covers no
plotted point (a marker, or any pixel of a line drawn between two); when every spot covers one it
puts the legend outside, below the axes.
:func:`covered_points` is the check itself (also what the tests run over every figure attnlab
draws), and :func:`save_figure` writes a figure atomically and, when ``ATTNLAB_CHECK_FIGURES=1``
(the test suite sets it), refuses a figure whose legend covers a point.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from attnlab._io import atomic_write_bytes

INSIDE = (
    "upper right",
    "upper left",
    "lower right",
    "lower left",
    "center right",
    "center left",
    "upper center",
    "lower center",
)


def _along(xy: np.ndarray, step: float = 2.0) -> np.ndarray:
    """A drawn line's vertices ``xy [n, 2]`` (display pixels) and points every ``step`` pixels along
    each segment between them ``[m, 2]``: a legend over a line between two markers covers data too."""
    pieces = [xy[:1]]
    for a, b in zip(xy[:-1], xy[1:]):
        gap = float(np.hypot(*(b - a))) if np.all(np.isfinite([a, b])) else 0.0
        k = int(min(gap // step, 10_000)) + 1
        pieces.append(a + (b - a) * np.linspace(0.0, 1.0, k + 1)[1:, None])  # [k, 2]
    return np.concatenate(pieces)


def _points(ax) -> np.ndarray:
    """Display coordinates ``[N, 2]`` of every plotted point of ``ax`` that lies inside the axes:
    line vertices and markers and the segments drawn between them, scatter offsets, and the top
    middle of every bar."""
    from matplotlib.patches import Rectangle

    pts = []
    for line in ax.get_lines():
        if line.get_visible() and len(line.get_xydata()):
            xy = line.get_transform().transform(np.asarray(line.get_xydata(), float))  # [n, 2]
            pts.append(_along(xy) if line.get_linestyle() not in ("None", "", " ") else xy)
    for coll in ax.collections:
        offsets = np.asarray(coll.get_offsets(), float)
        if coll.get_visible() and offsets.size:
            pts.append(coll.get_offset_transform().transform(offsets.reshape(-1, 2)))
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and patch.get_visible() and patch.get_height() != 0:
            x, y = patch.get_x() + patch.get_width() / 2, patch.get_y() + patch.get_height()
            pts.append(patch.get_transform().transform(np.array([[x, y]])))
    if not pts:
        return np.zeros((0, 2))
    p = np.concatenate(pts)
    p = p[np.all(np.isfinite(p), axis=1)]
    box = ax.get_window_extent()
    inside = (p[:, 0] >= box.x0) & (p[:, 0] <= box.x1) & (p[:, 1] >= box.y0) & (p[:, 1] <= box.y1)
    return p[inside]


def covered_points(fig) -> list[str]:
    """One description per axes whose legend box covers at least one plotted point (empty = clean)."""
    fig.canvas.draw()
    problems = []
    for i, ax in enumerate(fig.axes):
        legend = ax.get_legend()
        if legend is None or not legend.get_visible():
            continue
        box = legend.get_window_extent()
        p = _points(ax)
        hit = (p[:, 0] >= box.x0) & (p[:, 0] <= box.x1) & (p[:, 1] >= box.y0) & (p[:, 1] <= box.y1)
        if hit.any():
            title = ax.get_title() or f"axes {i}"
            problems.append(f"{title!r}: the legend covers {int(hit.sum())} plotted point(s)")
    return problems


def place_legend(ax, **kwargs):
    """Draw ``ax``'s legend where it covers no plotted point: inside if a spot is free, else below
    the axes (not beside: a neighbouring subplot may sit to the right). ``kwargs`` go to
    ``ax.legend`` (fontsize, title, ncol, ...)."""
    fig = ax.figure
    for loc in INSIDE:
        legend = ax.legend(loc=loc, **kwargs)
        fig.canvas.draw()
        box = legend.get_window_extent()
        p = _points(ax)
        if not ((p[:, 0] >= box.x0) & (p[:, 0] <= box.x1) & (p[:, 1] >= box.y0) & (p[:, 1] <= box.y1)).any():
            return legend
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), borderaxespad=0.0, **kwargs)


def save_figure(fig, path: str | Path, *, fmt: str | None = None, dpi: int = 90) -> Path:
    """Write ``fig`` to ``path`` atomically (legends outside the axes are kept in the picture).

    With ``ATTNLAB_CHECK_FIGURES=1`` a figure whose legend covers a plotted point is a ``ValueError``.
    """

    if os.environ.get("ATTNLAB_CHECK_FIGURES") == "1":
        problems = covered_points(fig)
        if problems:
            raise ValueError(f"figure {Path(path).name}: " + "; ".join(problems))
    path = Path(path)
    fmt = fmt or path.suffix.lstrip(".") or "png"
    buf = io.BytesIO()
    meta = {"Date": None} if fmt == "svg" else None
    fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches="tight", metadata=meta)
    atomic_write_bytes(path, buf.getvalue())
    return path


__all__ = ["covered_points", "place_legend", "save_figure"]
