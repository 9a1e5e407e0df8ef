"""GQA shrinks the KV cache with little quality loss: held-out loss against cache bytes per token.

The Week 19 course page: grouped-query attention "shares each key/value head across several query
heads, shrinking the KV cache several-fold with little quality loss"; multi-query attention is one
shared KV head. GPTs (attnlab's :class:`~attnlab.models.GPT`, RoPE, pre-norm) that differ only in
``num_kv_heads`` (h, h/2, 2, 1) learn Shakespeare's plays character by character (the corpus of
``attnlab train --text shakespeare``: :func:`attnlab.tasks.shakespeare.shakespeare`, 34 plays to
train on, 4 whole plays held out) on the same batches from the same seed. For each: the held-out
loss (nats per character, on fixed windows spread over the held-out plays), the KV-cache bytes per
token (``2 L h_kv d_k`` values, :func:`attnlab.audit.kv_cache_bytes`, checked against the tensors a
real cache holds after a prompt) and the parameter count (the K and V projections shrink too).
Extra seeds of the full-head model give the seed-to-seed spread a difference has to beat.

Verdict (stated before the result): first the competence gate, the full-head model's held-out loss
at least :data:`~attnlab.experiments.baselines.MARGIN` nats per character below the best n-gram
table's (unigram, bigram, trigram; add-one, counted on the training plays, scored on the held-out
ones: :mod:`attnlab.experiments.baselines`). A model that a bigram table matches has learned too
little for its quality to be lost, so the verdict is then "model too weak" (train with more steps or
a wider model), never "little quality loss". Past the gate: **agrees** when every shared-KV model's
loss is within the full-head model's seed-to-seed spread, **disagrees** when one is worse by more
than that spread and by more than 10% of what training gained over the best table,
**inconclusive** otherwise.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from attnlab._checks import positive_float, positive_int
from attnlab.audit.cost import kv_cache_bytes
from attnlab.devices import torch_threads
from attnlab.experiments import verdicts
from attnlab.experiments.baselines import gate, ngram_losses
from attnlab.experiments.claim_result import ClaimResult, figure, save, write
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.progress import progress as progress_bar
from attnlab.tasks.shakespeare import shakespeare
from attnlab.tasks.text_tokenizer import encode_chars

CLAIM = (
    "Grouped-query attention (GQA) shares each key/value head across several query heads, shrinking "
    "the KV cache several-fold with little quality loss."
)
SOURCE = "the Week 19 course page, lesson 'Multi-head attention', Going deeper"
BYTES = 4  # float32 cache values


@dataclasses.dataclass(frozen=True)
class Settings:
    """The GPTs (``d_model``, ``num_heads`` h, ``num_layers``, ``context`` T), training (``steps``,
    ``batch``, ``lr``), held-out windows (``eval_windows``) and ``spread_seeds`` extra seeds of the
    h-KV-head model."""

    d_model: int = 64
    num_heads: int = 8
    num_layers: int = 2
    context: int = 64
    steps: int = 600
    batch: int = 32
    lr: float = 3e-3
    eval_windows: int = 256
    spread_seeds: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("d_model", "num_heads", "num_layers", "context", "steps", "batch", "eval_windows"):
            positive_int(name, getattr(self, name))
        if not isinstance(self.spread_seeds, int) or self.spread_seeds < 0:
            raise ValueError(f"spread_seeds must be a non-negative integer, got {self.spread_seeds!r}")
        positive_float("lr", self.lr)
        if self.num_heads < 2 or self.num_heads % 2 or self.d_model % self.num_heads:
            raise ValueError(
                f"num_heads={self.num_heads} must be even, at least 2, and divide d_model={self.d_model}"
            )
        if (self.d_model // self.num_heads) % 2:
            raise ValueError(
                f"RoPE needs an even head width, got d_model/num_heads = {self.d_model // self.num_heads}"
            )

    @property
    def kv_heads(self) -> tuple[int, ...]:
        """h, h/2, 2, 1 without repeats, largest first."""
        return tuple(sorted({self.num_heads, self.num_heads // 2, 2, 1}, reverse=True))


QUICK = Settings(d_model=32, steps=120, batch=24, eval_windows=128, spread_seeds=1)


def shakespeare_ids() -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(train ids [N_train], held-out ids [N_val], vocabulary size)``, one id per character over
    the characters of both splits (as ``attnlab train --text shakespeare --tokenizer char`` does)."""

    train, val = shakespeare("train"), shakespeare("val")
    vocab = {c: i for i, c in enumerate(sorted(set(train) | set(val)))}
    return (
        torch.from_numpy(encode_chars(train, vocab)),
        torch.from_numpy(encode_chars(val, vocab)),
        len(vocab),
    )


def _windows(ids: torch.Tensor, starts: torch.Tensor, context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-token targets ``[n, T]`` of the windows ``ids[s : s + T + 1]``."""
    rows = torch.stack([ids[s : s + context + 1] for s in starts.tolist()])  # [n, T + 1]
    return rows[:, :-1], rows[:, 1:]


def build(s: Settings, kv_heads: int, vocab: int, seed: int) -> GPT:
    """The GPT with ``kv_heads`` KV heads, seeded; nothing else differs between them."""
    torch.manual_seed(seed)
    config = GPTConfig(
        vocab_size=vocab,
        d_model=s.d_model,
        num_heads=s.num_heads,
        num_kv_heads=kv_heads,
        num_layers=s.num_layers,
        d_ff=4 * s.d_model,
        max_len=s.context,
        positions="rope",
    )
    return GPT(config)


def cache_bytes_per_token(model: GPT, prompt: torch.Tensor) -> int:
    """Bytes of the K and V tensors a real KV cache holds after ``prompt [1, P]``, divided by P."""
    with torch.no_grad():
        state = model.start(prompt)
    total = sum(c.k.numel() * c.k.element_size() + c.v.numel() * c.v.element_size() for c in state.caches)
    return total // prompt.shape[1]


def train_one(s: Settings, kv_heads: int, seed: int, data, show: bool) -> dict:
    """Train one GPT on the shared batch stream; its held-out loss, cache bytes and parameters."""
    train_ids, val_ids, vocab = data
    model = build(s, kv_heads, vocab, seed)
    opt = torch.optim.AdamW(model.parameters(), lr=s.lr)
    gen = torch.Generator().manual_seed(s.seed + 1)  # the same batches for every model
    with progress_bar(total=s.steps, desc=f"h_kv={kv_heads} seed {seed}", unit="step", quiet=not show) as bar:
        for _ in range(s.steps):
            x, y = _windows(
                train_ids,
                torch.randint(0, len(train_ids) - s.context - 1, (s.batch,), generator=gen),
                s.context,
            )
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            bar.update(1)
    starts = torch.from_numpy(np.linspace(0, len(val_ids) - s.context - 1, s.eval_windows).astype(np.int64))
    model.eval()
    with torch.no_grad():
        losses = [
            F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            for x, y in (_windows(val_ids, part, s.context) for part in starts.split(64))
        ]
    d_k = s.d_model // s.num_heads
    return {
        "kv_heads": kv_heads,
        "seed": seed,
        "held_out_loss": round(float(torch.stack(losses).mean()), 4),
        "cache_bytes_per_token": kv_cache_bytes(s.num_layers, kv_heads, d_k, BYTES),
        "measured_cache_bytes_per_token": cache_bytes_per_token(model, val_ids[None, : s.context]),
        "params": sum(p.numel() for p in model.parameters()),
    }


def run(
    settings: Settings = QUICK, out_dir: str | Path | None = None, *, log=print, progress=True
) -> ClaimResult:
    """Train every model; with ``out_dir`` write JSON, table and plot."""
    s = settings
    t0 = time.perf_counter()
    data = shakespeare_ids()
    log(f"Shakespeare, one id per character: {len(data[0]):,} training and {len(data[1]):,} held-out ids")
    jobs = [(kv, s.seed) for kv in s.kv_heads] + [
        (s.num_heads, s.seed + k) for k in range(1, s.spread_seeds + 1)
    ]
    with torch_threads(1):
        models = [train_one(s, kv, seed, data, progress) for kv, seed in jobs]
    for m in models:
        log(f"h_kv = {m['kv_heads']} (seed {m['seed']}): held-out loss {m['held_out_loss']:.3f}")
    tables = ngram_losses(data[0].numpy(), data[1].numpy(), data[2])
    log("n-gram baselines (add-one, nats/char): " + ", ".join(f"{k} {v:.3f}" for k, v in tables.items()))
    result = _result(s, models, data[2], time.perf_counter() - t0, tables)
    if out_dir is not None:
        write(result, out_dir, plot)
    return result


def decide(full_loss: float, worst: float, seed_spread: float, tables: dict[str, float]) -> tuple[str, dict]:
    """``(answer, gate)``: the module doc's rule for the full-head model's loss ``full_loss``, the
    largest rise of a shared-KV model ``worst`` and the seed-to-seed ``seed_spread``."""
    g = gate(full_loss, tables)
    if not g["passed"]:
        return verdicts.TOO_WEAK, g
    if worst <= seed_spread:
        return verdicts.AGREES, g
    if worst > 0.1 * (g["best_loss"] - full_loss):
        return verdicts.DISAGREES, g
    return verdicts.INCONCLUSIVE, g


def _result(
    s: Settings, models: list[dict], vocab: int, seconds: float, tables: dict[str, float]
) -> ClaimResult:
    main = [m for m in models if m["seed"] == s.seed]
    full = main[0]
    spread = [m["held_out_loss"] for m in models if m["kv_heads"] == s.num_heads]
    header = ["KV heads", "kind", "cache bytes/token", "cache vs MHA", "params", "held-out loss", "vs MHA"]
    rows = []
    for m in main:
        kind = "MHA" if m["kv_heads"] == s.num_heads else "MQA" if m["kv_heads"] == 1 else "GQA"
        rows.append(
            [
                str(m["kv_heads"]),
                kind,
                f"{m['cache_bytes_per_token']:,}",
                f"1/{full['cache_bytes_per_token'] // m['cache_bytes_per_token']}",
                f"{m['params']:,}",
                f"{m['held_out_loss']:.3f}",
                f"{m['held_out_loss'] - full['held_out_loss']:+.3f}",
            ]
        )
    worst = max(m["held_out_loss"] - full["held_out_loss"] for m in main)
    mqa = main[-1]
    gain = math.log(vocab) - full["held_out_loss"]
    seed_spread = max(spread) - min(spread)
    versus = (
        f"more than the full-head model's own spread between {len(spread)} seeds ({seed_spread:.3f})"
        if worst > seed_spread
        else f"within the full-head model's own spread between {len(spread)} seeds ({seed_spread:.3f})"
    )
    answer, g = decide(full["held_out_loss"], worst, seed_spread, tables)
    below = (
        f"The n-gram tables score {', '.join(f'{k} {v:.3f}' for k, v in tables.items())} nats per character; "
        f"the full-head model, {full['held_out_loss']:.3f}, "
        + ("passes" if g["passed"] else "fails")
        + f" the gate (at least {g['margin']} below the best). Verdict: {answer}"
    )
    if answer == verdicts.TOO_WEAK:
        below += (
            ": no model here is better than a table of character pairs, so there is no quality to lose; "
            "train with more steps (the full preset, without the quick one) before reading the losses."
        )
    verdict = (
        below
        + ". "
        + (
            f"Sharing KV heads cuts the cache from {full['cache_bytes_per_token']:,} to "
            f"{mqa['cache_bytes_per_token']:,} bytes per token ({s.num_heads}x, MQA) while the held-out loss "
            f"moves by at most {worst:+.3f} nats per character (MHA {full['held_out_loss']:.3f}): {versus}, "
            f"and {worst / gain:.1%} of the {gain:.2f} nats training gained below the uniform guess "
            f"(ln {vocab} = {math.log(vocab):.2f}). The page's claim is about large models, where the same "
            "trade is measured on billions of tokens."
        )
    )
    same = all(m["cache_bytes_per_token"] == m["measured_cache_bytes_per_token"] for m in models)
    notes = [
        f"Shakespeare's plays, one id per character ({vocab} characters), held-out: 4 whole plays; "
        f"GPTs of d_model {s.d_model}, {s.num_heads} query heads, {s.num_layers} layers, T = {s.context}, "
        f"{s.steps} steps of batch {s.batch}, AdamW lr {s.lr}; cache: float32, 2 L h_kv d_k values per "
        f"token ({'equal to' if same else 'NOT equal to'} the tensors of a real cache); seed spread "
        f"from {len(spread)} seeds of MHA."
    ]
    data = {
        "models": models,
        "vocab": vocab,
        "seed_spread": max(spread) - min(spread),
        "worst_difference": worst,
        "baselines": tables,
        "gate": g,
        "answer": answer,
    }
    return ClaimResult(
        "gqa", CLAIM, SOURCE, header, rows, verdict, data, dataclasses.asdict(s), seconds, notes
    )


def plot(result: ClaimResult, path: Path) -> None:
    """Held-out loss against KV-cache bytes per token, one point per model (extra seeds hollow)."""
    fig, (ax,) = figure(1, width=5.6)
    models = result.data["models"]
    main_seed = result.settings["seed"]
    main = [m for m in models if m["seed"] == main_seed]
    ax.plot(
        [m["cache_bytes_per_token"] for m in main],
        [m["held_out_loss"] for m in main],
        "o-",
        label=f"seed {main_seed}",
    )
    extra = [m for m in models if m["seed"] != main_seed]
    if extra:
        ax.plot(
            [m["cache_bytes_per_token"] for m in extra],
            [m["held_out_loss"] for m in extra],
            "s",
            mfc="none",
            ls="none",
            label="MHA, other seeds",
        )
    for m in main:
        ax.annotate(
            f"h_kv={m['kv_heads']}",
            (m["cache_bytes_per_token"], m["held_out_loss"]),
            fontsize=7,
            textcoords="offset points",
            xytext=(4, 4),
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("KV-cache bytes per token (float32)")
    ax.set_ylabel("held-out loss (nats per character)")
    ax.grid(alpha=0.3)
    save(fig, path, "GQA: held-out loss against KV-cache size (Shakespeare, characters)")
