"""Dot-product scoring against additive scoring: which is faster on hardware, and by how much.

The Week 19 course page: "Additive (Bahdanau) attention scores with a small MLP; multiplicative
(Luong, and the transformer's scaled dot product) uses dot products, which are faster on hardware
and became the standard." At equal sizes (``n`` queries and ``n`` keys of width ``d``, additive
width ``d_a = d``) this times one whole attention call (scores, softmax, weighted sum) of:

- Bahdanau: ``e_ti = v_a^T tanh(W_a s_t + U_a h_i)`` (:func:`attnlab.ref.additive_attention`,
  :class:`attnlab.nn.AdditiveAttention`): an ``[n, n, d_a]`` tensor of sums, a ``tanh`` on each
  entry, then a product with ``v_a``;
- Luong dot: ``e_ti = s_t . h_i`` (:func:`attnlab.ref.luong_attention`, :class:`attnlab.nn.LuongAttention`);
- scaled dot product: ``softmax(Q K^T / sqrt(d)) V`` (:func:`attnlab.ref.scaled_dot_product_attention`,
  ``torch.nn.functional.scaled_dot_product_attention``),

in NumPy and in PyTorch, float32, interleaved in one process on one thread, and reports the time
ratios. The dot forms are one matrix product ``[n, d] x [d, n]`` that BLAS runs near the machine's
peak; the additive form touches ``n^2 d_a`` entries one by one, with a transcendental function on each.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from attnlab import ref
from attnlab._blas import one_blas_thread
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
from attnlab.nn.attention import AdditiveAttention, LuongAttention

CLAIM = (
    "Additive (Bahdanau) attention scores with a small MLP; multiplicative (Luong, and the transformer's "
    "scaled dot product) uses dot products, which are faster on hardware and became the standard."
)
SOURCE = "the Week 19 course page, lesson 'Bahdanau and Luong attention', Going deeper"
KINDS = ("additive", "luong dot", "scaled dot")


@dataclasses.dataclass(frozen=True)
class Settings:
    """``sizes``: the n (queries = keys) timed; ``d``: the width (and ``d_a``); ``repeats``: timed calls."""

    sizes: tuple[int, ...] = (32, 128, 512, 1024)
    d: int = 64
    repeats: int = 9
    seed: int = 0

    def __post_init__(self) -> None:
        positive_int("d", self.d)
        positive_int("repeats", self.repeats)
        if not self.sizes:
            raise ValueError("sizes must name at least one n")
        for n in self.sizes:
            positive_int("sizes", n)


QUICK = Settings(sizes=(32, 128, 512), repeats=5)


def numpy_calls(n: int, d: int, rng: np.random.Generator) -> dict:
    """The three NumPy reference calls on one set of inputs ``s, h [n, d]`` (float32)."""
    s, h = (rng.normal(size=(n, d)).astype(np.float32) for _ in range(2))
    w, u = (rng.normal(size=(d, d)).astype(np.float32) / np.sqrt(d) for _ in range(2))
    v = rng.normal(size=d).astype(np.float32)
    return {
        "additive": lambda: ref.additive_attention(s, h, w, u, v),
        "luong dot": lambda: ref.luong_attention(s, h, "dot"),
        "scaled dot": lambda: ref.scaled_dot_product_attention(s, h, h),
    }


def torch_calls(n: int, d: int, seed: int) -> dict:
    """The three PyTorch calls on one set of inputs ``s, h [1, n, d]`` (float32, no autograd)."""
    g = torch.Generator().manual_seed(seed)
    s, h = (torch.randn(1, n, d, generator=g) for _ in range(2))
    torch.manual_seed(seed)
    additive, luong = AdditiveAttention(d, d, d), LuongAttention(d, d, "dot")
    q, k = s[:, None], h[:, None]  # [1, 1, n, d]: one head

    def no_grad(fn):
        def call():
            with torch.no_grad():
                return fn()

        return call

    return {
        "additive": no_grad(lambda: additive(s, h)),
        "luong dot": no_grad(lambda: luong(s, h)),
        "scaled dot": no_grad(lambda: F.scaled_dot_product_attention(q, k, k)),
    }


def score_entries(kind: str, n: int, d: int) -> int:
    """Entries the score step writes before the softmax: ``n^2 d_a`` for additive (the tanh's
    input), ``n^2`` for the dot forms."""
    return n * n * d if kind == "additive" else n * n


def run(
    settings: Settings = QUICK, out_dir: str | Path | None = None, *, log=print, progress=True
) -> ClaimResult:
    """Time every kind at every size in both libraries; with ``out_dir`` write JSON, table and plot."""
    s = settings
    t0 = time.perf_counter()
    times: dict[str, dict[str, dict[str, float]]] = {"numpy": {}, "torch": {}}
    load = load_average()
    with torch_threads(1):
        with one_blas_thread():
            for n in s.sizes:
                log(f"n = {n}: timing the three scores in NumPy and PyTorch")
                rng = np.random.default_rng(s.seed + n)
                times["numpy"][str(n)] = time_interleaved(numpy_calls(n, s.d, rng), s.repeats)
                times["torch"][str(n)] = time_interleaved(torch_calls(n, s.d, s.seed + n), s.repeats)
    result = _result(s, times, load, time.perf_counter() - t0)
    if out_dir is not None:
        write(result, out_dir, plot)
    return result


def _result(s: Settings, times: dict, load, seconds: float) -> ClaimResult:
    header = [
        "library",
        "n",
        "additive ms",
        "Luong dot ms",
        "scaled dot ms",
        "additive / Luong dot",
        "additive / scaled dot",
        "score entries additive / dot",
    ]
    rows = []
    for lib, by_n in times.items():
        for n, t in by_n.items():
            rows.append(
                [
                    lib,
                    n,
                    f"{1e3 * t['additive']:.3f}",
                    f"{1e3 * t['luong dot']:.3f}",
                    f"{1e3 * t['scaled dot']:.3f}",
                    f"{t['additive'] / t['luong dot']:.1f}",
                    f"{t['additive'] / t['scaled dot']:.1f}",
                    f"{s.d}",
                ]
            )
    ratios = {
        lib: [t["additive"] / min(t["luong dot"], t["scaled dot"]) for t in by_n.values()]
        for lib, by_n in times.items()
    }
    big = str(s.sizes[-1])
    verdict = (
        f"at equal sizes (d = d_a = {s.d}) additive scoring is "
        f"{min(ratios['numpy']):.1f}-{max(ratios['numpy']):.1f}x "
        f"slower than the faster dot form in NumPy and "
        f"{min(ratios['torch']):.1f}-{max(ratios['torch']):.1f}x in "
        f"PyTorch (n = {s.sizes[0]}-{big}); at n = {big} one additive call takes "
        f"{1e3 * times['torch'][big]['additive']:.1f} ms in PyTorch against "
        f"{1e3 * times['torch'][big]['scaled dot']:.2f} ms for the scaled dot product. The additive score "
        f"writes d_a = {s.d} times more entries (n^2 d_a sums, each through tanh) where the dot forms "
        "run one "
        "matrix product: the hardware advantage the course page names."
    )
    notes = [
        f"float32, one thread (torch and BLAS), median of {s.repeats} interleaved calls after a warm-up, "
        f"load average {load} when timing started; times include softmax and the weighted sum. The ratios "
        "are what to read: absolute times depend on the machine and its load."
    ]
    data = {
        "ms": {
            lib: {n: {k: 1e3 * v for k, v in t.items()} for n, t in by_n.items()}
            for lib, by_n in times.items()
        },
        "additive_over_fastest_dot": ratios,
        "load_average": load,
    }
    return ClaimResult(
        "scoring", CLAIM, SOURCE, header, rows, verdict, data, dataclasses.asdict(s), seconds, notes
    )


def plot(result: ClaimResult, path: Path) -> None:
    """Milliseconds per call against n, one panel per library, log-log."""
    fig, axes = figure(2)
    markers = dict(zip(KINDS, ("o", "s", "^")))
    for ax, (lib, by_n) in zip(axes, result.data["ms"].items()):
        sizes = [int(n) for n in by_n]
        for kind in KINDS:
            ax.plot(sizes, [by_n[str(n)][kind] for n in sizes], marker=markers[kind], mfc="none", label=kind)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("n (queries = keys)")
        ax.set_ylabel("ms per attention call")
        ax.set_title(lib, fontsize=9)
        ax.grid(alpha=0.3)
    save(fig, path, "Additive against dot-product scoring at equal sizes")
