"""RNN against Transformer: the length of the gradient path, and sequential against parallel training.

The Week 1 notes (section 1) say recurrent states "depend on their predecessors, limiting
parallelism along time and making long gradient paths difficult"; the plain-language notes put it
as "about T steps" against "a path length of O(1)". Two measurements, at each length T:

- **Gradient path.** ``||d y_T / d x_1||_F``, the Frobenius norm of the ``[d, d]`` Jacobian of the
  last output with respect to the first input, for a GRU (``torch.nn.GRU``, the recurrent cell of
  attnlab's RNN models) and for one causal self-attention layer
  (:class:`attnlab.nn.MultiHeadAttention`), both at their default initialisation, in float64 (the
  GRU's value underflows float32), the median over ``seeds`` initialisations. In the GRU the path
  from ``x_1`` to ``y_T`` runs through T - 1 recurrent steps; in attention it is one step.
- **Training step.** Seconds per forward + backward of a batch ``[B, T, d]`` (loss: mean square of
  the output), GRU against the same attention layer, timed interleaved in one process on one
  thread; shown as the GRU/attention ratio and as achieved GFLOP/s from the dense FLOP counts
  (GRU ``12 d^2`` per token forward, attention ``8 d^2 + 4 T d``; a training step about 3x the
  forward).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path

import torch
from torch import nn

from attnlab._checks import positive_int
from attnlab.devices import torch_threads
from attnlab.experiments.claim_result import (
    ClaimResult,
    figure,
    load_average,
    save,
    time_interleaved,
    write,
)
from attnlab.nn.config import BlockConfig
from attnlab.nn.multihead import MultiHeadAttention

CLAIM = (
    "Recurrent states also depend on their predecessors, limiting parallelism along time and making "
    "long gradient paths difficult."
)
SOURCE = (
    "the Week 1 notes on attention, section 1; the plain-language notes: 'about T steps' against "
    "'a path length of O(1)', and 'parallel training' (2026 T1 Quiz 2, Q9)"
)


@dataclasses.dataclass(frozen=True)
class Settings:
    """``lengths``: the T measured; ``d``/``heads``: the width of both models (and the attention's
    heads); ``seeds``: initialisations per gradient; ``batch``/``repeats``: the timed training step."""

    lengths: tuple[int, ...] = (8, 32, 128, 512, 1024)
    d: int = 64
    heads: int = 4
    seeds: int = 7
    batch: int = 16
    repeats: int = 7
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("d", "heads", "seeds", "batch", "repeats"):
            positive_int(name, getattr(self, name))
        if not self.lengths or any(positive_int("lengths", t) < 2 for t in self.lengths):
            raise ValueError(f"lengths must be integers >= 2, got {list(self.lengths)}")
        if self.d % self.heads:
            raise ValueError(f"d={self.d} is not divisible by heads={self.heads}")


QUICK = Settings(lengths=(8, 32, 128, 512), d=32, seeds=5, repeats=5)


def _gru(d: int) -> nn.Module:
    gru = nn.GRU(d, d, batch_first=True)
    return _Outputs(gru, lambda x: gru(x)[0])


def _attention(d: int, heads: int) -> nn.Module:
    attn = MultiHeadAttention(BlockConfig(d, heads))
    return _Outputs(attn, lambda x: attn(x, is_causal=True)[0])


class _Outputs(nn.Module):
    """A module whose forward is ``x [B, T, d] -> y [B, T, d]`` (the GRU's and the layer's outputs)."""

    def __init__(self, inner: nn.Module, fn) -> None:
        super().__init__()
        self.inner, self.fn = inner, fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


def jacobian_norm(model: nn.Module, length: int, d: int, generator: torch.Generator) -> float:
    """``||d y_T / d x_1||_F`` for one input ``x [1, T, d] ~ N(0, 1)``: one backward pass per output
    coordinate (``d`` of them), each giving one row of the ``[d, d]`` Jacobian."""
    x = torch.randn(1, length, d, generator=generator, dtype=torch.float64, requires_grad=True)
    y_last = model(x)[0, -1]  # [d]
    rows = [torch.autograd.grad(y_last[i], x, retain_graph=True)[0][0, 0] for i in range(d)]  # d x [d]
    return float(torch.stack(rows).norm())


def gradient_norms(s: Settings) -> dict[str, dict[int, float]]:
    """``{"gru": {T: norm}, "attention": {T: norm}}``: the median over ``s.seeds`` initialisations."""
    out: dict[str, dict[int, float]] = {"gru": {}, "attention": {}}
    for t in s.lengths:
        for kind in out:
            values = []
            for k in range(s.seeds):
                torch.manual_seed(s.seed * 1000 + k)
                model = (_gru(s.d) if kind == "gru" else _attention(s.d, s.heads)).double()
                values.append(jacobian_norm(model, t, s.d, torch.Generator().manual_seed(s.seed + k)))
            out[kind][t] = statistics.median(values)
    return out


def step_flops(kind: str, d: int, length: int, batch: int) -> float:
    """Dense FLOPs of one training step (forward x 3): GRU ``12 d^2`` per token (three gates, an
    input and a hidden matmul each), attention ``8 d^2 + 4 T d`` (four projections, Q K^T and A V)."""
    per_token = 12 * d * d if kind == "gru" else 8 * d * d + 4 * length * d
    return 3.0 * per_token * length * batch


def step_times(s: Settings) -> dict[str, dict[int, float]]:
    """Median seconds per training step (forward, mean-square loss, backward), interleaved per T."""
    torch.manual_seed(s.seed)
    models = {"gru": _gru(s.d), "attention": _attention(s.d, s.heads)}
    out: dict[str, dict[int, float]] = {k: {} for k in models}
    for t in s.lengths:
        x = torch.randn(s.batch, t, s.d, generator=torch.Generator().manual_seed(t))
        steps = {k: (lambda m=m, x=x: m(x).square().mean().backward()) for k, m in models.items()}
        timed = time_interleaved(steps, s.repeats)
        for k, v in timed.items():
            out[k][t] = v
    return out


def run(
    settings: Settings = QUICK, out_dir: str | Path | None = None, *, log=print, progress=True
) -> ClaimResult:
    """Measure both, build the table and verdict; with ``out_dir`` write JSON, table and plot."""
    s = settings
    t0 = time.perf_counter()
    with torch_threads(1):
        log(f"gradient norms at T = {', '.join(map(str, s.lengths))} ({s.seeds} initialisations each)")
        grads = gradient_norms(s)
        log("timing one training step of each, interleaved")
        load = load_average()
        times = step_times(s)
    result = _result(s, grads, times, load, time.perf_counter() - t0)
    if out_dir is not None:
        write(result, out_dir, plot)
    return result


def _result(s: Settings, grads, times, load, seconds: float) -> ClaimResult:
    header = [
        "T",
        "path GRU",
        "path attn",
        "|dy_T/dx_1| GRU",
        "|dy_T/dx_1| attn",
        "T x attn",
        "step ms GRU",
        "step ms attn",
        "GRU/attn time",
        "GFLOP/s GRU",
        "GFLOP/s attn",
    ]
    rows, gflops = [], {"gru": {}, "attention": {}}
    for t in s.lengths:
        for k in gflops:
            gflops[k][t] = step_flops(k, s.d, t, s.batch) / times[k][t] / 1e9
        rows.append(
            [
                str(t),
                f"{t - 1} steps",
                "1 step",
                f"{grads['gru'][t]:.1e}",
                f"{grads['attention'][t]:.1e}",
                f"{t * grads['attention'][t]:.2f}",
                f"{1e3 * times['gru'][t]:.2f}",
                f"{1e3 * times['attention'][t]:.2f}",
                f"{times['gru'][t] / times['attention'][t]:.2f}",
                f"{gflops['gru'][t]:.2f}",
                f"{gflops['attention'][t]:.2f}",
            ]
        )
    lo, hi = s.lengths[0], s.lengths[-1]
    per_step = (grads["gru"][s.lengths[1]] / grads["gru"][lo]) ** (1 / (s.lengths[1] - lo))
    verdict = (
        f"through the GRU, the gradient of the last output with respect to the first input falls from "
        f"{grads['gru'][lo]:.1e} at T = {lo} to {grads['gru'][hi]:.1e} at T = {hi} (a factor of about "
        f"{per_step:.2f} per recurrent step: exponential in the path length), through one attention layer "
        f"from {grads['attention'][lo]:.1e} to {grads['attention'][hi]:.1e}: about 1/T (T x norm stays "
        f"{min(t * grads['attention'][t] for t in s.lengths):.2f}-"
        f"{max(t * grads['attention'][t] for t in s.lengths):.2f}), because at initialisation the "
        f"weight spreads over T keys, not because the path is longer. A training step of the GRU runs T "
        f"dependent cell updates; the attention layer's work is a few matrix products that grow with T. "
        f"On one CPU thread the GRU reaches {min(gflops['gru'].values()):.1f}-"
        f"{max(gflops['gru'].values()):.1f} GFLOP/s at every T, attention "
        f"{min(gflops['attention'].values()):.1f}-{max(gflops['attention'].values()):.1f}; the time ratio "
        f"GRU/attention goes from {times['gru'][lo] / times['attention'][lo]:.2f} at T = {lo} to "
        f"{times['gru'][hi] / times['attention'][hi]:.2f} at T = {hi} (attention does more FLOPs per token "
        f"as T grows, the T^2 of the notes). One thread shows the work, not the parallelism: with more "
        f"cores or a GPU only attention's matrix products spread out; the GRU's T steps still run one "
        f"after another."
    )
    notes = [
        f"d = {s.d} (attention: {s.heads} heads), default initialisation, median over {s.seeds} seeds; "
        f"timing: batch {s.batch}, median of {s.repeats} interleaved steps on one thread, load average "
        f"{load} when the timing started."
    ]
    data = {
        "lengths": list(s.lengths),
        "gradient_norm": {k: {str(t): v for t, v in d.items()} for k, d in grads.items()},
        "step_seconds": {k: {str(t): v for t, v in d.items()} for k, d in times.items()},
        "gflops": {k: {str(t): round(v, 3) for t, v in d.items()} for k, d in gflops.items()},
        "gru_factor_per_step": per_step,
        "load_average": load,
    }
    return ClaimResult(
        "paths", CLAIM, SOURCE, header, rows, verdict, data, dataclasses.asdict(s), seconds, notes
    )


def plot(result: ClaimResult, path: Path) -> None:
    """Gradient norm against T (log scale) on the left, seconds per training step on the right."""
    d = result.data
    lengths = d["lengths"]
    fig, (left, right) = figure(2)
    styles = {"gru": ("GRU", "o", "-"), "attention": ("one attention layer", "s", "--")}
    for kind, (label, marker, dash) in styles.items():
        grads = [max(d["gradient_norm"][kind][str(t)], 1e-300) for t in lengths]
        left.plot(lengths, grads, marker=marker, ls=dash, mfc="none", label=label)
        right.plot(
            lengths,
            [1e3 * d["step_seconds"][kind][str(t)] for t in lengths],
            marker=marker,
            ls=dash,
            mfc="none",
            label=label,
        )
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T")
        ax.grid(alpha=0.3)
    left.set_ylabel("||d y_T / d x_1|| (Frobenius)")
    right.set_ylabel("ms per training step (one thread)")
    save(fig, path, "Gradient path and training step: GRU against one attention layer")
