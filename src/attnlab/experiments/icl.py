"""Induction heads and in-context learning change together during training.

The Week 19 course page: induction heads are "a key mechanism behind in-context learning". Olsson
et al. (2022) measure in-context learning itself with the *ICL score*: the loss on a token late in
the context minus the loss on a token early in it (negative when the model predicts better with more
context), and find it drops at the same point of training as induction heads form.

This experiment trains the induction experiment's models (:mod:`attnlab.experiments.induction`: the
same attention-only GPTs, data ``[BOS, r, r, s..]`` with a repeated random segment, optimiser and
seeds) and logs every ``eval_every`` steps, on a fixed held-out batch, the ICL score (mean loss of
the last ``window`` predictions minus the first ``window``) beside the best head's induction score
(on ``[BOS, r, r]`` probes, weights read through :func:`attnlab.nn.hooks.capture`). It reports the
correlation of the two over training and the step at which each has made half of its final change.

Verdict (the rule of :mod:`attnlab.experiments.verdicts`, stated before the result). A correlation
over training is no support on its own: every model's loss falls as it trains, and the one-layer
model, which cannot form an induction head, shows one too. So the test is against that control:
the gate is a model whose best induction score reaches :data:`THRESHOLD` (else "model too weak":
train longer); the control is a model below it. Per held-out sequence, the induction model's final
ICL score minus the control's (the same sequences), with its 95% interval: **agrees** when it lies
wholly below zero (the model with induction heads learns more in context), **disagrees** when wholly
above, **inconclusive** otherwise, or when there is no control.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from attnlab._checks import positive_int
from attnlab.devices import torch_threads
from attnlab.experiments import induction, verdicts
from attnlab.experiments.claim_result import ClaimResult, figure, save, write
from attnlab.interp import repeated_tokens, score_heads, segment_batch
from attnlab.nn.hooks import capture
from attnlab.progress import progress as progress_bar

CLAIM = (
    "Interpretability research found 'induction heads': attention patterns that copy what followed an "
    "earlier occurrence of the current token. They're a key mechanism behind in-context learning."
)
SOURCE = "the Week 19 course page, lesson 'Self-attention', Going deeper"


def weights_point(layer: int) -> str:
    """The hook point of a GPT block's attention weights ``[B, h, T, T]`` (the one hook name here)."""
    return f"blocks.{layer}.self_attn.weights"


THRESHOLD = 0.4  # the induction score at which a head counts as an induction head (as attnlab heads)


@dataclasses.dataclass(frozen=True)
class Settings:
    """``models``: names from :data:`attnlab.experiments.induction.MODELS`; ``steps``, ``eval_every``,
    ``eval_size`` and ``seed`` as there (its other settings: its defaults); ``window``: how many
    predictions count as early and as late."""

    models: tuple[str, ...] = ("1-layer attention-only", "2-layer attention-only", "2-layer with MLPs")
    steps: int = 2500
    eval_every: int = 50
    eval_size: int = 128
    window: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "eval_every", "eval_size", "window"):
            positive_int(name, getattr(self, name))
        _ = self.induction  # builds (and so checks) the induction settings
        if 2 * self.window > self.induction.seq_len - 1:
            raise ValueError(
                f"window={self.window}: early and late windows of {self.window} predictions overlap in "
                f"{self.induction.seq_len - 1}"
            )

    @property
    def induction(self) -> induction.Settings:
        """The induction experiment's settings for these models."""
        return dataclasses.replace(
            induction.Settings(),
            models=self.models,
            steps=self.steps,
            eval_every=self.eval_every,
            eval_size=self.eval_size,
            seed=self.seed,
        )


QUICK = Settings(models=("1-layer attention-only", "2-layer attention-only"), steps=1000, eval_size=64)


def icl_score(model, held_out: torch.Tensor, window: int) -> tuple[float, float]:
    """``(early, late)``: mean next-token loss of the first and of the last ``window`` predictions
    of ``held_out [B, T]``; the ICL score is ``late - early``."""
    early, late = icl_per_sequence(model, held_out, window)
    return float(early.mean()), float(late.mean())


def icl_per_sequence(model, held_out: torch.Tensor, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(early [B], late [B])``: each sequence's mean loss on its first and last ``window`` predictions."""
    with torch.no_grad():
        logits = model(held_out[:, :-1])  # [B, T-1, V]
        loss = F.cross_entropy(logits.transpose(1, 2), held_out[:, 1:], reduction="none")  # [B, T-1]
    return loss[:, :window].mean(1), loss[:, -window:].mean(1)


def induction_score(model, probe: torch.Tensor) -> float:
    """The best head's induction score on ``probe [B, 1 + 2L]`` (``exclude_first=True``)."""
    layers = len(model.blocks)
    with torch.no_grad(), capture(model, [weights_point(i) for i in range(layers)]) as cache:
        model(probe)
    weights = [cache[weights_point(i)] for i in range(layers)]  # L x [B, h, T, T]
    return float(score_heads(weights, probe, ("induction",), exclude_first=True)["induction"].max())


def train_logged(s: Settings, name: str, show: bool) -> list[dict]:
    """Train ``name`` as the induction experiment does; log step, induction, early, late, icl."""
    ind = s.induction
    model = induction.build(ind, name)
    gen = torch.Generator().manual_seed(ind.seed + 1)
    held_out = segment_batch(
        ind.eval_size,
        ind.seq_len,
        ind.vocab,
        ind.min_len,
        ind.max_len,
        generator=torch.Generator().manual_seed(10_000),
    ).ids
    probe = repeated_tokens(32, ind.probe_len, ind.vocab, seed=ind.seed + 2)
    opt = torch.optim.AdamW(model.parameters(), lr=ind.lr, weight_decay=0.0)
    history = []
    with progress_bar(total=ind.steps, desc=f"{name:<24}", unit="step", quiet=not show) as bar:
        for step in range(ind.steps + 1):
            if step % ind.eval_every == 0 or step == ind.steps:
                model.eval()
                early, late = icl_score(model, held_out, s.window)
                history.append(
                    {
                        "step": step,
                        "induction": round(induction_score(model, probe), 4),
                        "early": round(early, 4),
                        "late": round(late, 4),
                        "icl": round(late - early, 4),
                    }
                )
                model.train()
            if step == ind.steps:
                early_b, late_b = icl_per_sequence(model, held_out, s.window)  # [B] each
                history[-1]["icl_per_sequence"] = [round(float(x), 4) for x in late_b - early_b]
                break
            batch = segment_batch(
                ind.batch_size, ind.seq_len, ind.vocab, ind.min_len, ind.max_len, generator=gen
            )
            logits = model(batch.ids[:, :-1])  # [B, T-1, V]
            loss = F.cross_entropy(logits.reshape(-1, ind.vocab), batch.ids[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            bar.update(1)
    return history


def half_step(history: list[dict], key: str) -> int | None:
    """The first logged step where ``key`` has made half of its change from the first to the last log."""
    first, last = history[0][key], history[-1][key]
    if first == last:
        return None
    mid = (first + last) / 2
    return next(h["step"] for h in history if (h[key] - mid) * (last - first) >= 0)


def summarise(history: list[dict]) -> dict:
    """Correlation of induction and ICL scores over the log, their half-change steps, end values."""
    ind, icl = [h["induction"] for h in history], [h["icl"] for h in history]
    corr = statistics.correlation(ind, icl) if len(set(ind)) > 1 and len(set(icl)) > 1 else 0.0
    return {
        "correlation": corr,
        "induction_half_step": half_step(history, "induction"),
        "icl_half_step": half_step(history, "icl"),
        "induction_start": ind[0],
        "induction_end": ind[-1],
        "icl_start": icl[0],
        "icl_end": icl[-1],
    }


def run(
    settings: Settings = QUICK, out_dir: str | Path | None = None, *, log=print, progress=True
) -> ClaimResult:
    """Train and log every model; with ``out_dir`` write JSON, table and plot."""
    s = settings
    t0 = time.perf_counter()
    histories = {}
    with torch_threads(1):
        for name in s.models:
            histories[name] = train_logged(s, name, progress)
            end = histories[name][-1]
            log(f"{name:<24} induction {end['induction']:.2f}, ICL score {end['icl']:+.2f} nats")
    result = _result(s, histories, time.perf_counter() - t0)
    if out_dir is not None:
        write(result, out_dir, plot)
    return result


def _result(s: Settings, histories: dict, seconds: float) -> ClaimResult:
    header = [
        "model",
        "induction start -> end",
        "ICL score start -> end",
        "correlation",
        "induction half-way at step",
        "ICL half-way at step",
    ]
    rows, summaries = [], {}
    for name, history in histories.items():
        m = summaries[name] = summarise(history)
        rows.append(
            [
                name,
                f"{m['induction_start']:.2f} -> {m['induction_end']:.2f}",
                f"{m['icl_start']:+.2f} -> {m['icl_end']:+.2f}",
                f"{m['correlation']:+.2f}",
                str(m["induction_half_step"]),
                str(m["icl_half_step"]),
            ]
        )
    best = min(summaries, key=lambda n: summaries[n]["icl_end"])
    b = summaries[best]
    test = against_control(histories, summaries)
    verdict = (
        f"in the {best} model the ICL score (loss on the last {s.window} predictions minus the first "
        f"{s.window}) goes from {b['icl_start']:+.2f} to {b['icl_end']:+.2f} nats while the best induction "
        f"score goes from {b['induction_start']:.2f} to {b['induction_end']:.2f}; over the "
        f"{len(histories[best])} "
        f"logged steps the two correlate at {b['correlation']:+.2f}, and each has made half of its change "
        f"by step {b['induction_half_step']} (induction) and {b['icl_half_step']} (ICL). "
        + " ".join(
            f"The {n} model ends at induction {m['induction_end']:.2f} and ICL {m['icl_end']:+.2f}."
            for n, m in summaries.items()
            if n != best
        )
        + " Together in time is what Olsson et al. report; that the heads cause the in-context learning is "
        "what ablating them shows (attnlab experiment induction). " + test["sentence"]
    )
    ind = s.induction
    notes = [
        f"the induction experiment's data and models: V = {ind.vocab}, T = {ind.seq_len}, repeated "
        f"segments of "
        f"{ind.min_len}-{ind.max_len} tokens, d_model {ind.d_model}, {ind.num_heads} heads, "
        f"{s.steps} steps of "
        f"batch {ind.batch_size}, AdamW lr {ind.lr}; scores every {s.eval_every} steps on {s.eval_size} "
        "held-out sequences."
    ]
    data = {"histories": histories, "summaries": summaries, "test": test}
    return ClaimResult(
        "icl", CLAIM, SOURCE, header, rows, verdict, data, dataclasses.asdict(s), seconds, notes
    )


def against_control(histories: dict, summaries: dict) -> dict:
    """The verdict (module doc): ``{"model", "control", "difference", "interval", "answer",
    "sentence"}`` (model/control None where missing)."""
    with_heads = [n for n in summaries if summaries[n]["induction_end"] >= THRESHOLD]
    without = [n for n in summaries if summaries[n]["induction_end"] < THRESHOLD]
    out = {"model": None, "control": None, "difference": None, "interval": None}
    if not with_heads:
        best = max(s["induction_end"] for s in summaries.values())
        return {**out, "answer": verdicts.TOO_WEAK, "sentence": (
            f"Verdict: model too weak to test this: no model formed an induction head (best score {best:.2f} "
            f"< {THRESHOLD}); train with more steps.")}  # fmt: skip
    model = min(with_heads, key=lambda n: summaries[n]["icl_end"])
    if not without:
        return {**out, "model": model, "answer": verdicts.INCONCLUSIVE, "sentence": (
            "Verdict: inconclusive: every model formed an induction head, so none is a control for "
            "what training alone does to the ICL score.")}  # fmt: skip
    control = max(without, key=lambda n: summaries[n]["icl_end"])
    diff = [
        a - c
        for a, c in zip(histories[model][-1]["icl_per_sequence"], histories[control][-1]["icl_per_sequence"])
    ]
    mean, lo, hi = verdicts.mean_interval(diff)
    answer = verdicts.decide(lo, hi, -1)
    sentence = (
        f"Verdict: {answer}. The correlation is not the test (the {control} model, with no induction head, "
        f"correlates at {summaries[control]['correlation']:+.2f} too); the test is the {model} model's final "
        f"ICL score minus the control's, per held-out sequence: {mean:+.2f} nats, 95% interval {lo:+.2f} "
        f"to {hi:+.2f}."
    )
    return {"model": model, "control": control, "difference": round(mean, 4),
            "interval": [round(lo, 4), round(hi, 4)], "answer": answer, "sentence": sentence}  # fmt: skip


def plot(result: ClaimResult, path: Path) -> None:
    """Best induction score (left) and ICL score (right) against training step, one colour per model."""
    fig, (left, right) = figure(2)
    for i, (name, history) in enumerate(result.data["histories"].items()):
        steps = [h["step"] for h in history]
        left.plot(steps, [h["induction"] for h in history], color=f"C{i}", label=name)
        right.plot(steps, [h["icl"] for h in history], color=f"C{i}", label=name)
    left.set_ylabel("best head's induction score")
    left.set_ylim(-0.02, 1.02)
    right.set_ylabel("ICL score: late loss - early loss (nats)")
    right.axhline(0.0, color="grey", lw=0.8)
    for ax in (left, right):
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
    save(fig, path, "Induction heads and in-context learning during training")
