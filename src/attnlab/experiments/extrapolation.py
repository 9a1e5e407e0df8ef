"""The length-extrapolation experiment: train at length L, evaluate at L, 2L, 4L, 8L.

Small decoder-only GPTs that differ only in ``positions`` (NoPE with the causal mask, sinusoidal,
learned, RoPE, ALiBi) are trained on the same stream of the *latest-passkey* task (below) at length
``L`` and scored at ``L, 2L, 4L, 8L``. The RoPE model is also scored with a scaling applied at
evaluation only (position interpolation ``linear`` with ``s = T / L``, dynamic NTK with ``s = 2``,
which adapts to ``T`` by itself, and YaRN with ``s = T / L``), and after a short fine-tune at ``2L``
with PI and with YaRN (``s = 2``, as the PI paper fine-tunes briefly at the target length).
Learned positions have no row past their table: those cells are "not applicable".

The task. A sequence is ``BOS`` then filler symbols, with ``needles`` passkey tokens ``K_v``
(value ``v``) at random positions. At every non-needle position after the first needle the answer
is the value of the *latest* needle so far. Longer inputs have a well-defined answer at every length,
and a model that has learned the rule (find the needles, prefer the most recent) scores at every
length; it needs content (which tokens are needles) *and* order (which needle is latest), so it
tests what positions are for. It is the passkey retrieval that the PI and YaRN papers use to
test extended context, with a second passkey so that position matters.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from attnlab._checks import positive_float, positive_int
from attnlab._io import atomic_write_json
from attnlab.devices import torch_threads
from attnlab.names import TRAINED_POSITIONS as TRAINED

NAMES = {"none": "NoPE", "sinusoidal": "sinusoidal", "learned": "learned", "rope": "RoPE", "alibi": "ALiBi"}


@dataclass(frozen=True)
class Settings:
    """Everything that decides the experiment's numbers."""

    train_len: int = 32
    multiples: tuple[int, ...] = (1, 2, 4, 8)
    d_model: int = 48
    num_heads: int = 4
    num_layers: int = 2
    steps: int = 600
    finetune_steps: int = 150
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 50
    eval_sequences: int = 128
    needles: int = 2
    num_values: int = 16
    num_filler: int = 32
    reached: float = 0.95
    seed: int = 0
    models: tuple[str, ...] = TRAINED

    def __post_init__(self) -> None:
        for name in (
            "train_len",
            "d_model",
            "num_heads",
            "num_layers",
            "steps",
            "batch_size",
            "warmup",
            "eval_sequences",
            "needles",
            "num_values",
            "num_filler",
        ):
            positive_int(f"Settings.{name}", getattr(self, name))
        if (
            isinstance(self.finetune_steps, bool)
            or not isinstance(self.finetune_steps, int)
            or self.finetune_steps < 0
        ):
            raise ValueError(f"Settings.finetune_steps must be an integer >= 0, got {self.finetune_steps!r}")
        positive_float("Settings.lr", self.lr)
        if not 0 < self.reached <= 1:
            raise ValueError(f"Settings.reached must lie in (0, 1], got {self.reached!r}")
        if not self.models or any(m not in TRAINED for m in self.models):
            raise ValueError(
                f"Settings.models must be a non-empty subset of {list(TRAINED)}, got {list(self.models)}"
            )
        ms = list(self.multiples)
        for m in ms:
            positive_int("Settings.multiples", m)
        if not ms or ms[0] != 1 or ms != sorted(set(ms)):
            raise ValueError(
                f"Settings.multiples must be increasing and start with 1 (the training length), got {ms}"
            )
        if self.train_len < self.needles + 2:
            raise ValueError(
                f"Settings.train_len={self.train_len} has no room for BOS, {self.needles} needles and a query"
            )
        if (self.d_model // self.num_heads) % 2 or self.d_model % self.num_heads:
            raise ValueError(
                f"Settings: d_model={self.d_model} / num_heads={self.num_heads} must be an even width (RoPE)"
            )

    @property
    def lengths(self) -> list[int]:
        """The evaluation lengths ``m L``."""
        return [m * self.train_len for m in self.multiples]


# Measured on the 2-core development machine at a load average of 13-20 (docs/concepts/11-positions.md):
# the full preset (the defaults above) 769 s; the quick one 253 s, 21 s of it CPU (idle: under a minute).
QUICK = Settings(train_len=16, d_model=32, steps=240, finetune_steps=50, batch_size=32, eval_sequences=64)


# --------------------------------------------------------------------------------------------- task
class LatestPasskey:
    """Token ids: 0 pad (unused), 1 BOS, ``2 .. 1+V`` the answers (values), then ``V`` needle
    tokens ``K_v``, then ``num_filler`` filler symbols."""

    def __init__(self, num_values: int, num_filler: int, needles: int):
        self.num_values, self.num_filler, self.needles = num_values, num_filler, needles
        self.bos, self.value0 = 1, 2
        self.needle0 = self.value0 + num_values
        self.filler0 = self.needle0 + num_values
        self.vocab_size = self.filler0 + num_filler

    def batch(self, rng: np.random.Generator, batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(ids [B, T], targets [B, T])``; targets are -100 where nothing is asked (before the first
        needle, on the needles themselves, and on BOS)."""
        ids = self.filler0 + rng.integers(0, self.num_filler, (batch, length))  # [B, T]
        ids[:, 0] = self.bos
        where = np.sort(
            1 + np.argsort(rng.random((batch, length - 1)), axis=1)[:, : self.needles], axis=1
        )  # [B, n]
        values = rng.integers(0, self.num_values, (batch, self.needles))  # [B, n]
        rows = np.arange(batch)[:, None]  # [B, 1]
        ids[rows, where] = self.needle0 + values
        t = np.arange(length)[None, :]  # [1, T]
        targets = np.full((batch, length), -100)
        for j in range(self.needles):  # later needles overwrite: the latest one so far is the answer
            targets = np.where(t > where[:, j : j + 1], self.value0 + values[:, j : j + 1], targets)
        targets[rows, where] = -100  # a needle position is not asked (its answer is itself)
        return torch.from_numpy(ids), torch.from_numpy(targets)


# --------------------------------------------------------------------------------------------- models
def build(settings: Settings, task: LatestPasskey, positions: str, scaling: dict | None = None):
    """A GPT of the experiment's size with ``positions`` (and RoPE ``scaling``); learned positions
    get a table of the training length only, the others a window of the longest evaluation length."""
    from attnlab.models.gpt import GPT, GPTConfig

    max_len = settings.train_len if positions == "learned" else settings.lengths[-1]
    config = GPTConfig(
        vocab_size=task.vocab_size,
        d_model=settings.d_model,
        num_heads=settings.num_heads,
        num_layers=settings.num_layers,
        d_ff=2 * settings.d_model,
        max_len=max_len,
        positions=positions,
        rope_scaling=scaling,
    )
    return GPT(config)


def rescaled(model, scaling: dict | None):
    """The same weights under another RoPE scaling (a scaling has no parameters)."""
    from attnlab.models.gpt import GPT

    twin = GPT(dataclasses.replace(model.config, rope_scaling=scaling))
    twin.load_state_dict(model.state_dict())
    return twin.eval()


def _progress(log, label: str, total: int, show_bar: bool):
    """A per-step callback: a tqdm bar on a terminal, else a plain line every 5 seconds."""
    if show_bar and sys.stdout.isatty():
        from tqdm import tqdm

        bar = tqdm(total=total, desc=label, leave=False)
        return lambda step, loss: (
            bar.update(1),
            bar.set_postfix(loss=f"{loss:.3f}"),
            step == total and bar.close(),
        )
    state = {"last": time.monotonic()}

    def plain(step: int, loss: float) -> None:
        if show_bar and time.monotonic() - state["last"] > 5:
            state["last"] = time.monotonic()
            log(f"  {label}: step {step}/{total}, loss {loss:.3f}")

    return plain


def train(model, task: LatestPasskey, settings: Settings, length: int, steps: int, seed, tick=None) -> float:
    """AdamW on the task at ``length`` for ``steps`` steps (linear warm-up, then linear decay to 10%,
    gradients clipped at 1); returns the last batch's loss."""
    rng = np.random.default_rng(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=0.0)
    model.train()
    loss = torch.tensor(math.nan)
    for step in range(steps):
        scale = min(1.0, (step + 1) / settings.warmup) * (1.0 - 0.9 * step / steps)
        for group in opt.param_groups:
            group["lr"] = settings.lr * scale
        ids, targets = task.batch(rng, settings.batch_size, length)  # [B, T] each
        logits = model(ids)  # [B, T, V]
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())  # ignores -100
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if tick is not None:
            tick(step + 1, loss.item())
    model.eval()
    return loss.item()


@torch.no_grad()
def evaluate(model, task: LatestPasskey, settings: Settings, length: int) -> dict[str, float]:
    """Mean cross-entropy and accuracy over every asked position of ``eval_sequences`` held-out
    sequences of ``length`` (the same sequences for every model)."""
    rng = np.random.default_rng([settings.seed, 1, length])
    total, right, count, left = 0.0, 0, 0, settings.eval_sequences
    while left:
        n = min(left, 64)
        ids, targets = task.batch(rng, n, length)  # [n, T] each
        logits = model(ids)  # [n, T, V]
        asked = targets != -100  # [n, T]
        total += float(F.cross_entropy(logits[asked], targets[asked], reduction="sum"))
        right += int((logits[asked].argmax(-1) == targets[asked]).sum())
        count += int(asked.sum())
        left -= n
    return {"loss": round(total / count, 4), "accuracy": round(right / count, 4)}


# --------------------------------------------------------------------------------------------- results
NOT_LEARNED = "did not learn the task at its training length"


@dataclass
class Row:
    """One line of the table: a model (and how its positions were scaled) scored at each length."""

    name: str
    positions: str
    scaling: str
    finetune_steps: int
    cells: dict[int, dict[str, float] | None] = field(default_factory=dict)  # length -> None: n/a

    def at(self, length: int) -> dict[str, float] | None:
        return self.cells.get(length)


@dataclass
class Result:
    settings: Settings
    rows: list[Row]
    seconds: float
    files: dict[str, str] = field(default_factory=dict)

    @property
    def lengths(self) -> list[int]:
        return self.settings.lengths

    def undertrained(self) -> list[str]:
        """Trained models whose accuracy at the training length is below ``settings.reached``."""
        L = self.settings.train_len
        return [r.name for r in self.rows if not r.scaling and r.at(L)["accuracy"] < self.settings.reached]

    def trained_at(self, row: Row) -> int:
        """The length ``row`` was trained at: twice the training length once fine-tuned there."""
        return 2 * self.settings.train_len if row.finetune_steps else self.settings.train_len

    def did_not_learn(self) -> list[str]:
        """Rows below ``settings.reached`` at the length they were trained at (a scaling applied at
        evaluation only is plain RoPE there): their curves say nothing about extrapolation."""
        bar = self.settings.reached
        return [r.name for r in self.rows if r.at(self.trained_at(r))["accuracy"] < bar]

    def ranking(self) -> list[str]:
        """The rows that learned the task, best first, by mean accuracy over the lengths past the
        training length (``n/a`` past a learned table counts as 0: it cannot read that far)."""
        past = [t for t in self.lengths if t > self.settings.train_len]
        skip = set(self.did_not_learn())

        def score(r: Row) -> float:
            return sum((r.at(t) or {"accuracy": 0.0})["accuracy"] for t in past) / max(len(past), 1)

        return [r.name for r in sorted(self.rows, key=score, reverse=True) if r.name not in skip]

    def table(self) -> str:
        """Accuracy and loss per model (rows) and length (columns), ``n/a`` past a learned table; the
        last column ranks the models that learned the task and marks the others."""
        rank = {name: i + 1 for i, name in enumerate(self.ranking())}
        head = f"{'model':<42}" + "".join(f"{'T=' + str(t):>16}" for t in self.lengths) + "  rank"
        lines = [head, f"{'':<42}" + "".join(f"{'acc    loss':>16}" for _ in self.lengths), "-" * len(head)]
        for r in self.rows:
            cells = []
            for t in self.lengths:
                c = r.at(t)
                cells.append(f"{'n/a':>16}" if c is None else f"{c['accuracy']:>9.3f}{c['loss']:>7.3f}")
            mark = str(rank[r.name]) if r.name in rank else NOT_LEARNED
            lines.append(f"{r.name:<42}" + "".join(cells) + f"  {mark}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "settings": dataclasses.asdict(self.settings),
            "lengths": self.lengths,
            "seconds": round(self.seconds, 1),
            "undertrained": self.undertrained(),
            "did_not_learn": self.did_not_learn(),
            "ranking": self.ranking(),
            "rows": [
                {
                    "name": r.name,
                    "positions": r.positions,
                    "scaling": r.scaling,
                    "finetune_steps": r.finetune_steps,
                    "results": {str(t): r.at(t) for t in self.lengths},
                }
                for r in self.rows
            ],
        }


def _scalings(settings: Settings, length: int) -> dict[str, dict]:
    """The evaluation-only scalings at ``length``: PI and YaRN stretch by ``s = T / L``; dynamic NTK
    has ``s = 2`` and rescales itself with ``T``."""
    L, s = settings.train_len, length / settings.train_len
    return {
        "PI": {"rope_type": "linear", "factor": s},
        "NTK-dynamic": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": L},
        "YaRN": {"rope_type": "yarn", "factor": s, "original_max_position_embeddings": L},
    }


def run(settings: Settings, out_dir: str | Path | None = None, *, progress: bool = True, log=print) -> Result:
    """Train, fine-tune and score every row; write ``results.json`` and ``accuracy_vs_length.png``
    into ``out_dir`` when given. Deterministic for given settings (seeded data and weights)."""
    out = None if out_dir is None else Path(out_dir)
    if out is not None and out.exists() and not out.is_dir():
        raise ValueError(f"out_dir={out} exists and is not a folder")
    with torch_threads(1):  # models this small only lose to a second thread's synchronisation
        return _run(settings, out, progress, log)


def _run(settings: Settings, out: Path | None, progress: bool, log) -> Result:
    start = time.perf_counter()
    task = LatestPasskey(settings.num_values, settings.num_filler, settings.needles)
    L = settings.train_len
    rows: list[Row] = []
    rope = None
    for positions in [p for p in TRAINED if p in settings.models]:
        torch.manual_seed(settings.seed)
        model = build(settings, task, positions)
        t0 = time.perf_counter()
        tick = _progress(log, NAMES[positions], settings.steps, progress)
        loss = train(model, task, settings, L, settings.steps, [settings.seed, 0], tick)
        row = Row(NAMES[positions], positions, "", 0)
        for t in settings.lengths:
            row.cells[t] = None if positions == "learned" and t > L else evaluate(model, task, settings, t)
        rows.append(row)
        log(
            f"{row.name:<12} trained {settings.steps} steps at T={L} in {time.perf_counter() - t0:.0f} s "
            f"(last loss {loss:.3f}); accuracy at T={L}: {row.at(L)['accuracy']:.3f}"
        )
        if positions == "rope":
            rope = model
    for label in ("PI", "NTK-dynamic", "YaRN") if rope is not None else ():
        row = Row(f"RoPE + {label} (at evaluation)", "rope", label, 0)
        for t in settings.lengths:
            scaling = _scalings(settings, t)[label]
            row.cells[t] = evaluate(rescaled(rope, scaling if t > L else None), task, settings, t)
        rows.append(row)
    if settings.finetune_steps and rope is not None:
        for label in ("PI", "YaRN"):
            scaling = _scalings(settings, 2 * L)[label]
            model = rescaled(rope, scaling)
            tick = _progress(log, f"RoPE + {label} fine-tune", settings.finetune_steps, progress)
            train(model, task, settings, 2 * L, settings.finetune_steps, [settings.seed, 2], tick)
            row = Row(
                f"RoPE + {label} (fine-tuned at {2 * L}, {settings.finetune_steps} steps)",
                "rope",
                label,
                settings.finetune_steps,
            )
            row.cells = {t: evaluate(model, task, settings, t) for t in settings.lengths}
            rows.append(row)
    result = Result(settings, rows, time.perf_counter() - start)
    bad = result.undertrained()
    if bad:
        log(f"warning: below {settings.reached:.0%} accuracy at the training length: {', '.join(bad)}")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        from attnlab.viz.positions import accuracy_vs_length

        result.files = {"json": str(out / "results.json"), "plot": str(out / "accuracy_vs_length.png")}
        accuracy_vs_length(result.to_json(), result.files["plot"])
        atomic_write_json(result.files["json"], result.to_json())
    return result
