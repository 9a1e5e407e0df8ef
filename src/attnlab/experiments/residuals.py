"""Residual connections keep a clean gradient path; layer norm keeps scales stable.

The Week 19 course page names the roles of the block's parts: "residual connections keep a clean
gradient path ... layer norm keeps scales stable". Four deep stacks of ``layers`` blocks (causal
self-attention and a GELU MLP, attnlab's :class:`~attnlab.nn.MultiHeadAttention` and
:class:`~attnlab.nn.FeedForward`), identical but for how each sub-block ``f`` is wrapped:

- ``pre-norm``: ``x + f(LN(x))`` (GPT-2, the course page's block);
- ``post-norm``: ``LN(x + f(x))`` (the original paper, the Week 1 notes' encoder layer);
- ``no residual``: ``LN(f(x))`` (post-norm without the ``x +``);
- ``no norm``: ``x + f(x)`` (residual only).

(The first two equal attnlab's :class:`~attnlab.nn.EncoderLayer` with a causal mask on the same
weights; a test holds them to it.) Each learns a next-token task on a random Markov chain (each
token is followed by its fixed successor with probability ``follow``, else by a uniform token), so
the loss has a known floor and any working stack reaches it quickly. At initialisation and after
``steps`` steps of AdamW it measures, on a held-out batch: the gradient norm of the first and of the
last block's parameters (their ratio: how much of the signal reaches the bottom of the stack), the
root-mean-square of the residual stream after every block, and the held-out loss.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attnlab._checks import positive_float, positive_int, probability
from attnlab.devices import torch_threads
from attnlab.experiments.claim_result import ClaimResult, figure, save, write
from attnlab.nn.config import BlockConfig
from attnlab.nn.layers import FeedForward, make_norm
from attnlab.nn.multihead import MultiHeadAttention
from attnlab.progress import progress as progress_bar

CLAIM = (
    "Residual connections keep a clean gradient path and let each block make small edits to a shared "
    "'residual stream'; layer norm keeps scales stable."
)
SOURCE = "the Week 19 course page, lesson 'The transformer block', Roles"
VARIANTS = {  # name -> (residual, norm place)
    "pre-norm": (True, "pre"),
    "post-norm": (True, "post"),
    "no residual": (False, "post"),
    "no norm": (True, "none"),
}


@dataclasses.dataclass(frozen=True)
class Settings:
    """The stack (``layers``, ``d``, ``heads``), the Markov task (``vocab``, ``seq_len``, ``follow``)
    and training (``steps``, ``batch``, ``lr``, ``eval_size``, ``seed``)."""

    layers: int = 24
    d: int = 32
    heads: int = 4
    vocab: int = 32
    seq_len: int = 32
    follow: float = 0.8
    steps: int = 300
    batch: int = 16
    lr: float = 3e-3
    eval_size: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("layers", "d", "heads", "vocab", "seq_len", "steps", "batch", "eval_size"):
            positive_int(name, getattr(self, name))
        probability("follow", self.follow)
        positive_float("lr", self.lr)
        if self.d % self.heads:
            raise ValueError(f"d={self.d} is not divisible by heads={self.heads}")


QUICK = Settings(layers=12, steps=100)


class Block(nn.Module):
    """One block ``x [B, T, d] -> [B, T, d]``: causal self-attention then the MLP, each sub-block ``f``
    wrapped as ``x + f(LN(x))`` (``norm="pre"``), ``LN(x + f(x))`` (``"post"``), ``LN(f(x))``
    (``residual=False``) or ``x + f(x)`` (``norm="none"``)."""

    def __init__(self, config: BlockConfig, residual: bool, norm: str) -> None:
        super().__init__()
        self.self_attn, self.ffn = MultiHeadAttention(config), FeedForward(config)
        self.norm1, self.norm2 = make_norm(config), make_norm(config)
        self.residual, self.norm = residual, norm

    def _wrap(self, x: torch.Tensor, f, norm: nn.Module) -> torch.Tensor:
        y = f(norm(x)) if self.norm == "pre" else f(x)
        if self.residual:
            y = x + y
        return norm(y) if self.norm == "post" else y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._wrap(x, lambda t: self.self_attn(t, is_causal=True)[0], self.norm1)
        return self._wrap(x, self.ffn, self.norm2)


class Stack(nn.Module):
    """Embedding, ``layers`` :class:`Block`, a final LayerNorm and the unembedding: ids ``[B, T]`` ->
    logits ``[B, T, V]``; ``scales`` (a list) receives each block output's RMS."""

    def __init__(self, s: Settings, residual: bool, norm: str) -> None:
        super().__init__()
        config = BlockConfig(s.d, s.heads, activation="gelu")
        self.embed = nn.Embedding(s.vocab, s.d)
        self.blocks = nn.ModuleList(Block(config, residual, norm) for _ in range(s.layers))
        self.final_norm = make_norm(config)
        self.unembed = nn.Linear(s.d, s.vocab)

    def forward(self, ids: torch.Tensor, scales: list | None = None) -> torch.Tensor:
        x = self.embed(ids)  # [B, T, d]
        for block in self.blocks:
            x = block(x)
            if scales is not None:
                scales.append(float(x.detach().square().mean().sqrt()))
        return self.unembed(self.final_norm(x))  # [B, T, V]


def markov_batch(n: int, s: Settings, successor: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``[n, seq_len + 1]`` ids of the chain: each next token is ``successor[previous]`` with
    probability ``follow``, else uniform over the vocabulary."""
    ids = torch.empty(n, s.seq_len + 1, dtype=torch.long)
    ids[:, 0] = torch.randint(0, s.vocab, (n,), generator=generator)
    for t in range(1, s.seq_len + 1):
        keep = torch.rand(n, generator=generator) < s.follow
        ids[:, t] = torch.where(
            keep, successor[ids[:, t - 1]], torch.randint(0, s.vocab, (n,), generator=generator)
        )
    return ids


def loss_floor(s: Settings) -> float:
    """The chain's entropy per token (nats): no model can beat it on average."""
    p_next = s.follow + (1 - s.follow) / s.vocab
    p_other = (1 - s.follow) / s.vocab
    return -(p_next * math.log(p_next) + (s.vocab - 1) * p_other * math.log(p_other))


def measure(model: Stack, ids: torch.Tensor) -> dict:
    """Held-out ``loss``, gradient norms of every block (``grad``, first to last) and ``scale``s."""
    model.zero_grad(set_to_none=True)
    scales: list[float] = []
    logits = model(ids[:, :-1], scales)
    loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
    loss.backward()
    grads = []
    for block in model.blocks:
        squares = [p.grad.square().sum() for p in block.parameters() if p.grad is not None]
        grads.append(float(torch.stack(squares).sum().sqrt()))
    model.zero_grad(set_to_none=True)
    return {"loss": round(loss.item(), 4), "grad": grads, "scale": [round(v, 4) for v in scales]}


def train_variant(s: Settings, name: str, held_out: torch.Tensor, successor, show: bool) -> dict:
    """Build variant ``name`` (seeded alike), measure, train ``steps`` steps, measure again."""
    torch.manual_seed(s.seed)
    model = Stack(s, *VARIANTS[name])
    before = measure(model, held_out)
    opt = torch.optim.AdamW(model.parameters(), lr=s.lr)
    gen = torch.Generator().manual_seed(s.seed + 1)
    with progress_bar(total=s.steps, desc=f"{name:<12}", unit="step", quiet=not show) as bar:
        for _ in range(s.steps):
            ids = markov_batch(s.batch, s, successor, gen)
            loss = F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            bar.update(1)
    return {"init": before, "trained": measure(model, held_out)}


def run(
    settings: Settings = QUICK, out_dir: str | Path | None = None, *, log=print, progress=True
) -> ClaimResult:
    """Train and measure every variant; with ``out_dir`` write JSON, table and plot."""
    s = settings
    t0 = time.perf_counter()
    successor = torch.randperm(s.vocab, generator=torch.Generator().manual_seed(s.seed + 7))
    held_out = markov_batch(s.eval_size, s, successor, torch.Generator().manual_seed(10_000 + s.seed))
    with torch_threads(1):
        runs = {name: train_variant(s, name, held_out, successor, progress) for name in VARIANTS}
    for name, r in runs.items():
        log(f"{name:<12} held-out loss {r['init']['loss']:.2f} -> {r['trained']['loss']:.2f}")
    result = _result(s, runs, time.perf_counter() - t0)
    if out_dir is not None:
        write(result, out_dir, plot)
    return result


def _ratio(m: dict) -> float:
    return m["grad"][0] / m["grad"][-1]


def _result(s: Settings, runs: dict, seconds: float) -> ClaimResult:
    header = [
        "stack",
        "first/last grad, init",
        "first/last grad, trained",
        "scale first -> last, init",
        "scale range, trained",
        "loss init",
        "loss trained",
    ]
    rows = []
    for name, r in runs.items():
        a, b = r["init"], r["trained"]
        rows.append(
            [
                name,
                f"{_ratio(a):.2g}",
                f"{_ratio(b):.2g}",
                f"{a['scale'][0]:.2f} -> {a['scale'][-1]:.2f}",
                f"{min(b['scale']):.2f}-{max(b['scale']):.2f}",
                f"{a['loss']:.2f}",
                f"{b['loss']:.2f}",
            ]
        )
    floor = loss_floor(s)
    nores, pre, post, nonorm = (runs[n] for n in ("no residual", "pre-norm", "post-norm", "no norm"))
    verdict = (
        f"after {s.steps} steps the stacks with residuals pass the gradient to their first block "
        f"(first/last gradient norm {_ratio(pre['trained']):.2g} pre-norm, {_ratio(post['trained']):.2g} "
        f"post-norm, {_ratio(nonorm['trained']):.2g} without norms) and learn the chain (held-out loss "
        f"{pre['trained']['loss']:.2f}, {post['trained']['loss']:.2f}, {nonorm['trained']['loss']:.2f}; "
        f"floor "
        f"{floor:.2f}); without residuals the first block gets {_ratio(nores['trained']):.1e} of the last "
        f"one's gradient and the loss stays at {nores['trained']['loss']:.2f} "
        f"(ln V = {math.log(s.vocab):.2f}). "
        f"Scales: post-norm holds every block's output at RMS {min(post['trained']['scale']):.2f}-"
        f"{max(post['trained']['scale']):.2f}; without norms the stream grows "
        f"{nonorm['init']['scale'][0]:.2f} -> {nonorm['init']['scale'][-1]:.2f} over {s.layers} blocks at "
        f"initialisation; pre-norm's stream grows too ({pre['trained']['scale'][0]:.2f} -> "
        f"{pre['trained']['scale'][-1]:.2f} trained): there the norm keeps each sub-block's input at scale "
        f"1, not the stream."
    )
    notes = [
        f"{s.layers} blocks of d = {s.d}, {s.heads} heads, MLP 4d; Markov chain over {s.vocab} tokens "
        f"(follow {s.follow}), T = {s.seq_len}, {s.steps} steps of batch {s.batch}, AdamW lr {s.lr}; "
        f"gradients and scales on {s.eval_size} held-out sequences; loss floor {floor:.2f} nats."
    ]
    data = {"variants": runs, "loss_floor": floor}
    return ClaimResult(
        "residuals", CLAIM, SOURCE, header, rows, verdict, data, dataclasses.asdict(s), seconds, notes
    )


def plot(result: ClaimResult, path: Path) -> None:
    """Per-block gradient norm (left) and residual-stream RMS (right), at init (dotted) and trained."""
    fig, (left, right) = figure(2)
    for i, (name, r) in enumerate(result.data["variants"].items()):
        for when, dash in (("init", ":"), ("trained", "-")):
            m = r[when]
            blocks = range(1, len(m["grad"]) + 1)
            label = f"{name}, {when}"
            left.plot(blocks, [max(g, 1e-30) for g in m["grad"]], color=f"C{i}", ls=dash, label=label)
            right.plot(blocks, m["scale"], color=f"C{i}", ls=dash, label=label)
    left.set_yscale("log")
    left.set_ylabel("gradient norm of the block's parameters")
    right.set_ylabel("RMS of the block's output")
    for ax in (left, right):
        ax.set_xlabel("block (1 = first)")
        ax.grid(alpha=0.3)
    save(fig, path, "Residuals and norms in a deep stack: gradients and scales by depth")
