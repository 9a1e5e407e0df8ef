"""The induction-head experiment: a two-layer attention-only GPT learns to copy, one layer cannot.

Three small GPTs (RoPE, untied unembedding) train on sequences ``[BOS, r_1..r_L, r_1..r_L, s..]``
(:func:`attnlab.interp.segment_batch`: a random segment repeated right after itself at a random
length L, then fresh random tokens). Every ``eval_every`` steps the run logs, on a fixed held-out
batch, the next-token loss on first occurrences (unpredictable: about ln(V - 1)) and on repeats
(predictable by copying), and on the probe ``[BOS, r, r]`` (:func:`attnlab.interp.repeated_tokens`)
every head's previous-token and induction score (``exclude_first=True``: heads park spare attention
on BOS). Olsson et al. (2022) report a phase change: in the two-layer model the repeat loss drops
sharply at the step where a layer-2 head's induction score jumps, beside a layer-1 previous-token
head; a one-layer model never forms one. At the end the best induction head is zero-ablated
(:func:`attnlab.interp.ablate_heads`) and the repeat loss measured again.

The causal test (:func:`causal_test`; the rule of :mod:`attnlab.experiments.verdicts`, stated
before the result): the induction heads (score > 0.5) zeroed against as many other heads zeroed, in
:data:`CONTROL_DRAWS` distinct random draws (any layer; a previous-token head can be drawn). Per
held-out row, the repeat loss with the induction heads zeroed minus the mean over the draws of the
repeat loss with the random heads zeroed; **agrees** (the induction heads carry the in-context
copying) when its 95% interval over the rows lies above zero, **disagrees** below, **inconclusive**
otherwise; a model with no induction head has nothing to test (``None``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from attnlab._io import atomic_write_bytes, atomic_write_json
from attnlab.devices import torch_threads
from attnlab.experiments import verdicts
from attnlab.interp import repeated_tokens, score_heads, segment_batch
from attnlab.interp.ablation import ablate_heads
from attnlab.interp.read import attention
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.progress import progress
from attnlab.viz.legends import place_legend, save_figure

MODELS = {  # name -> (layers, ffn)
    "1-layer attention-only": (1, "none"),
    "2-layer attention-only": (2, "none"),
    "2-layer with MLPs": (2, "mlp"),
}


@dataclasses.dataclass(frozen=True)
class Settings:
    """Data (``vocab``, ``seq_len``, segment lengths ``min_len..max_len``, probe ``probe_len``), model
    (``d_model``, ``num_heads``; MLP width ``4 d_model``) and training (``steps``, ``batch_size``,
    ``lr`` with AdamW, ``eval_every``, ``seed``) of the run; ``models``: names from ``MODELS``."""

    vocab: int = 32
    seq_len: int = 32
    min_len: int = 8
    max_len: int = 15
    probe_len: int = 10
    d_model: int = 32
    num_heads: int = 4
    steps: int = 2500
    batch_size: int = 32
    lr: float = 5e-3
    eval_every: int = 50
    eval_size: int = 128
    seed: int = 0
    models: tuple[str, ...] = tuple(MODELS)

    def __post_init__(self) -> None:
        unknown = [m for m in self.models if m not in MODELS]
        if unknown or not self.models:
            raise ValueError(f"models must be names from {list(MODELS)}, got {list(self.models)}")
        if 1 + 2 * self.probe_len > self.seq_len:
            raise ValueError(
                f"probe_len={self.probe_len}: the probe [BOS, r, r] has {1 + 2 * self.probe_len} tokens, "
                f"more than seq_len={self.seq_len}"
            )


# The quick preset (about 2 minutes on 2 quiet cores): the two attention-only models; the MLP model
# trains slower and forms its induction head later, so it is in the full run only.
QUICK = Settings(steps=1000, models=("1-layer attention-only", "2-layer attention-only"))
# The demo report's run: the two-layer model alone, logged every 100 steps.
DEMO = Settings(steps=1000, eval_every=100, eval_size=64, models=("2-layer attention-only",))


@dataclasses.dataclass
class ModelRun:
    """One model's log (``history``: step, loss_first, loss_repeat, previous [L][h], induction [L][h])
    and end results: the best heads, and the repeat loss with the best induction head zero-ablated,
    with every head of induction score > 0.5 ablated, and with the best previous-token head ablated."""

    name: str
    params: int
    seconds: float
    history: list[dict]
    best_induction: float
    best_head: tuple[int, int]
    best_previous: float
    previous_head: tuple[int, int]
    loss_first: float
    loss_repeat: float
    loss_repeat_ablated: float
    induction_heads: list[tuple[int, int]]
    loss_repeat_all_ablated: float
    loss_repeat_previous_ablated: float
    phase_step: int | None
    causal: dict | None = None


CONTROL_DRAWS = 5  # random draws of as many other heads, against the induction heads


def _losses(model: GPT, batch) -> tuple[float, float]:
    """Mean next-token loss on first occurrences and on repeats of a :class:`SegmentBatch`."""
    with torch.no_grad():
        logits = model(batch.ids[:, :-1])  # [B, T-1, V]
        loss = F.cross_entropy(logits.transpose(1, 2), batch.ids[:, 1:], reduction="none")  # [B, T-1]
    return float(loss[batch.first].mean()), float(loss[batch.repeat].mean())


def repeat_loss_per_row(model: GPT, batch) -> torch.Tensor:
    """Each held-out row's mean next-token loss on its repeats ``[B]`` (a :class:`SegmentBatch`)."""
    with torch.no_grad():
        logits = model(batch.ids[:, :-1])  # [B, T-1, V]
        loss = F.cross_entropy(logits.transpose(1, 2), batch.ids[:, 1:], reduction="none")  # [B, T-1]
    mask = batch.repeat.float()  # [B, T-1]
    return (loss * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)


def random_heads(
    shape: tuple[int, int], exclude: list[tuple[int, int]], draws: int, seed: int
) -> list[list[tuple[int, int]]]:
    """Up to ``draws`` distinct sets of ``len(exclude)`` heads of a ``shape = (L, h)`` model, none
    of them in ``exclude``, drawn at random (seeded; at most ``20 * draws`` tries); none when fewer
    than ``len(exclude)`` heads are left."""
    pool = [(i, j) for i in range(shape[0]) for j in range(shape[1]) if (i, j) not in exclude]
    if len(pool) < len(exclude):
        return []
    gen, found = torch.Generator().manual_seed(seed), []
    for _ in range(20 * draws):
        heads = sorted(pool[k] for k in torch.randperm(len(pool), generator=gen)[: len(exclude)].tolist())
        if heads not in found:
            found.append(heads)
        if len(found) == draws:
            break
    return found


def causal_test(model: GPT, held_out, induction: list[tuple[int, int]], shape, seed: int) -> dict | None:
    """The module doc's causal test: ``{"heads", "random_heads" (the draws), "loss_induction_zeroed",
    "loss_random_zeroed" (the draws' mean), "draws" (each draw's mean loss), "difference",
    "interval", "answer"}``; ``None`` without an induction head (or no other head to draw)."""
    draws = random_heads(shape, induction, CONTROL_DRAWS, seed) if induction else []
    if not draws:
        return None
    with ablate_heads(model, induction):
        zeroed = repeat_loss_per_row(model, held_out)  # [B]
    randoms = []
    for heads in draws:
        with ablate_heads(model, heads):
            randoms.append(repeat_loss_per_row(model, held_out))
    random = torch.stack(randoms)  # [K, B]
    mean, lo, hi = verdicts.mean_interval((zeroed - random.mean(dim=0)).tolist())
    return {
        "heads": induction,
        "random_heads": draws,
        "loss_induction_zeroed": round(float(zeroed.mean()), 4),
        "loss_random_zeroed": round(float(random.mean()), 4),
        "draws": [round(float(x), 4) for x in random.mean(dim=1)],
        "difference": round(mean, 4),
        "interval": [round(lo, 4), round(hi, 4)],
        "answer": verdicts.decide(lo, hi, +1),
    }


def _scores(model: GPT, probe: torch.Tensor) -> dict[str, torch.Tensor]:
    weights = attention(model, probe)  # [L, B, h, T, T]
    return score_heads(weights, probe, ("previous", "induction"), exclude_first=True)


def _log_entry(model: GPT, step: int, held_out, probe: torch.Tensor) -> dict:
    model.eval()
    first, repeat = _losses(model, held_out)
    sc = _scores(model, probe)
    model.train()
    return {
        "step": step,
        "loss_first": round(first, 4),
        "loss_repeat": round(repeat, 4),
        "previous": [[round(v, 4) for v in row] for row in sc["previous"].tolist()],
        "induction": [[round(v, 4) for v in row] for row in sc["induction"].tolist()],
    }


def _best(scores: torch.Tensor) -> tuple[float, tuple[int, int]]:
    flat = int(scores.argmax())
    return float(scores.flatten()[flat]), divmod(flat, scores.shape[1])


def build(settings: Settings, name: str) -> GPT:
    """The GPT ``name`` of ``MODELS`` at the settings' sizes (seeded)."""
    layers, ffn = MODELS[name]
    torch.manual_seed(settings.seed)
    config = GPTConfig(
        vocab_size=settings.vocab,
        d_model=settings.d_model,
        num_heads=settings.num_heads,
        num_layers=layers,
        d_ff=4 * settings.d_model,
        max_len=settings.seq_len,
        positions="rope",
        ffn=ffn,
        tie_weights=False,
    )
    return GPT(config)


def train_one(settings: Settings, name: str, *, show_progress: bool = True) -> tuple[GPT, ModelRun]:
    """Train model ``name``; log losses and head scores every ``eval_every`` steps (on one thread:
    these models are too small to gain from more, and on a busy machine extra threads wait on each
    other — measured 20x slower on 2 shared cores)."""
    with torch_threads(1):
        return _train_one(settings, name, show_progress)


def _train_one(settings: Settings, name: str, show_progress: bool) -> tuple[GPT, ModelRun]:
    s = settings
    model = build(s, name)
    gen = torch.Generator().manual_seed(s.seed + 1)
    held_out = segment_batch(
        s.eval_size, s.seq_len, s.vocab, s.min_len, s.max_len, generator=torch.Generator().manual_seed(10_000)
    )
    probe = repeated_tokens(32, s.probe_len, s.vocab, seed=s.seed + 2)  # [32, 1 + 2 L]
    opt = torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=0.0)
    history, t0 = [], time.perf_counter()
    with progress(total=s.steps, desc=f"{name:<24}", unit="step", quiet=not show_progress) as bar:
        for step in range(s.steps + 1):
            if step % s.eval_every == 0 or step == s.steps:
                history.append(_log_entry(model, step, held_out, probe))
                bar.set_postfix_str(
                    f"repeat loss {history[-1]['loss_repeat']:.3f}, "
                    f"induction {max(map(max, history[-1]['induction'])):.2f}"
                )
            if step == s.steps:
                break
            batch = segment_batch(s.batch_size, s.seq_len, s.vocab, s.min_len, s.max_len, generator=gen)
            logits = model(batch.ids[:, :-1])  # [B, T-1, V]
            loss = F.cross_entropy(logits.reshape(-1, s.vocab), batch.ids[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            bar.update(1)
    model.eval()
    seconds = time.perf_counter() - t0
    sc = _scores(model, probe)
    best_ind, head = _best(sc["induction"])
    best_prev, prev_head = _best(sc["previous"])
    first, repeat = _losses(model, held_out)
    with ablate_heads(model, [head]):
        _, repeat_ablated = _losses(model, held_out)
    inductive = [
        (i, j) for i, row in enumerate(sc["induction"].tolist()) for j, v in enumerate(row) if v > 0.5
    ]
    with ablate_heads(model, inductive):
        _, repeat_all = _losses(model, held_out)
    with ablate_heads(model, [prev_head]):
        _, repeat_prev = _losses(model, held_out)
    # the phase change: the first logged step where the repeat loss is below half of the first-occurrence loss
    phase = next((h["step"] for h in history if h["loss_repeat"] < 0.5 * h["loss_first"]), None)
    run = ModelRun(
        name=name,
        params=sum(p.numel() for p in model.parameters()),
        seconds=round(seconds, 1),
        history=history,
        best_induction=round(best_ind, 4),
        best_head=head,
        best_previous=round(best_prev, 4),
        previous_head=prev_head,
        loss_first=round(first, 4),
        loss_repeat=round(repeat, 4),
        loss_repeat_ablated=round(repeat_ablated, 4),
        induction_heads=inductive,
        loss_repeat_all_ablated=round(repeat_all, 4),
        loss_repeat_previous_ablated=round(repeat_prev, 4),
        phase_step=phase,
        causal=causal_test(model, held_out, inductive, tuple(sc["induction"].shape), s.seed + 3),
    )
    return model, run


def _ablated(r: ModelRun) -> str:
    """The summary's note on ablating the run's induction heads (none above the threshold: nothing)."""
    if not r.induction_heads:
        return "(no head scored as an induction head: nothing to ablate)"
    heads = ", ".join(f"{i}.{j}" for i, j in r.induction_heads)
    note = f"({r.loss_repeat_all_ablated:.3f} with the induction heads {heads} ablated"
    if r.causal is None:
        return note + ")"
    return note + f", {r.causal['loss_random_zeroed']:.3f} with as many random heads: {r.causal['answer']})"


def _causal_cells(c: dict | None) -> list[str]:
    """The causal test's two table cells (``none`` without an induction head)."""
    if c is None:
        return ["none", "none (no induction head)"]
    draws = f"{min(c['draws']):.3f}-{max(c['draws']):.3f}"
    lo, hi = c["interval"]
    return [
        f"{c['loss_random_zeroed']:.3f} ({draws})",
        f"{c['difference']:+.3f} ({lo:+.3f} to {hi:+.3f}): {c['answer']}",
    ]


@dataclasses.dataclass
class InductionResult:
    """The settings, one :class:`ModelRun` per model, the trained models and the files written."""

    settings: Settings
    runs: list[ModelRun]
    models: dict[str, GPT]
    files: dict[str, str]

    def rows(self) -> tuple[list[str], list[list[str]]]:
        """``(header, rows)``, one row per model: best heads (layer.head, 0-based), losses, and the
        repeat loss with heads zero-ablated (the cells of :meth:`table`)."""
        header = [
            "model", "params", "best induction", "best previous-token", "loss first", "loss repeat",
            "repeat, best induction head ablated", "repeat, all induction heads ablated",
            "repeat, previous-token head ablated", "phase change at step",
            f"repeat, as many random heads ablated ({CONTROL_DRAWS} draws: mean, min-max)",
            "induction minus random (95%): verdict",
        ]  # fmt: skip
        rows = []
        for r in self.runs:
            heads = ", ".join(f"{i}.{j}" for i, j in r.induction_heads) or "none"
            rows.append(
                [
                    r.name,
                    f"{r.params:,}",
                    f"{r.best_induction:.2f} ({r.best_head[0]}.{r.best_head[1]})",
                    f"{r.best_previous:.2f} ({r.previous_head[0]}.{r.previous_head[1]})",
                    f"{r.loss_first:.3f}",
                    f"{r.loss_repeat:.3f}",
                    f"{r.loss_repeat_ablated:.3f}",
                    f"{r.loss_repeat_all_ablated:.3f} ({heads})",
                    f"{r.loss_repeat_previous_ablated:.3f}",
                    f"{r.phase_step if r.phase_step is not None else 'none'}",
                    *_causal_cells(r.causal),
                ]
            )
        return header, rows

    def table(self) -> str:
        """One row per model as a Markdown table (:meth:`rows`; the first column left-aligned)."""
        header, rows = self.rows()
        lines = [
            "| " + " | ".join(header) + " |",
            "| --- | " + " | ".join(["---:"] * (len(header) - 1)) + " |",
        ]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)


def plot(runs: list[ModelRun], settings: Settings, path: Path) -> None:
    """Loss on first occurrences (dotted) and repeats (solid) on the left, the best induction
    (solid) and previous-token (dashed) head scores on the right, against training step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for i, r in enumerate(runs):
        colour = f"C{i}"
        steps = [h["step"] for h in r.history]
        axes[0].plot(steps, [h["loss_repeat"] for h in r.history], color=colour, label=f"{r.name}: repeats")
        axes[0].plot(
            steps, [h["loss_first"] for h in r.history], color=colour, ls=":", label=f"{r.name}: first"
        )
        best_ind = [max(map(max, h["induction"])) for h in r.history]
        best_prev = [max(map(max, h["previous"])) for h in r.history]
        axes[1].plot(steps, best_ind, color=colour, label=f"{r.name}: induction")
        axes[1].plot(steps, best_prev, color=colour, ls="--", label=f"{r.name}: previous token")
    axes[0].axhline(math.log(settings.vocab - 1), color="grey", lw=0.8)
    axes[0].set_ylabel("held-out next-token loss (nats)")
    axes[1].set_ylabel("best head score (exclude BOS)")
    axes[1].set_ylim(-0.02, 1.02)
    for ax in axes:
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        place_legend(ax, fontsize=6)
    fig.suptitle(
        f"Induction heads: V={settings.vocab}, T={settings.seq_len}, "
        f"repeated segments of {settings.min_len}-{settings.max_len} tokens",
        fontsize=10,
    )
    save_figure(fig, path)
    plt.close(fig)


def run(settings: Settings, out_dir: str | Path, *, show_progress: bool = True, log=print) -> InductionResult:
    """Train every model of ``settings.models``; write ``results.json``, ``results.md`` (the table)
    and ``induction.png`` into ``out_dir``."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir={out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    runs, models = [], {}
    for name in settings.models:
        model, r = train_one(settings, name, show_progress=show_progress)
        runs.append(r)
        models[name] = model
        log(
            f"{name:<24} {r.params:>6,} params, {r.seconds:.0f} s: best induction {r.best_induction:.2f}, "
            f"repeat loss {r.loss_repeat:.3f} " + _ablated(r)
        )
    files = {
        "json": str(out / "results.json"),
        "table": str(out / "results.md"),
        "plot": str(out / "induction.png"),
    }
    result = InductionResult(settings, runs, models, files)
    settings_json = dataclasses.asdict(settings)
    settings_json["models"] = list(settings.models)
    atomic_write_json(
        files["json"], {"settings": settings_json, "models": [dataclasses.asdict(r) for r in runs]}
    )
    atomic_write_bytes(files["table"], (result.table() + "\n").encode())
    plot(runs, settings, Path(files["plot"]))
    return result
