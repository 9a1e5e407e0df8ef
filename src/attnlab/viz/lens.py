"""Figures of :mod:`attnlab.interp.lens`: the logit lens by layer and the residual stream's norms."""

from __future__ import annotations

from pathlib import Path

import torch

from attnlab.viz.legends import place_legend, save_figure


def logit_lens_figure(
    by_layer: dict[str, torch.Tensor], tokens: list[str], path: str | Path, title: str = ""
):
    """Probability (top) and rank (bottom) of the eventual output token, ``by_layer["prob"|"rank"]
    [L + 1, T]`` (:func:`attnlab.interp.lens.eventual_token_by_layer`), layer against position."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prob, rank = by_layer["prob"].numpy(), by_layer["rank"].numpy()
    layers, t = prob.shape
    fig, axes = plt.subplots(2, 1, figsize=(max(6, 0.28 * t + 2), 1.0 * layers + 2.6), sharex=True)
    for ax, data, label, cmap in (
        (axes[0], prob, "probability", "viridis"),
        (axes[1], rank, "rank (0 = top)", "magma_r"),
    ):
        im = ax.imshow(data, aspect="auto", cmap=cmap, origin="lower")
        ax.set_ylabel("layer (0 = embeddings)")
        ax.set_yticks(range(layers))
        fig.colorbar(im, ax=ax, label=label)
    axes[1].set_xticks(range(t))
    axes[1].set_xticklabels(tokens, rotation=90, fontsize=6)
    axes[1].set_xlabel("position (its input token)")
    fig.suptitle(title or "Logit lens: the eventual output token, read at every layer", fontsize=10)
    save_figure(fig, path)
    plt.close(fig)
    return Path(path)


def residual_norms_figure(norms: dict[str, torch.Tensor], path: str | Path, title: str = ""):
    """Mean L2 norm of each sub-block's write (attention, MLP) per layer, and of the residual stream
    after each layer, averaged over positions: ``norms`` from :meth:`ResidualStream.norms`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    resid, attn, mlp = (norms[k].mean(dim=-1).numpy() for k in ("resid", "attn", "mlp"))
    layers = len(attn)
    fig, ax = plt.subplots(figsize=(6, 3.4))
    x = range(layers)
    ax.bar([i - 0.2 for i in x], attn, width=0.4, label="attention write |a_l|")
    ax.bar([i + 0.2 for i in x], mlp, width=0.4, label="MLP write |m_l|")
    ax.plot(range(-1, layers), resid, "k.-", label="residual stream |h_l| (after layer l; -1 = embeddings)")
    ax.set_xlabel("layer")
    ax.set_ylabel("mean L2 norm over positions")
    ax.set_xticks(range(-1, layers))
    ax.grid(alpha=0.3)
    place_legend(ax, fontsize=7)
    ax.set_title(title or "What each sub-block writes into the residual stream", fontsize=10)
    save_figure(fig, path)
    plt.close(fig)
    return Path(path)
