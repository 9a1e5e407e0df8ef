"""Figures about positions: RoPE's frequencies under each scaling, and accuracy against length."""

from __future__ import annotations

from pathlib import Path

from attnlab import ref
from attnlab._io import atomic_write_bytes


def _save(fig, path) -> str:
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return str(path)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def scaled_frequencies(
    path, head_dim: int = 128, base: float = 500000.0, length: int = 8192, factor: float = 8.0
) -> str:
    """Plot ``w_i`` (log axis) against pair ``i`` for plain RoPE and each scaling of
    :func:`attnlab.ref.rope_frequencies` at ``factor`` and trained length ``length`` (dynamic NTK at
    ``T = factor * length``), with the ratio scaled/plain below. Writes a PNG; returns its path."""
    import numpy as np

    plt = _pyplot()
    plain, _ = ref.rope_frequencies(head_dim, base)
    scalings = {
        "linear (PI)": {"rope_type": "linear", "factor": factor},
        f"dynamic NTK (T = {factor:g} L)": {
            "rope_type": "dynamic",
            "factor": factor,
            "original_max_position_embeddings": length,
        },
        "YaRN": {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": length},
        "llama3": {
            "rope_type": "llama3",
            "factor": factor,
            "original_max_position_embeddings": length,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
    }
    i = np.arange(head_dim // 2)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, height_ratios=(2, 1))
    top.plot(i, plain, color="black", lw=2, label="plain RoPE")
    for name, scaling in scalings.items():
        w, _ = ref.rope_frequencies(head_dim, base, scaling, seq_len=int(factor * length))
        top.plot(i, w, label=name)
        bottom.plot(i, w / plain, label=name)
    top.set_yscale("log")
    top.set_ylabel("frequency w_i (radians / position)")
    top.set_title(f"RoPE frequencies, d = {head_dim}, base = {base:g}, s = {factor:g}, L = {length}")
    bottom.set_yscale("log", base=2)
    bottom.set_ylabel("w_i (scaled) / w_i")
    bottom.set_xlabel("pair i (fast -> slow)")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    top.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    return _save(fig, Path(path))


MARKERS = "osD^vP*Xhp<>"
DODGE = 0.045  # octaves between neighbouring series on the log-2 length axis


def accuracy_vs_length(result: dict, path) -> str:
    """Accuracy against evaluation length (log-2 axis), one line per row of an extrapolation result
    (:meth:`attnlab.experiments.extrapolation.Result.to_json`); cells that do not apply are left
    out, and a model below the accuracy bar at the length it was trained at is labelled so. Each series
    has its own marker and is shifted by ``DODGE`` octaves from its neighbour, so equal scores stay
    visible; the legend sits outside the axes; dashed lines are scalings applied at evaluation only.
    Writes a PNG; returns its path."""
    return _save(accuracy_figure(result), Path(path))


def accuracy_figure(result: dict):
    """The figure :func:`accuracy_vs_length` saves (matplotlib ``Figure``; the caller closes it)."""
    plt = _pyplot()
    lengths = result["lengths"]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    rows = result["rows"]
    failed = result.get("did_not_learn", result.get("undertrained", ()))
    for k, row in enumerate(rows):
        pts = [(t, row["results"][str(t)]["accuracy"]) for t in lengths if row["results"][str(t)] is not None]
        style = "--" if row["scaling"] and not row["finetune_steps"] else "-"
        label = row["name"] + (" (did not learn at its training length)" if row["name"] in failed else "")
        # series that score the same (several at 1.0) are drawn side by side, each with its own
        # marker, and later ones smaller, so none hides another
        dodge = 2 ** (DODGE * (k - (len(rows) - 1) / 2))
        ax.plot(
            [p[0] * dodge for p in pts],
            [p[1] for p in pts],
            style,
            marker=MARKERS[k % len(MARKERS)],
            markersize=max(4.0, 9.0 - 0.5 * k),
            label=label,
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(t) for t in lengths])
    ax.set_xlabel(f"evaluation length T (trained at {lengths[0]})")
    ax.set_ylabel("accuracy (latest passkey)")
    ax.set_ylim(-0.06, 1.06)  # room for a whole marker at 0 and at 1
    ax.grid(alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    return fig
