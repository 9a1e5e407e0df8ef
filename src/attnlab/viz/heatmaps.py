"""One picture for every alignment and attention matrix: queries down the side, keys along the top.

A weight matrix ``A [T_q, T_k]`` (Bahdanau's alignment ``alpha_ti`` with ``T_q = T_target`` and
``T_k = T_source``, or one head of softmax(Q K^T / sqrt(d_k) + M)) is drawn with row ``i`` = query
token ``y_tokens[i]`` and column ``j`` = key token ``x_tokens[j]``, so each drawn row sums to one.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

ANNOTATE_MAX_CELLS = 144  # 12 x 12: above this, numbers in cells become unreadable


def _check(weights, x_tokens: Sequence[str], y_tokens: Sequence[str]) -> np.ndarray:
    """``weights [T_q, T_k]`` as a finite float64 array (a torch tensor detached and copied to the CPU
    first, bfloat16 and float16 read as float64), or a ``ValueError`` naming what is wrong."""
    if hasattr(weights, "detach") and hasattr(weights, "is_floating_point"):  # a torch tensor
        weights = weights.detach().cpu()
        weights = weights.double() if weights.is_floating_point() else weights
    a = np.asarray(weights)
    if a.dtype == bool or not np.issubdtype(a.dtype, np.number):
        raise ValueError(f"weights must be a numeric matrix, got dtype {a.dtype}")
    a = a.astype(np.float64)
    if a.ndim != 2:
        raise ValueError(f"weights must be a 2-D matrix [T_q, T_k], got shape {list(a.shape)}")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"weights must not be empty, got shape {list(a.shape)}")
    if len(x_tokens) != a.shape[1]:
        raise ValueError(
            f"x_tokens has {len(x_tokens)} labels but weights {list(a.shape)} has T_k={a.shape[1]} columns"
        )
    if len(y_tokens) != a.shape[0]:
        raise ValueError(
            f"y_tokens has {len(y_tokens)} labels but weights {list(a.shape)} has T_q={a.shape[0]} rows"
        )
    if not np.all(np.isfinite(a)):
        raise ValueError(f"weights contains NaN or infinite values (shape {list(a.shape)})")
    return a


def heatmap(
    weights,
    x_tokens: Sequence[str],
    y_tokens: Sequence[str],
    *,
    ax=None,
    title: str | None = None,
    annotate: bool | None = None,
    cmap: str = "Blues",
    vmax: float | None = None,
    vmin: float | None = None,
    fmt: str = "{:.2f}",
):
    """Draw an attention/alignment matrix A [T_q, T_k]; row i is query ``y_tokens[i]``.

    Args:
        weights: ``[T_q, T_k]`` array (NumPy, anything ``np.asarray`` accepts, or a torch tensor on
            any device, even one that requires grad: it is detached).
        x_tokens: ``T_k`` key/source labels (columns, along the top).
        y_tokens: ``T_q`` query/target labels (rows, down the side).
        ax: matplotlib Axes to draw into; a new figure is made when None.
        title: axes title.
        annotate: write each weight in its cell; default: only when ``T_q * T_k <= 144``.
        cmap: matplotlib colour map. vmax: top of the colour scale (default max(1, A.max()) for
            weights in [0, 1], else A.max()). vmin: its bottom (default 0, or A.min() if negative).
        fmt: format of the numbers written in the cells.
    Returns:
        the Axes drawn into (``ax.images[0]`` holds the matrix exactly as given).
    Raises:
        ValueError: ``weights`` is not a finite 2-D matrix or a label list has the wrong length.
    """
    a = _check(weights, x_tokens, y_tokens)
    if ax is None:
        t_q, t_k = a.shape
        _, ax = plt.subplots(figsize=(min(1.0 + 0.55 * t_k, 14), min(0.8 + 0.45 * t_q, 14)))
    in_unit = a.min() >= 0 and a.max() <= 1
    top = vmax if vmax is not None else (1.0 if in_unit else float(a.max()))
    bottom = vmin if vmin is not None else (0.0 if a.min() >= 0 else float(a.min()))
    image = ax.imshow(a, cmap=cmap, vmin=bottom, vmax=top, aspect="auto")
    ax.set_xticks(range(a.shape[1]))
    ax.set_xticklabels([str(t) for t in x_tokens], rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(a.shape[0]))
    ax.set_yticklabels([str(t) for t in y_tokens], fontsize=8)
    ax.tick_params(top=False, bottom=True, length=0)
    if annotate is None:
        annotate = a.size <= ANNOTATE_MAX_CELLS
    if annotate:
        for i in range(a.shape[0]):
            for j in range(a.shape[1]):
                dark = image.norm(a[i, j]) > 0.6
                ax.text(
                    j,
                    i,
                    fmt.format(a[i, j]),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if dark else "black",
                )
    if title:
        ax.set_title(title, fontsize=10)
    return ax
