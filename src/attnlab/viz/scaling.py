"""The cost plot of beyond-quadratic attention: one layer's token-mixing FLOPs against T, per kind."""

from __future__ import annotations

from pathlib import Path

from attnlab.audit import Workload, audit_cost
from attnlab.audit.config import ModelSpec
from attnlab.nn import BlockConfig
from attnlab.viz.legends import place_legend, save_figure

# (label, BlockConfig.attention, window): what the plot and the concept page compare
KINDS = (
    ("SDPA causal (dense kernel)", "sdpa", None),
    ("SDPA + window mask W=256", "sdpa", 256),
    ("block-sparse window W=256", "block_sparse", 256),
    ("linear attention", "linear", None),
    ("SSM (n = 16)", "ssm", None),
)


def mixing_flops(lengths=(1024, 2048, 4096, 8192, 16384), d_model: int = 512, heads: int = 8) -> dict:
    """Executed FLOPs of one layer's token mixing (every term but the FFN and logits, as the kind's
    kernel runs it: :func:`attnlab.audit.audit_cost`'s ``executed``) at each T in ``lengths``.

    Returns ``{label: [flops at T for T in lengths]}`` for the kinds of :data:`KINDS`.
    """

    out = {}
    for label, kind, window in KINDS:
        block = BlockConfig(d_model, heads, 4 * d_model, norm_place="pre", attention=kind, window=window)
        spec = ModelSpec("gpt", block, layers=1, vocab=1000)
        out[label] = [
            sum(
                t["flops"]
                for t in audit_cost(spec, Workload(seq=t, window=window))["executed"]["terms"]
                if t["term"] not in ("FFN", "logits")
            )
            for t in lengths
        ]
    return out


def mixing_cost_figure(path: str | Path, lengths=(1024, 2048, 4096, 8192, 16384)) -> dict:
    """Plot :func:`mixing_flops` against T on log-log axes (one line per kind, the legend where it
    covers no point) and write it to ``path``. Returns the plotted numbers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = mixing_flops(lengths)
    fig, ax = plt.subplots(figsize=(6.2, 3.8))
    styles = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", "-")]
    for (label, values), (marker, dash) in zip(data.items(), styles):
        ax.plot(
            lengths,
            [v / 1e9 for v in values],
            marker=marker,
            linestyle=dash,
            markerfacecolor="none",
            label=label,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(list(lengths), [f"{t // 1024}k" for t in lengths])
    ax.set_xlabel("sequence length T")
    ax.set_ylabel("GFLOPs executed, one layer")
    ax.set_title("Token mixing, d = 512, h = 8 (attnlab audit cost --attention KIND)", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    place_legend(ax, fontsize=7)
    save_figure(fig, path)
    plt.close(fig)
    return data
