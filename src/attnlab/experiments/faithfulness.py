"""The faithfulness experiment: does the attention a position receives rank the input positions the
way removing them (occlusion) or gradient x input does, on a GPT trained on Shakespeare?

The Week 1 notes: "A weight is a learned soft alignment, not a guaranteed causal explanation"; the
Week 19 course page: "Attention weights are tempting as explanations but are not faithful
explanations of model reasoning on their own." Here, for held-out lines (``context`` tokens from
the start of a speech in a held-out play; the prediction is the next token, made at the last
position), every position gets the three scores of :mod:`attnlab.interp.saliency`, and per line
Spearman's ρ compares their rankings; the table gives the mean (and standard deviation) over lines,
per layer, and how often the position attention weights most is the one occlusion finds most
important. Two references: distance (nearer = more important, a ranking that needs no model) and
gradient x input against occlusion (two importance measures against each other).

Verdict (the rule of :mod:`attnlab.experiments.verdicts`, stated before the result): first the
competence gate, the model's held-out loss at least :data:`~attnlab.experiments.baselines.MARGIN`
nats per token below the best n-gram table's (:mod:`attnlab.experiments.baselines`), else "model
too weak". Then the gain ``g`` of the best layer's ρ with occlusion over distance's, paired per line,
with its 95% interval (mean ± t(n-1) standard errors). The claim (attention alone is no faithful
account) **agrees** when the whole interval lies below :data:`MIN_GAIN` (attention adds less than
0.05 of ρ to what distance already explains), **disagrees** when it lies wholly above it (attention
explains clearly more than distance), and is **inconclusive** otherwise: too few lines to tell.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import torch

from attnlab._io import atomic_write_bytes, atomic_write_json
from attnlab.devices import torch_threads
from attnlab.experiments import verdicts
from attnlab.experiments.baselines import gate, too_weak
from attnlab.experiments.claim_result import markdown
from attnlab.experiments.text_model import text_model
from attnlab.interp.saliency import attention_received, gradient_x_input, occlusion, spearman
from attnlab.viz.legends import place_legend, save_figure

CLAIM = (
    "A weight is a learned soft alignment, not a guaranteed causal explanation (the Week 1 notes, "
    "Bahdanau attention); attention weights are tempting as explanations but are not faithful "
    "explanations of model reasoning on their own (the Week 19 course page)."
)
MIN_GAIN = 0.05  # the least ρ by which attention must beat distance to count as explaining more
DISTANCE = "distance (nearer = more important)"
GRADIENT = "gradient x input"


@dataclasses.dataclass(frozen=True)
class Settings:
    """The model (``preset``, trained when no run is given) and ``lines``: held-out lines of the
    model's context length, each starting a speech."""

    preset: str = "nanogpt"
    lines: int = 64


QUICK = Settings(preset="quick", lines=16)


@dataclasses.dataclass
class Row:
    """One ranking of the positions against the two importance measures: mean and standard deviation
    over lines of Spearman's ρ with occlusion and with gradient x input (None: itself), and
    ``top1``: the share of lines whose top position is occlusion's top position."""

    name: str
    rho_occlusion: float
    sd_occlusion: float
    rho_gradient: float | None
    sd_gradient: float | None
    top1: float


def _row(
    name: str, scores: torch.Tensor, occ: torch.Tensor, gxi: torch.Tensor | None
) -> tuple[Row, np.ndarray]:
    """The :class:`Row` of ``scores [B, T]`` and its per-line ρ with occlusion ``[B]`` (no line of
    ``scores``, ``occ`` or ``gxi`` constant: :func:`compare` leaves those out)."""
    r_occ = np.array([spearman(s, o) for s, o in zip(scores, occ)])  # [B]
    r_gxi = None if gxi is None else np.array([spearman(s, g) for s, g in zip(scores, gxi)])
    top1 = float((scores.argmax(dim=1) == occ.argmax(dim=1)).float().mean())
    row = Row(
        name,
        round(float(r_occ.mean()), 4),
        round(float(r_occ.std()), 4),
        None if r_gxi is None else round(float(r_gxi.mean()), 4),
        None if r_gxi is None else round(float(r_gxi.std()), 4),
        round(top1, 4),
    )
    return row, r_occ


def compare(
    att: torch.Tensor, occ: torch.Tensor, gxi: torch.Tensor, competent: bool = True
) -> tuple[list[Row], dict]:
    """Rows (every layer's attention ``att [L, B, T]``, distance, gradient x input) against
    occlusion ``occ [B, T]`` and gradient x input ``gxi [B, T]``, and the verdict (module doc;
    ``competent``: whether the model passed its gate). A line where some score is the same at every
    position ranks nothing: it is left out."""
    spread = lambda x: x.amax(dim=-1) > x.amin(dim=-1)  # noqa: E731  [..., B]: not all tied
    keep = spread(occ) & spread(gxi) & spread(att).all(dim=0)  # [B]
    if not bool(keep.any()):
        raise ValueError("no held-out line has a ranking to compare: every score ties at every position")
    att, occ, gxi = att[:, keep], occ[keep], gxi[keep]
    b, t = occ.shape
    rows, per_line = [], []
    for layer in range(att.shape[0]):
        row, r = _row(f"layer {layer} attention", att[layer], occ, gxi)
        rows.append(row)
        per_line.append(r)
    distance = torch.arange(t, dtype=torch.float32).expand(b, t)  # [B, T]: larger = nearer the query
    dist_row, r_dist = _row(DISTANCE, distance, occ, gxi)
    rows += [dist_row, _row(GRADIENT, gxi, occ, None)[0]]
    best = int(np.argmax([r.mean() for r in per_line]))
    diff = per_line[best] - r_dist  # [B]: paired per line
    se = float(diff.std(ddof=1) / math.sqrt(b)) if b > 1 else float("inf")
    _, lo, hi = verdicts.mean_interval(diff)
    # the claim predicts MIN_GAIN - gain > 0: its interval is [MIN_GAIN - hi, MIN_GAIN - lo]
    answer = verdicts.decide(MIN_GAIN - hi, MIN_GAIN - lo, +1, competent)
    verdict = {
        "best_layer": best,
        "best_rho": rows[best].rho_occlusion,
        "distance_rho": dist_row.rho_occlusion,
        "difference": round(float(diff.mean()), 4),
        "standard_error": round(se, 4),
        "interval": [round(lo, 4), round(hi, 4)],
        "beats_distance": answer == verdicts.DISAGREES,
        "layer_rho_range": [
            min(r.rho_occlusion for r in rows[: att.shape[0]]),
            max(r.rho_occlusion for r in rows[: att.shape[0]]),
        ],  # fmt: skip
        "best_top1": max(r.top1 for r in rows[: att.shape[0]]),
        "distance_top1": dist_row.top1,
        "gradient_rho": rows[-1].rho_occlusion,
        "answer": answer,
        "lines": b,
    }
    return rows, verdict


@dataclasses.dataclass
class FaithfulnessResult:
    """The settings, the model studied, the rows and verdict of :func:`compare`, one example line
    (``example``: its tokens and the three scores per position) and the files written."""

    settings: Settings
    model: dict
    rows: list[Row]
    verdict: dict
    example: dict
    files: dict[str, str]

    def cells(self) -> tuple[list[str], list[list[str]]]:
        """``(header, rows)``: one row per ranking, ρ as mean (± standard deviation) over lines."""
        header = ["ranking of the positions", "ρ with occlusion", "ρ with gradient x input",
                  "top position = occlusion's"]  # fmt: skip
        rows = []
        for r in self.rows:
            grad = "—" if r.rho_gradient is None else f"{r.rho_gradient:.2f} (± {r.sd_gradient:.2f})"
            rows.append([r.name, f"{r.rho_occlusion:.2f} (± {r.sd_occlusion:.2f})", grad, f"{r.top1:.0%}"])
        return header, rows

    def table(self) -> str:
        """:meth:`cells` as a Markdown table."""
        return markdown(*self.cells())

    def summary(self) -> str:
        """What the numbers say about the claim."""
        v = self.verdict
        lo, hi = v["layer_rho_range"]
        lo_i, hi_i = v["interval"]
        beyond = (
            f"against distance's {v['distance_rho']:.2f}: a gain of {v['difference']:+.3f} per line, 95% "
            f"interval {lo_i:+.3f} to {hi_i:+.3f} (the rule: below {MIN_GAIN} agrees, above it disagrees)"
        )
        return (
            f"Attention ranks the positions like occlusion with ρ from {lo:.2f} to {hi:.2f} depending on "
            f"the layer read; the best layer ({v['best_layer']}) reaches {v['best_rho']:.2f} {beyond}, "
            f"and the position it weights most is occlusion's most important one in "
            f"{v['best_top1']:.0%} of lines at best (distance: {v['distance_top1']:.0%}). "
            f"Gradient x input agrees with occlusion at ρ = {v['gradient_rho']:.2f}. "
            + {
                verdicts.AGREES: "This model agrees with the claim: attention adds less than "
                f"{MIN_GAIN} of ρ to what distance alone explains, so its weights are not a faithful "
                "account of what the prediction depends on.",
                verdicts.DISAGREES: "This model disagrees with the claim: attention ranks positions "
                "clearly better than distance alone, though the layer chosen changes the answer.",
                verdicts.INCONCLUSIVE: "Inconclusive: the interval reaches both sides of "
                f"{MIN_GAIN}; more held-out lines would narrow it.",
                verdicts.TOO_WEAK: self._too_weak(),
            }[v["answer"]]
        )

    def _too_weak(self) -> str:
        return too_weak(self.model.get("gate"))

    def to_json(self) -> dict:
        return {
            "claim": CLAIM,
            "settings": dataclasses.asdict(self.settings),
            "model": self.model,
            "rows": [dataclasses.asdict(r) for r in self.rows],
            "verdict": self.verdict,
            "example": self.example,
            "summary": self.summary(),
        }


def plot(result: FaithfulnessResult, path: Path, last: int = 24) -> None:
    """Left: ρ with occlusion and with gradient x input per layer, the two references as lines.
    Right: the example line's last ``last`` positions, each score divided by its largest."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = [r for r in result.rows if r.name not in (DISTANCE, GRADIENT)]
    ref = {r.name: r for r in result.rows}
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [1, 1.6]})
    x = np.arange(len(layers))
    left.bar(x - 0.2, [r.rho_occlusion for r in layers], 0.4, yerr=[r.sd_occlusion for r in layers],
             label="attention vs occlusion", color="C0")  # fmt: skip
    left.bar(x + 0.2, [r.rho_gradient for r in layers], 0.4, yerr=[r.sd_gradient for r in layers],
             label="attention vs gradient x input", color="C1")  # fmt: skip
    left.axhline(ref[DISTANCE].rho_occlusion, color="k", ls="--", lw=1, label="distance vs occlusion")
    left.axhline(
        ref[GRADIENT].rho_occlusion, color="C2", ls=":", lw=1.5, label="gradient x input vs occlusion"
    )
    left.set_xticks(x, [f"layer {i}" for i in range(len(layers))])
    left.set_ylabel("Spearman ρ (mean over lines)")
    left.set_ylim(-0.2, 1.05)
    left.grid(axis="y", alpha=0.3)
    place_legend(left, fontsize=7)
    ex = result.example
    tokens = ex["tokens"][-last:]
    pos = np.arange(len(tokens))
    for (name, key), colour in zip(
        ((f"attention, layer {result.verdict['best_layer']}", "attention"), ("occlusion", "occlusion"),
         ("gradient x input", "gradient")), ("C0", "C3", "C2")):  # fmt: skip
        values = np.array(ex[key][-last:], dtype=float)
        right.plot(pos, values / max(values.max(), 1e-12), marker="o", ms=3, color=colour, label=name)
    right.set_xticks(pos, [t.replace("\n", "⏎").replace(" ", "␣") for t in tokens], fontsize=7)
    right.set_ylabel("score / its largest")
    right.set_title(
        f"one held-out line, last {len(tokens)} positions (next token {ex['target']!r})", fontsize=9
    )
    right.grid(alpha=0.3)
    place_legend(right, fontsize=7)
    fig.suptitle("Does attention rank input positions the way removing them does?", fontsize=10)
    save_figure(fig, path)
    plt.close(fig)


def run(
    settings: Settings,
    out_dir: str | Path,
    *,
    run_dir: str | Path | None = None,
    progress: bool = False,
    log=print,
) -> FaithfulnessResult:
    """Score ``settings.lines`` held-out lines three ways and compare; write ``results.json``,
    ``results.md`` and ``faithfulness.png`` into ``out_dir``. The model: ``run_dir`` or
    ``out_dir/model`` (:func:`attnlab.experiments.text_model.text_model`)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir={out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    lm = text_model(run_dir, out, settings.preset, progress=progress, log=log)
    t = lm.context
    pieces = lm.pieces(lm.speech_starts(settings.lines, t + 1), t + 1)  # [B, T + 1]
    ids, targets = pieces[:, :t], pieces[:, t]  # the line, and the token that follows it
    with torch_threads(1):  # small models: one thread is fastest on a busy machine (see training)
        att = attention_received(lm.model, ids)  # [L, B, T]
        occ = occlusion(lm.model, ids, targets)  # [B, T]
        gxi = gradient_x_input(lm.model, ids, targets)  # [B, T]
    model = lm.describe()
    model["baselines"] = lm.baselines()
    model["gate"] = gate(lm.val_loss, model["baselines"]) if lm.val_loss is not None else None
    rows, verdict = compare(att, occ, gxi, competent=bool(model["gate"] and model["gate"]["passed"]))
    example = {
        "tokens": [lm.decode([i]) for i in ids[0]],
        "target": lm.decode([targets[0]]),
        "attention": [round(float(v), 5) for v in att[verdict["best_layer"], 0]],
        "occlusion": [round(float(v), 5) for v in occ[0]],
        "gradient": [round(float(v), 5) for v in gxi[0]],
    }
    files = {
        "json": str(out / "results.json"),
        "table": str(out / "results.md"),
        "plot": str(out / "faithfulness.png"),
    }
    result = FaithfulnessResult(settings, model, rows, verdict, example, files)
    atomic_write_json(files["json"], result.to_json())
    atomic_write_bytes(files["table"], (result.table() + "\n").encode())
    plot(result, Path(files["plot"]))
    return result
