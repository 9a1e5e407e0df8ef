"""The bottleneck experiment: does one fixed context vector strain as sources grow, and does
attention remove the strain?

Four models are trained on the same task and data, sized to comparable parameter counts:

- ``fixed``: :class:`~attnlab.models.Seq2SeqRNN`, p(y | x) = prod_t p(y_t | y_<t, c), where c is the
  encoder's final state — every source, short or long, squeezed into the same ``hidden`` numbers;
- ``bahdanau``: :class:`~attnlab.models.AttentionRNN` with additive attention,
  c_t = sum_i alpha_ti h_i, alpha_t = softmax_i(v_a^T tanh(W_a s_{t-1} + U_a h_i));
- ``luong``: :class:`~attnlab.models.AttentionRNN` with Luong's "general" score s_t^T W_a h_i;
- ``transformer``: :class:`~attnlab.models.Transformer` (encoder-decoder, cross-attention).

Sources have mixed lengths; held-out test sources (a split no training source can fall into) are
grouped into length buckets, decoded greedily, and scored by exact-sequence and token accuracy.
The plain-language notes (section 1) call the bottleneck "a strain, not a law": the table
reports whatever the run shows.
"""

from __future__ import annotations

import csv
import io
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from attnlab._io import atomic_write_bytes, atomic_write_json
from attnlab.interp.read import attention_maps
from attnlab.models.base import count_parameters
from attnlab.models.registry import build_model
from attnlab.tasks import BOS, EOS, Example, get_task
from attnlab.training import TrainConfig, train
from attnlab.training.evaluate import predict, score


@dataclass(frozen=True)
class ModelSpec:
    """One contestant: a display ``name``, the model ``kind``, fixed options and the option that is
    searched (``knob`` over ``choices``) to bring the parameter count near the target."""

    name: str
    kind: str
    fixed: dict[str, Any]
    knob: str
    choices: tuple[int, ...]


CONTESTANTS = (
    ModelSpec("fixed (Seq2SeqRNN)", "seq2seq-rnn", {"emb": 32}, "hidden", tuple(range(16, 513, 8))),
    ModelSpec(
        "bahdanau (AttentionRNN)",
        "attention-rnn",
        {"emb": 32, "attention": "bahdanau"},
        "hidden",
        tuple(range(16, 513, 8)),
    ),
    ModelSpec(
        "luong (AttentionRNN)",
        "attention-rnn",
        {"emb": 32, "attention": "luong-general"},
        "hidden",
        tuple(range(16, 513, 8)),
    ),
    ModelSpec("transformer", "transformer", {"heads": 4, "layers": 2}, "d_model", tuple(range(16, 513, 8))),
)


@dataclass(frozen=True)
class Settings:
    """Everything that decides the experiment's numbers."""

    task: str = "reverse"
    min_len: int = 3
    max_len: int = 24
    bucket_width: int = 4
    num_symbols: int = 10
    target_params: int = 60_000
    steps: int = 1500
    batch_size: int = 64
    lr: float = 5e-3
    warmup: int = 50
    train_size: int = 20_000
    eval_per_bucket: int = 200
    seed: int = 0
    models: tuple[str, ...] = (
        "fixed (Seq2SeqRNN)",
        "bahdanau (AttentionRNN)",
        "luong (AttentionRNN)",
        "transformer",
    )

    def __post_init__(self) -> None:
        for name in (
            "min_len",
            "max_len",
            "bucket_width",
            "num_symbols",
            "target_params",
            "steps",
            "batch_size",
            "train_size",
            "eval_per_bucket",
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.task not in ("reverse", "dates", "copy", "sort"):
            raise ValueError(f"task must be one of ['copy', 'dates', 'reverse', 'sort'], got {self.task!r}")
        if self.min_len > self.max_len:
            raise ValueError(f"min_len={self.min_len} is larger than max_len={self.max_len}")
        known = {c.name for c in CONTESTANTS}
        if not self.models or set(self.models) - known:
            raise ValueError(f"models must be a non-empty subset of {sorted(known)}, got {list(self.models)}")


# the demo's run: ~2-3 minutes of one core. 600 steps, not fewer: at 350 steps the Transformer is
# still undertrained (training loss 0.79 vs 0.007 for Bahdanau) and loses accuracy with length for
# that reason alone -- per-token errors compound over longer outputs -- not because of a bottleneck.
QUICK = Settings(
    min_len=3,
    max_len=17,
    bucket_width=3,
    target_params=40_000,
    steps=600,
    batch_size=64,
    lr=5e-3,
    warmup=30,
    train_size=8000,
    eval_per_bucket=60,
)
DATES = {"min_len": 8, "max_len": 27, "bucket_width": 4}  # date strings run from 8 to 28 characters


def buckets(settings: Settings) -> list[tuple[int, int]]:
    """Inclusive source-length ranges ``[(lo, hi), ...]`` covering min_len..max_len."""
    out, lo = [], settings.min_len
    while lo <= settings.max_len:
        out.append((lo, min(lo + settings.bucket_width - 1, settings.max_len)))
        lo += settings.bucket_width
    return out


def _task(settings: Settings, lo: int | None = None, hi: int | None = None):
    lo = settings.min_len if lo is None else lo
    hi = settings.max_len if hi is None else hi
    if settings.task == "dates":
        return get_task("dates", min_len=lo, max_len=hi)
    return get_task(settings.task, min_len=lo, max_len=hi, num_symbols=settings.num_symbols)


def match_size(spec: ModelSpec, vocab: int, target: int, max_len: int) -> tuple[dict[str, Any], int]:
    """The ``spec.knob`` value whose model has the parameter count closest to ``target``."""
    best: tuple[int, dict[str, Any], int] | None = None
    for value in spec.choices:
        params = {**spec.fixed, spec.knob: value}
        if spec.kind == "transformer":
            if value % params["heads"]:
                continue
            params.update(d_ff=2 * value, max_len=max_len)
        n = count_parameters(build_model(spec.kind, vocab, params))
        if best is None or abs(n - target) < best[0]:
            best = (abs(n - target), params, n)
        elif n > target:
            break  # counts grow with the knob: no closer value further on
    assert best is not None
    return best[1], best[2]


@dataclass
class ModelResult:
    name: str
    kind: str
    params: int
    model_params: dict[str, Any]
    train_seconds: float
    final_loss: float
    buckets: list[dict[str, Any]] = field(default_factory=list)
    overall: dict[str, float] = field(default_factory=dict)


@dataclass
class ExperimentResult:
    """The measured results, the paths of the files written, and the trained models."""

    settings: Settings
    models: list[ModelResult]
    files: dict[str, str]
    heatmaps: list[str]
    summary: str
    trained: dict[str, torch.nn.Module] = field(default_factory=dict, repr=False)

    def table(self) -> str:
        """A plain-text table: one row per model, exact accuracy per length bucket."""
        names = [f"{b['lo']}-{b['hi']}" for b in self.models[0].buckets]
        head = f"{'model':<24} {'params':>7}  " + "  ".join(f"{n:>6}" for n in names) + "   token acc"
        lines = [head, "-" * len(head)]
        for m in self.models:
            cells = "  ".join(f"{b['exact']:>6.2f}" for b in m.buckets)
            lines.append(f"{m.name:<24} {m.params:>7,}  {cells}   {m.overall['token_acc']:.3f}")
        return "\n".join(lines)


def _alignment(model, tok, example: Example) -> tuple[Any, list[str], list[str]]:
    """Teacher-forced attention of ``model`` on ``example``: ``(A [T, S], src labels, tgt labels)``,
    the last layer of its cross-attention averaged over heads (an RNN's alignment is one layer of
    one head), read at its hook points."""
    src_ids = tok.encode(example.src) + [EOS]
    tgt_ids = [BOS] + tok.encode(example.tgt)
    maps = attention_maps(model, torch.tensor([src_ids]), torch.tensor([tgt_ids]))
    (cross,) = [m for m in maps if m.cross]
    weights = cross.weights[-1, 0].mean(0)  # [L, 1, h, T, S] -> [T, S]
    # row t is the step that reads tgt_in[t] and predicts the t-th output symbol
    out_labels = [tok.token(i) for i in tok.encode(example.tgt) + [EOS]]
    return weights.numpy(), [tok.token(i) for i in src_ids], out_labels


def _plot(result_models: list[ModelResult], settings: Settings, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnlab.viz.legends import save_figure

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    # Curves often coincide (two models both at 1.0): distinct markers and dashes keep each visible.
    styles = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", (0, (5, 1, 1, 1)))]
    for i, m in enumerate(result_models):
        marker, dash = styles[i % len(styles)]
        x = [(b["lo"] + b["hi"]) / 2 for b in m.buckets]
        style = dict(marker=marker, linestyle=dash, markersize=7 - i, alpha=0.85, markerfacecolor="none")
        axes[0].plot(x, [b["exact"] for b in m.buckets], label=f"{m.name} ({m.params:,} params)", **style)
        axes[1].plot(x, [b["token_acc"] for b in m.buckets], label=m.name, **style)
    for ax, what in zip(axes, ("exact-sequence accuracy", "token accuracy")):
        ax.set_xlabel("source length (bucket centre)")
        ax.set_ylabel(what)
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
    fig.suptitle(
        f"Held-out accuracy vs source length: {settings.task}, "
        f"lengths {settings.min_len}-{settings.max_len}, {settings.steps} steps each",
        fontsize=10,
    )
    fig.tight_layout()
    # below both panels, where no curve can be: the models are the same in both, and inside the axes
    # every spot lies on some curve in one run or another (it sat on the fixed context's at length 8)
    axes[0].legend(
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        bbox_transform=fig.transFigure,
        ncol=2,
        fontsize=8,
        frameon=False,
    )
    save_figure(fig, path)
    plt.close(fig)


def _heatmap(weights, x_tokens, y_tokens, title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        from attnlab.viz import heatmap
    except (ImportError, AttributeError):  # viz not installed: a plain imshow
        heatmap = None
    from attnlab.viz.legends import save_figure

    fig, ax = plt.subplots(figsize=(min(1.2 + 0.32 * len(x_tokens), 12), min(1.0 + 0.3 * len(y_tokens), 12)))
    if heatmap is not None:
        heatmap(weights, x_tokens, y_tokens, ax=ax, title=title, annotate=False)
    else:
        ax.imshow(weights, cmap="Blues", vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(x_tokens)), x_tokens, fontsize=7)
        ax.set_yticks(range(len(y_tokens)), y_tokens, fontsize=7)
        ax.set_title(title, fontsize=9)
    ax.set_xlabel("source token (key)")
    ax.set_ylabel("output step (query)")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def summarize(models: list[ModelResult]) -> str:
    """One sentence per model: exact accuracy on the shortest and the longest bucket."""
    parts = []
    for m in models:
        first, last = m.buckets[0], m.buckets[-1]
        parts.append(
            f"{m.name}: exact {first['exact']:.2f} at length {first['lo']}-{first['hi']} -> "
            f"{last['exact']:.2f} at {last['lo']}-{last['hi']}"
        )
    return "; ".join(parts)


def _train_and_score(s, params, n_params, task, tests, settings: Settings, progress: bool):
    """Train contestant ``s`` at ``params`` and score it on every length bucket of ``tests``:
    ``(ModelResult, the trained model, training seconds)``."""
    cfg = TrainConfig(
        task=task.name,
        task_params=task.params(),
        model=s.kind,
        model_params=params,
        steps=settings.steps,
        batch_size=settings.batch_size,
        lr=settings.lr,
        warmup=settings.warmup,
        train_size=settings.train_size,
        eval_size=50,
        seed=settings.seed,
    )
    t0 = time.perf_counter()
    result = train(cfg, progress=progress, desc=f"{s.name:<24}")
    seconds = time.perf_counter() - t0
    mr = ModelResult(s.name, s.kind, n_params, params, round(seconds, 1), result.history[-1]["loss"])
    all_preds, all_tgts = [], []
    for (lo, hi), examples in tests.items():
        preds = predict(result.model, task, [e.src for e in examples])
        mr.buckets.append({"lo": lo, "hi": hi, **score(preds, [e.tgt for e in examples])})
        all_preds += preds
        all_tgts += [e.tgt for e in examples]
    mr.overall = score(all_preds, all_tgts)
    return mr, result.model, seconds


def _write_results(models: list[ModelResult], settings: Settings, files: dict[str, str], summary: str):
    """``results.csv`` (one row per model and bucket) and ``results.json``, each written atomically."""
    rows = [
        {
            "model": m.name,
            "kind": m.kind,
            "params": m.params,
            "bucket": f"{b['lo']}-{b['hi']}",
            "min_len": b["lo"],
            "max_len": b["hi"],
            "n": b["n"],
            "exact": round(b["exact"], 4),
            "token_acc": round(b["token_acc"], 4),
            "train_seconds": m.train_seconds,
        }
        for m in models
        for b in m.buckets
    ]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_bytes(files["csv"], buf.getvalue().encode())
    atomic_write_json(
        files["json"],
        {"settings": asdict(settings), "models": [asdict(m) for m in models], "summary": summary},
    )


def _draw_alignments(specs, trained: dict, tok, example, out: Path) -> list[str]:
    """One cross-attention heatmap per attention contestant on ``example``; the paths written."""
    heatmaps = []
    for s in specs:
        if s.kind == "seq2seq-rnn":
            continue  # one fixed c for every step: no alignment to draw
        weights, xs, ys = _alignment(trained[s.name], tok, example)
        path = out / f"heatmap-{s.kind}-{s.fixed.get('attention', 'cross')}.png"
        _heatmap(weights, xs, ys, f"{s.name}: {example.src} -> {example.tgt}", path)
        heatmaps.append(str(path))
    return heatmaps


def run(settings: Settings, out_dir: str | Path, *, progress: bool = True, log=print) -> ExperimentResult:
    """Train the contestants, score them by length bucket, and write ``results.csv``,
    ``results.json``, ``accuracy_vs_length.png`` and ``heatmap-*.png`` into ``out_dir``."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir={out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    task = _task(settings)
    tok = task.tokenizer
    specs = [c for c in CONTESTANTS if c.name in settings.models]
    max_tgt = settings.max_len if settings.task != "dates" else 10
    sizes = {
        s.name: match_size(s, tok.vocab_size, settings.target_params, settings.max_len + max_tgt + 4)
        for s in specs
    }
    for s in specs:
        log(f"{s.name:<24} {sizes[s.name][1]:>7,} parameters  ({s.knob}={sizes[s.name][0][s.knob]})")
    tests = {
        b: _task(settings, *b).sample("test", settings.eval_per_bucket, seed=settings.seed)
        for b in buckets(settings)
    }
    models: list[ModelResult] = []
    trained: dict[str, torch.nn.Module] = {}
    for s in specs:
        mr, trained[s.name], seconds = _train_and_score(s, *sizes[s.name], task, tests, settings, progress)
        models.append(mr)
        log(
            f"{s.name:<24} trained in {seconds:.0f} s; exact by length: "
            + "  ".join(f"{b['lo']}-{b['hi']}: {b['exact']:.2f}" for b in mr.buckets)
        )
    files = {
        "csv": str(out / "results.csv"),
        "json": str(out / "results.json"),
        "plot": str(out / "accuracy_vs_length.png"),
    }
    summary = summarize(models)
    _write_results(models, settings, files, summary)
    _plot(models, settings, Path(files["plot"]))
    longest = tests[buckets(settings)[-1]]
    example = min(longest, key=lambda e: (len(e.src), e.src))  # shortest of the longest bucket
    heatmaps = _draw_alignments(specs, trained, tok, example, out)
    return ExperimentResult(settings, models, files, heatmaps, summary, trained)
