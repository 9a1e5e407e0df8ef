"""The recall experiment: what sliding windows, linear attention and a state-space layer trade.

Multi-query associative recall (MQAR, as in the Zoology paper, Arora et al. 2023): a sequence of
``P`` key-value pairs ``k_1 v_1 ... k_P v_P`` is followed by the ``P`` keys again in a random order;
at each of those queries the model must output the value that followed that key. Accuracy is the
share of queries answered correctly on fresh sequences.

Every kind is attnlab's GPT (:class:`attnlab.models.GPT`) with ``layers`` pre-norm blocks, one
head and an MLP, differing only in the block's ``attention`` setting (:data:`KIND_BLOCKS`):

- ``attention``: full causal softmax attention (``sdpa``, RoPE);
- ``window``: the same with a causal sliding window of ``window`` tokens, shorter than the distance
  from most queries back to their keys (SDPA under the window's mask, which the ``block_sparse``
  kind is proven equal to);
- ``linear``: causal linear attention (``linear``), a ``d x d`` state;
- ``ssm``: the selective state-space layer (``ssm``, :class:`attnlab.nn.SelectiveSSM`: Mamba's
  short convolution, input-dependent ``delta``, ``B``, ``C`` and a SiLU gate), a ``d x n`` state.

Expected (Zoology): attention solves it at every length; the window only for the few keys inside
it; linear attention and the SSM, whose memory is a fixed-size state, need more width as P grows.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from attnlab._io import atomic_write_bytes, atomic_write_json, dumps_json
from attnlab.devices import torch_threads
from attnlab.experiments.recall_settings import KINDS as KINDS
from attnlab.experiments.recall_settings import QUICK as QUICK
from attnlab.experiments.recall_settings import Settings
from attnlab.models.gpt import GPT, GPTConfig


def mqar_batch(n: int, pairs: int, settings: Settings, generator: torch.Generator):
    """``n`` MQAR sequences: ids ``[n, 3P]`` (keys ``0..K-1``, values ``K..K+V-1``) and targets
    ``[n, 3P]`` (the value at each query, -100 elsewhere), plus each query's distance to its key."""
    k, v = settings.num_keys, settings.num_values
    keys = torch.argsort(torch.rand(n, k, generator=generator), dim=-1)[:, :pairs]  # distinct  [n, P]
    values = k + torch.randint(0, v, (n, pairs), generator=generator)  # [n, P]
    order = torch.argsort(torch.rand(n, pairs, generator=generator), dim=-1)  # query order  [n, P]
    ids = torch.empty(n, 3 * pairs, dtype=torch.long)
    ids[:, 0 : 2 * pairs : 2], ids[:, 1 : 2 * pairs : 2] = keys, values
    ids[:, 2 * pairs :] = keys.gather(1, order)
    targets = torch.full_like(ids, -100)
    targets[:, 2 * pairs :] = values.gather(1, order)
    distance = 2 * pairs + torch.arange(pairs) - 2 * order  # query position - key position  [n, P]
    return ids, targets, distance


# Each kind is a block configuration of attnlab's GPT (attnlab.nn.BlockConfig), nothing private.
KIND_BLOCKS = {
    "attention": {"attention": "sdpa", "positions": "rope"},
    # sdpa under the window's boolean mask: at T <= 3 * 32 every sequence fits in one 128-tile, where
    # block_sparse (proven equal to it) would skip nothing and cost a compile
    "window": {"attention": "sdpa", "positions": "rope"},
    "linear": {"attention": "linear", "positions": "rope"},
    "ssm": {"attention": "ssm", "positions": "none"},
}


def build_model(kind: str, vocab: int, width: int, settings: Settings) -> GPT:
    """The GPT of ``kind`` (:data:`KIND_BLOCKS`): ``settings.layers`` pre-norm blocks of width
    ``width``, one head, an MLP of ``2 width``; ids ``[B, T]`` -> logits ``[B, T, vocab]``."""
    block = dict(KIND_BLOCKS[kind])
    if kind == "window":
        block["window"] = settings.window
    if kind == "ssm":
        block["state_size"] = settings.state
    config = GPTConfig(
        vocab_size=vocab,
        d_model=width,
        num_heads=1,
        num_layers=settings.layers,
        d_ff=2 * width,
        max_len=3 * max(settings.pairs),
        **block,
    )
    return GPT(config)


@dataclass
class Cell:
    """One trained model: its kind, pairs, width, parameters, accuracy, seconds."""

    kind: str
    pairs: int
    width: int
    params: int
    accuracy: float
    within_window: float
    final_loss: float
    seconds: float


@dataclass
class RecallResult:
    settings: Settings
    cells: list[Cell]
    files: dict[str, str] = field(default_factory=dict)

    def table(self) -> str:
        """Accuracy, one row per (kind, pairs), one column per width."""
        widths = self.settings.widths
        lines = [f"{'kind':<10} {'pairs':>5} " + " ".join(f"{'d=' + str(w):>7}" for w in widths)]
        for kind in self.settings.kinds:
            for p in self.settings.pairs:
                acc = {c.width: c.accuracy for c in self.cells if c.kind == kind and c.pairs == p}
                lines.append(f"{kind:<10} {p:>5} " + " ".join(f"{acc[w]:>7.2f}" for w in widths))
        return "\n".join(lines)


def train_one(kind: str, pairs: int, width: int, settings: Settings) -> Cell:
    """Train one model on fresh MQAR batches (seeded) and score it on a held-out set."""
    seed = settings.seed * 1000 + 97 * pairs + width + KINDS.index(kind)
    torch.manual_seed(seed)
    vocab = settings.num_keys + settings.num_values
    model = build_model(kind, vocab, width, settings)
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=settings.lr, total_steps=settings.steps, pct_start=0.1
    )
    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    loss = torch.tensor(math.nan)
    model.train()
    for _ in range(settings.steps):
        ids, targets, _ = mqar_batch(settings.batch_size, pairs, settings, gen)
        logits = model(ids)  # [B, T, vocab]
        loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    ids, targets, distance = mqar_batch(
        settings.eval_size, pairs, settings, torch.Generator().manual_seed(10**6 + seed)
    )
    with torch.no_grad():
        pred = model(ids).argmax(-1)[:, 2 * pairs :]  # [n, P]
    correct = (pred == targets[:, 2 * pairs :]).float()
    return Cell(
        kind,
        pairs,
        width,
        sum(p.numel() for p in model.parameters()),
        round(float(correct.mean()), 4),
        round(float((distance < settings.window).float().mean()), 4),
        round(loss.item(), 4),
        round(time.perf_counter() - t0, 1),
    )


def _plot(result: RecallResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnlab.viz.legends import place_legend, save_figure

    s = result.settings
    fig, axes = plt.subplots(1, len(s.pairs), figsize=(3.6 * len(s.pairs) + 1, 3.4), squeeze=False)
    styles = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":")]
    for ax, p in zip(axes[0], s.pairs):
        for i, kind in enumerate(s.kinds):
            cells = [c for c in result.cells if c.kind == kind and c.pairs == p]
            cells.sort(key=lambda c: c.width)
            marker, dash = styles[i % len(styles)]
            ax.plot(
                [c.width for c in cells],
                [c.accuracy for c in cells],
                marker=marker,
                linestyle=dash,
                markerfacecolor="none",
                label=kind,
            )
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(s.widths), [str(w) for w in s.widths])
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("model width d")
        ax.set_ylabel("recall accuracy")
        ax.set_title(f"{p} key-value pairs (T={3 * p})", fontsize=9)
        ax.grid(alpha=0.3)
    fig.suptitle(f"MQAR: accuracy against width, window={s.window}, {s.steps} steps each", fontsize=10)
    fig.tight_layout()
    place_legend(axes[0][0], fontsize=7)
    save_figure(fig, path)
    plt.close(fig)


def _train_all(settings: Settings, log) -> list[Cell]:
    cells = []
    for p in settings.pairs:
        for w in settings.widths:
            for kind in settings.kinds:
                cell = train_one(kind, p, w, settings)
                cells.append(cell)
                log(f"{kind:<10} pairs={p:<3} d={w:<4} accuracy {cell.accuracy:.2f}  ({cell.seconds:.0f} s)")
    return cells


def run(settings: Settings, out_dir: str | Path | None = None, *, log=print) -> RecallResult:
    """Train every (kind, pairs, width) model; write ``results.json`` and ``accuracy_vs_width.png``
    into ``out_dir`` when given."""
    if out_dir is not None:
        from attnlab.training.rundir import claim

        claim(Path(out_dir))  # refuse someone else's folder before any training
    # Models this small gain nothing from a second thread, and on a loaded machine each operation
    # would wait for it: one thread (restored afterwards).
    with torch_threads(1):
        cells = _train_all(settings, log)
    result = RecallResult(settings, cells)
    if out_dir is not None:
        out = Path(out_dir)
        result.files = {"json": str(out / "results.json"), "plot": str(out / "accuracy_vs_width.png")}
        atomic_write_json(result.files["json"], to_json(result))
        atomic_write_bytes(str(out / "table.txt"), (result.table() + "\n").encode())
        result.files["table"] = str(out / "table.txt")
        _plot(result, Path(result.files["plot"]))
    return result


def to_json(result: RecallResult) -> dict:
    """The settings and every cell, JSON-ready."""
    return {"settings": asdict(result.settings), "cells": [asdict(c) for c in result.cells]}


def dumps(result: RecallResult) -> str:
    return dumps_json(to_json(result), indent=2)
