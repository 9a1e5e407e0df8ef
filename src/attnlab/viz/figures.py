"""The five figures of the Week 1 notes, computed by attnlab (the NumPy reference), not drawn by hand.

Each ``figN_*`` function returns ``(figure, numbers)``: the matplotlib figure and a dict of the exact
numbers it plotted, so tests (and readers) can check them. :func:`draw_figures` writes all five.

1. a fixed (uniform) context distribution reused at every output step beside per-step additive
   (Bahdanau) alignments from random weights: e_ti = v_a^T tanh(W_a s_{t-1} + U_a h_i);
2. the row-normalised weights A = softmax(Q K^T / sqrt(d_k)) of a five-token toy example;
3. the random-vector experiment: Var(q.k) = d_k unscaled, ~1 after dividing by sqrt(d_k), and the
   softmax saturation that follows;
4. four head patterns beside the base model's eight 64-wide heads concatenating to 512;
5. the parameter groups of the base encoder layer (d_model=512, h=8, d_ff=2048).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

from attnlab.names import FIGURE_FORMATS as FORMATS  # noqa: E402
from attnlab.nn import BlockConfig, EncoderLayer
from attnlab.ref import (  # noqa: E402
    additive_attention,
    merge_heads,
    multi_head_attention,
    scaled_dot_product_attention,
    softmax,
    split_heads,
)
from attnlab.viz.heatmaps import heatmap  # noqa: E402
from attnlab.viz.legends import place_legend, save_figure  # noqa: E402

ILLUSTRATIVE = "illustrative: random weights, not a trained model"


def fig1_fixed_vs_additive(seed: int = 0, t_src: int = 6, t_tgt: int = 5):
    """Figure 1: one uniform context distribution reused at each output step vs per-step additive alignments.

    Left: alpha_ti = 1 / T_source for every step t (the same context every time). Right:
    e_ti = v_a^T tanh(W_a s_{t-1} + U_a h_i), alpha_t = softmax_i(e_t), with random ``s_{t-1} [T_tgt, 4]``,
    ``h [T_src, 4]``, ``W_a, U_a [4, 8]``, ``v_a [8]``.

    Returns:
        ``(figure, {"uniform": [T_tgt, T_src], "additive": [T_tgt, T_src], "scores": [T_tgt, T_src]})``.
    """
    rng = np.random.default_rng(seed)
    d, d_a = 4, 8
    h = rng.normal(size=(t_src, d))  # encoder annotations h_i  [T_src, d_h]
    s_prev = rng.normal(size=(t_tgt, d))  # decoder states s_{t-1}  [T_tgt, d_s]
    W_a, U_a = rng.normal(size=(d, d_a)), rng.normal(size=(d, d_a))
    v_a = rng.normal(size=d_a)
    scores, alpha, _ = additive_attention(s_prev, h, W_a, U_a, v_a)  # [T_tgt, T_src] x2
    uniform = np.full((t_tgt, t_src), 1.0 / t_src)  # the fixed context: same weights every step
    src = [f"h{i + 1}" for i in range(t_src)]
    tgt = [f"y{t + 1}" for t in range(t_tgt)]
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.8))
    heatmap(uniform, src, tgt, ax=axes[0], title="fixed context: one distribution reused at every step")
    heatmap(alpha, src, tgt, ax=axes[1], title="additive attention: a new alignment per decoder step")
    for ax in axes:
        ax.set_xlabel("source position i")
        ax.set_ylabel("output step t")
    fig.suptitle(f"Figure 1 ({ILLUSTRATIVE})", fontsize=10)
    fig.tight_layout()
    return fig, {"uniform": uniform, "additive": alpha, "scores": scores}


TOY_TOKENS = ("the", "cat", "sat", "on", "mats")


def fig2_toy_weights(seed: int = 1, d_model: int = 8, d_k: int = 4):
    """Figure 2: A = softmax(Q K^T / sqrt(d_k)) for a five-token toy sentence, values in the cells.

    ``X [5, d_model]`` random embeddings, ``Q = X W^Q``, ``K = X W^K``, ``V = X W^V`` with random
    ``[d_model, d_k]`` projections. Each query row sums to one.

    Returns:
        ``(figure, {"tokens": list, "weights": [5, 5], "row_sums": [5]})``.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(len(TOY_TOKENS), d_model))  # [T, d_model]
    W_q, W_k, W_v = (rng.normal(size=(d_model, d_k)) * 0.4 for _ in range(3))
    _, weights = scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v)  # weights [T, T]
    fig, ax = plt.subplots(figsize=(4.8, 4.0))
    heatmap(
        weights,
        TOY_TOKENS,
        TOY_TOKENS,
        ax=ax,
        annotate=True,
        title="softmax(QK^T/sqrt(d_k)): each row sums to 1",
    )
    ax.set_xlabel("key token")
    ax.set_ylabel("query token")
    fig.suptitle(f"Figure 2 ({ILLUSTRATIVE})", fontsize=9)
    fig.tight_layout()
    return fig, {"tokens": list(TOY_TOKENS), "weights": weights, "row_sums": weights.sum(axis=-1)}


VARIANCE_DIMS = (4, 16, 64, 256)


def dot_product_variance(dims=VARIANCE_DIMS, n: int = 20000, seed: int = 42) -> dict:
    """The notes' experiment 02: Var(q.k) = d_k for unit-variance coordinates; Var(q.k / sqrt(d_k)) = 1.

    Draws ``q, k [n, d_k]`` from one ``default_rng(seed)`` in the notes' order (q then k per width),
    so the seed-42 numbers are the notes' numbers.

    Returns:
        ``{"d_k", "var", "scaled_var", "std", "scaled_std", "samples"}`` (lists over ``dims``;
        ``samples`` maps d_k to the unscaled dot products ``[n]``).
    """
    rng = np.random.default_rng(seed)
    out: dict = {"d_k": list(dims), "var": [], "scaled_var": [], "std": [], "scaled_std": [], "samples": {}}
    for d in dims:
        q = rng.normal(size=(n, d))  # [n, d_k]
        k = rng.normal(size=(n, d))  # [n, d_k]
        dot = np.sum(q * k, axis=1)  # [n]
        out["var"].append(float(np.var(dot)))
        out["scaled_var"].append(float(np.var(dot / np.sqrt(d))))
        out["std"].append(float(np.std(dot)))
        out["scaled_std"].append(float(np.std(dot / np.sqrt(d))))
        out["samples"][d] = dot
    return out


def softmax_saturation(
    dims=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), n_keys: int = 16, n: int = 2000, seed: int = 7
) -> dict:
    """Mean largest softmax weight max_j alpha_j over random query rows, with and without 1/sqrt(d_k).

    For each width ``d_k``: ``q [n, d_k]``, ``K [n_keys, d_k]`` standard normal, logits ``q K^T``
    (unscaled) or ``q K^T / sqrt(d_k)`` (scaled). A mean max weight near 1 means a nearly one-hot,
    saturated softmax (gradients near zero); 1/n_keys would be uniform.

    Returns:
        ``{"d_k": list, "max_weight_unscaled": list, "max_weight_scaled": list, "n_keys": int}``.
    """
    rng = np.random.default_rng(seed)
    res: dict = {"d_k": list(dims), "max_weight_unscaled": [], "max_weight_scaled": [], "n_keys": n_keys}
    for d in dims:
        q = rng.normal(size=(n, d))  # [n, d_k]
        keys = rng.normal(size=(n_keys, d))  # [n_keys, d_k]
        logits = q @ keys.T  # [n, n_keys]
        res["max_weight_unscaled"].append(float(softmax(logits).max(axis=-1).mean()))
        res["max_weight_scaled"].append(float(softmax(logits / np.sqrt(d)).max(axis=-1).mean()))
    return res


def fig3_scaling():
    """Figure 3: spread of q.k grows like sqrt(d_k) unscaled, stays near 1 scaled; softmax saturation.

    Returns:
        ``(figure, {"variance": dot_product_variance(), "saturation": softmax_saturation()})``.
    """
    var = dot_product_variance()
    sat = softmax_saturation()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    d = np.array(var["d_k"])
    axes[0].plot(d, var["std"], "o-", lw=3, alpha=0.5, label="std(q.k) unscaled")
    axes[0].plot(d, var["scaled_std"], "s-", label="std(q.k / sqrt(d_k))")
    # sqrt(d_k) lies on the unscaled curve (that is the point): drawn thin, dashed and on top
    axes[0].plot(d, np.sqrt(d), "--", color="black", lw=1, zorder=5, label="sqrt(d_k), on the unscaled")
    axes[0].set_ylim(0, max(var["std"]) * 1.2)  # room above the last point for its label
    axes[0].set_xscale("log", base=2)
    axes[0].set_xlabel("d_k")
    axes[0].set_ylabel("standard deviation")
    axes[0].set_title("spread of dot products (20,000 pairs each)", fontsize=10)
    place_legend(axes[0], fontsize=8)
    for x, y in zip(d, var["std"]):
        axes[0].annotate(f"{y:.2f}", (x, y), textcoords="offset points", xytext=(-14, 6), fontsize=7)
    big = d[-1]
    bins = np.linspace(-60, 60, 121)
    axes[1].hist(var["samples"][big], bins=bins, alpha=0.6, label=f"q.k, d_k={big}")
    axes[1].hist(var["samples"][big] / np.sqrt(big), bins=bins, alpha=0.6, label="q.k / sqrt(d_k)")
    axes[1].set_title(f"logits at d_k={big}", fontsize=10)
    axes[1].set_xlabel("logit")
    place_legend(axes[1], fontsize=8)
    sd = np.array(sat["d_k"])
    axes[2].plot(sd, sat["max_weight_unscaled"], "o-", label="unscaled")
    axes[2].plot(sd, sat["max_weight_scaled"], "s-", label="scaled by 1/sqrt(d_k)")
    axes[2].axhline(1.0 / sat["n_keys"], color="grey", ls=":", label=f"uniform (1/{sat['n_keys']})")
    axes[2].set_xscale("log", base=2)
    axes[2].set_ylim(0, 1.05)
    axes[2].set_xlabel("d_k")
    axes[2].set_ylabel("mean max softmax weight")
    axes[2].set_title(f"softmax saturation ({sat['n_keys']} random keys)", fontsize=10)
    place_legend(axes[2], fontsize=8)
    fig.suptitle("Figure 3: why divide by sqrt(d_k) (random unit-variance vectors)", fontsize=10)
    fig.tight_layout()
    return fig, {"variance": {k: v for k, v in var.items() if k != "samples"}, "saturation": sat}


def _draw_head_schematic(ax, num_heads: int, d_head: int, concat: int, d_model: int) -> None:
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    colours = plt.cm.tab10(np.arange(num_heads) % 10)
    width = 0.9 / num_heads
    for i in range(num_heads):
        ax.add_patch(Rectangle((0.05 + i * width, 0.68), width * 0.9, 0.16, color=colours[i], alpha=0.8))
        ax.text(0.05 + (i + 0.45) * width, 0.76, f"h{i}\n{d_head}", ha="center", va="center", fontsize=7)
        ax.add_patch(Rectangle((0.05 + i * width, 0.38), width, 0.12, color=colours[i], alpha=0.8))
    ax.text(0.5, 0.9, f"{num_heads} heads, each [B, T, {d_head}]", ha="center", fontsize=9)
    ax.add_patch(FancyArrowPatch((0.5, 0.66), (0.5, 0.52), arrowstyle="->", mutation_scale=12))
    ax.text(0.5, 0.30, f"Concat(heads 0..{num_heads - 1}): [B, T, {concat}]", ha="center", fontsize=9)
    ax.add_patch(FancyArrowPatch((0.5, 0.26), (0.5, 0.15), arrowstyle="->", mutation_scale=12))
    ax.text(0.5, 0.07, f"x W^O, W^O [{concat}, {d_model}]  ->  [B, T, {d_model}]", ha="center", fontsize=9)


def fig4_heads(seed: int = 3, t: int = 6, d_model_toy: int = 16, d_model: int = 512, num_heads: int = 8):
    """Figure 4: four heads' weights softmax(Q_i K_i^T / sqrt(d_k)) beside Concat(heads 0..7) W^O at
    base width (heads named ``layer.head`` from 0, as everywhere in attnlab: the toy has one layer).

    The four patterns come from :func:`attnlab.ref.multi_head_attention` with random ``X [1, T, 16]``
    and random projections (illustrative). The schematic's widths are measured by splitting a
    ``[1, T, 512]`` projection into 8 heads and merging them back.

    Returns:
        ``(figure, {"head_weights": [4, T, T], "head_widths": [8 x 64], "concat_width": 512,
        "w_o_shape": [512, 512]})``.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(1, t, d_model_toy))  # [B=1, T, d_model]
    params = {
        name: rng.normal(size=(d_model_toy, d_model_toy)) * 0.35 for name in ("W_q", "W_k", "W_v", "W_o")
    }
    _, weights = multi_head_attention(x, None, params, 4)  # [1, 4, T, T]
    projected = np.zeros((1, t, d_model))  # stands for X W^Q at base width  [1, T, 512]
    heads = split_heads(projected, num_heads)  # [1, 8, T, 64]
    concat = merge_heads(heads)  # [1, T, 512]
    head_widths = [int(heads.shape[-1])] * heads.shape[1]
    fig = plt.figure(figsize=(12, 3.6))
    grid = fig.add_gridspec(1, 6, width_ratios=[1, 1, 1, 1, 0.15, 2.6])
    tokens = [f"t{i + 1}" for i in range(t)]
    for i in range(4):
        ax = fig.add_subplot(grid[0, i])
        heatmap(weights[0, i], tokens, tokens, ax=ax, annotate=False, title=f"head 0.{i}")
        if i:
            ax.set_yticklabels([])
    _draw_head_schematic(
        fig.add_subplot(grid[0, 5]), heads.shape[1], head_widths[0], concat.shape[-1], d_model
    )
    fig.suptitle(
        "Figure 4: four illustrative head patterns (random weights) | "
        "base model: eight 64-wide heads concatenate to 512",
        fontsize=10,
    )
    fig.tight_layout()
    return fig, {
        "head_weights": weights[0],
        "head_widths": head_widths,
        "concat_width": int(concat.shape[-1]),
        "w_o_shape": [int(concat.shape[-1]), d_model],
    }


def encoder_layer_groups(d_model: int = 512, num_heads: int = 8, d_ff: int = 2048) -> dict:
    """Parameters of one post-norm encoder layer, by group, counted from a built module.

    Uses :class:`attnlab.nn.EncoderLayer` (groups ``self_attn``, ``ffn``, ``norm1 + norm2``) and
    falls back to ``torch.nn.TransformerEncoderLayer`` (``self_attn``, ``linear1 + linear2``,
    ``norm1 + norm2``) if the engine is not installed. Expected at the base size: MHA = 4d^2 + 4d =
    1,050,624; FFN = 2 d d_ff + d_ff + d = 2,099,712; norms = 4d = 2,048.

    Returns:
        ``{"MHA": int, "FFN": int, "norms": int, "total": int, "source": str}``.
    """
    import torch

    def count(*modules) -> int:
        return sum(p.numel() for m in modules for p in m.parameters())

    with torch.device("meta"):  # shapes only, no memory
        try:
            layer = EncoderLayer(BlockConfig(d_model, num_heads, d_ff))
            groups = {
                "MHA": count(layer.self_attn),
                "FFN": count(layer.ffn),
                "norms": count(layer.norm1, layer.norm2),
                "source": "attnlab.nn.EncoderLayer",
            }
        except ImportError:
            layer = torch.nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True)
            groups = {
                "MHA": count(layer.self_attn),
                "FFN": count(layer.linear1, layer.linear2),
                "norms": count(layer.norm1, layer.norm2),
                "source": "torch.nn.TransformerEncoderLayer",
            }
    groups["total"] = count(layer)
    return groups


def fig5_parameter_groups(d_model: int = 512, num_heads: int = 8, d_ff: int = 2048):
    """Figure 5: parameter groups of the base encoder layer as bars with exact counts.

    Returns:
        ``(figure, encoder_layer_groups(d_model, num_heads, d_ff))``.
    """
    groups = encoder_layer_groups(d_model, num_heads, d_ff)
    names = ["MHA", "FFN", "norms"]
    values = [groups[n] for n in names]
    labels = ["MHA\n4d²+4d", "FFN\n2d·d_ff+d_ff+d", "two LayerNorms\n4d"]
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    bars = ax.bar(labels, values, color=["#4c72b0", "#dd8452", "#55a868"])
    for bar, v in zip(bars, values):
        ax.text(bar.get_x() + bar.get_width() / 2, v, f"{v:,}", ha="center", va="bottom", fontsize=9)
    ax.set_ylabel("parameters")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_ylim(0, max(values) * 1.15)
    ax.set_title(
        f"Figure 5: one encoder layer, d_model={d_model}, h={num_heads}, d_ff={d_ff}\n"
        f"total {groups['total']:,} (counted from {groups['source']})",
        fontsize=9,
    )
    fig.tight_layout()
    return fig, groups


FIGURES = {
    "fig1": fig1_fixed_vs_additive,
    "fig2": fig2_toy_weights,
    "fig3": fig3_scaling,
    "fig4": fig4_heads,
    "fig5": fig5_parameter_groups,
}


def draw_figures(out_dir, fmt: str = "png", dpi: int = 90, progress=None) -> dict:
    """Write fig1..fig5 as ``out_dir/figN.<fmt>``.

    Args:
        out_dir: folder (created if missing).
        fmt: ``"png"`` or ``"svg"``.
        dpi: resolution of PNGs.
        progress: optional callable, called with 1 after each figure (a tqdm bar's ``update``).
    Returns:
        ``{name: {"path": Path, "numbers": dict}}`` in figure order.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {list(FORMATS)}, got {fmt!r}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir={out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    result = {}
    for name, make in FIGURES.items():
        fig, numbers = make()
        path = out / f"{name}.{fmt}"
        save_figure(fig, path, fmt=fmt, dpi=dpi)
        plt.close(fig)
        result[name] = {"path": path, "numbers": numbers}
        if progress is not None:
            progress(1)
    return result
