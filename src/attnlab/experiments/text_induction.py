"""Induction heads in a GPT trained on Shakespeare (``attnlab experiment induction --text``).

The Week 19 course page: "Interpretability research found 'induction heads': attention patterns that
copy what followed an earlier occurrence of the current token. They're a key mechanism behind
in-context learning." The synthetic experiment (:mod:`attnlab.experiments.induction`) trains models
on data built to need them; here the model is one trained on plays, and two probes ``[BOS, s, s]``
(BOS: the line-break token; ``L = (context - 1) // 2``) ask whether it copies:

- random tokens: ``s`` of ``L`` distinct random ids (:func:`attnlab.interp.repeated_tokens`; at most
  ``V - 1``), the standard probe (text the model never saw, so its first half is hard by construction);
- held-out text: ``s`` the first ``L`` tokens of a speech in a held-out play.

For each probe: the next-token loss on the first copy (its first token excluded, as BOS predicts
it) and on the repeat (the repeat's first token excluded: nothing announces it). Every head's
previous-token, duplicate and induction score on the random probe (:func:`attnlab.interp.score_heads`,
``exclude_first=True``); the induction heads are those above ``threshold`` (when none is, the
``candidates`` best-scoring heads are ablated anyway, and the table says so). Ablation zeroes those
heads' outputs ``z`` (the ``blocks.{l}.self_attn.z`` hook point); as a control the same number of
other heads of the same layers (then of other layers), drawn at random, are zeroed instead, in up to
``controls`` distinct draws: one draw is one sample of "some other heads".

In-context gain = loss on the first copy - loss on the repeat (nats; > 0: the repeat is easier,
the model copies). It "copies" when the mean gain over probe rows exceeds twice its standard error
and :data:`MIN_SHARE` of the first copy's loss (a repeat made only slightly easier is not copying).

Verdict (the rule of :mod:`attnlab.experiments.verdicts`, stated before the result). First the
competence gate: the run's held-out loss at least :data:`~attnlab.experiments.baselines.MARGIN` nats
per token below the best n-gram table's (:mod:`attnlab.experiments.baselines`), else "model too
weak". Then the causal test, per probe: per probe row, the gain left with the control heads zeroed
(the mean over the draws) minus the gain left with the induction heads zeroed (the in-context
learning the induction heads carry beyond as many random heads), mean ± t(n-1) standard errors over
the rows (each draw's mean difference is reported beside it).
**agrees** when, on every probe where the intact model copies, that interval lies above zero;
**disagrees** when on one it lies below; **inconclusive** otherwise, and when the model copies on no
probe (nothing for induction heads to cause: the claim is then not tested, whatever the detector says).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import torch
import torch.nn.functional as F

from attnlab._io import atomic_write_bytes, atomic_write_json
from attnlab.devices import torch_threads
from attnlab.experiments import verdicts
from attnlab.experiments.baselines import gate, too_weak
from attnlab.experiments.claim_result import markdown
from attnlab.experiments.text_model import TextModel, text_model
from attnlab.interp.detectors import score_heads
from attnlab.interp.sequences import repeated_tokens
from attnlab.nn.hooks import capture, patch
from attnlab.viz.legends import place_legend, save_figure

CLAIM = (
    "Interpretability research found 'induction heads': attention patterns that copy what followed "
    "an earlier occurrence of the current token. They're a key mechanism behind in-context learning. "
    "(the Week 19 course page)"
)
PROBES = ("random tokens", "held-out text")
MIN_SHARE = 0.1  # the least share of the first copy's loss that the repeat must save to count as copying


def weights_point(layer: int) -> str:
    """Layer ``layer``'s attention weights ``[B, h, T, T]`` (GPT hook point)."""
    return f"blocks.{layer}.self_attn.weights"


def z_point(layer: int) -> str:
    """Layer ``layer``'s per-head outputs ``z [B, T, h, d_k]`` (GPT hook point)."""
    return f"blocks.{layer}.self_attn.z"


@dataclasses.dataclass(frozen=True)
class Settings:
    """The model (``preset`` trained when no run is given), ``probes`` rows per probe, the induction
    ``threshold`` (share of attention, as ``attnlab heads``), ``candidates`` ablated when no head
    passes it, ``controls`` random draws of control heads, and the random probe's ``seed``."""

    preset: str = "nanogpt"
    probes: int = 32
    threshold: float = 0.4
    candidates: int = 2
    controls: int = 5
    seed: int = 0


QUICK = Settings(preset="quick", probes=16)


def probes(lm: TextModel, settings: Settings) -> dict[str, torch.Tensor]:
    """``{name: [B, 1 + 2 L]}``: the two probes of the module docstring."""
    length = (lm.context - 1) // 2
    if length < 2:
        raise ValueError(f"the model's {lm.context} positions leave no room for a repeat probe")
    bos, vocab = lm.tokenizer.encode("\n")[0], int(lm.model.config.vocab_size)
    rand = repeated_tokens(settings.probes, min(length, vocab - 1), vocab, bos=bos, seed=settings.seed)
    text = lm.pieces(lm.speech_starts(settings.probes, length), length)  # [B', L]
    first = torch.full((text.shape[0], 1), bos, dtype=torch.long)
    return {PROBES[0]: rand, PROBES[1]: torch.cat([first, text, text], dim=1)}


def halves(model, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of ``ids [B, 1 + 2 L]``, the mean next-token loss on the first copy and on the
    repeat, ``([B], [B])`` (each copy's first token excluded: see the module docstring)."""
    length = (ids.shape[1] - 1) // 2
    with torch.no_grad():
        logits = model(ids[:, :-1]).float()  # [B, 2L, V]
    loss = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # [B, 2L]: predicts t+1
    return loss[:, 1:length].mean(dim=1), loss[:, length + 1 :].mean(dim=1)  # targets 2..L, L+2..2L


def head_scores(model, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Previous-token, duplicate and induction score ``[L, h]`` of every head on ``ids``."""
    names = [weights_point(i) for i in range(int(model.config.num_layers))]
    with torch.no_grad(), capture(model, names) as cache:
        model(ids)
    return score_heads(
        [cache[n] for n in names], ids, ("previous", "duplicate", "induction"), exclude_first=True
    )


def ablated(model, heads: list[tuple[int, int]]):
    """A context in which ``heads`` ((layer, head) pairs) write nothing: their ``z`` zeroed."""
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)

    def zero(chosen: list[int]):
        def fn(z: torch.Tensor) -> torch.Tensor:  # z [B, T, h, d_k]
            z = z.clone()
            z[:, :, chosen] = 0.0
            return z

        return fn

    return patch(model, {z_point(layer): zero(hs) for layer, hs in by_layer.items()})


def _gain(first: torch.Tensor, repeat: torch.Tensor) -> dict:
    """Mean losses over rows of the first copy ``first [B]`` and the repeat ``repeat [B]``, the
    in-context gain and its standard error."""
    gain = first - repeat  # [B]
    se = float(gain.std() / math.sqrt(len(gain))) if len(gain) > 1 else float("inf")
    return {
        "loss_first": round(float(first.mean()), 4),
        "loss_repeat": round(float(repeat.mean()), 4),
        "gain": round(float(gain.mean()), 4),
        "standard_error": round(se, 4),
        "copies": bool(gain.mean() > max(2 * se, MIN_SHARE * float(first.mean()))),
    }


def _ranked(scores: torch.Tensor) -> list[tuple[int, int, float]]:
    """``(layer, head, score)`` of every head of ``scores [L, h]``, best first."""
    flat = [
        (layer, head, float(v)) for layer, row in enumerate(scores.tolist()) for head, v in enumerate(row)
    ]
    return sorted(flat, key=lambda x: -x[2])


def causal_test(induction_gain: torch.Tensor, control_gains: torch.Tensor) -> dict:
    """Per probe row, the in-context gain left with control heads zeroed (``control_gains [K, B]``,
    one row per draw, averaged over the draws) minus the gain left with the induction heads zeroed
    (``induction_gain [B]``): its mean, 95% interval over the rows (paired),
    :func:`attnlab.experiments.verdicts.decide` (claimed > 0) and each draw's mean difference."""
    diffs = control_gains.mean(dim=0) - induction_gain  # [B]
    mean, lo, hi = verdicts.mean_interval(diffs.tolist())
    draws = (control_gains - induction_gain).mean(dim=1)  # [K]
    return {"difference": round(mean, 4), "interval": [round(lo, 4), round(hi, 4)],
            "draws": [round(float(x), 4) for x in draws], "answer": verdicts.decide(lo, hi, +1)}  # fmt: skip


def _verdict(found: bool, rows: dict, tests: dict, competent: bool) -> dict:
    """The module doc's rule: ``answer`` (a :mod:`~attnlab.experiments.verdicts` word), ``reading``
    (the claim's reading on this model), and what it rests on."""
    copying = [p for p in PROBES if rows[p]["intact"]["copies"]]
    answers = {p: tests[p]["answer"] for p in copying}
    if not competent:
        answer, reading = verdicts.TOO_WEAK, "cannot be tested: the model is too weak (n-gram gate)"
    elif not copying:
        answer = verdicts.INCONCLUSIVE
        reading = (
            "is not tested: the model does not copy in context, so there is nothing for "
            + ("its induction heads" if found else "induction heads (it has none)")
            + " to cause"
        )
    elif all(a == verdicts.AGREES for a in answers.values()):
        answer = verdicts.AGREES
        reading = "holds: zeroing the induction heads removes more in-context gain than zeroing random heads"
    elif verdicts.DISAGREES in answers.values():
        answer = verdicts.DISAGREES
        reading = "is not borne out: random heads carry more of the in-context gain than the induction heads"
    else:
        answer = verdicts.INCONCLUSIVE
        reading = (
            "is not settled: the induction heads' share of the in-context gain is not told from random heads'"
        )
    return {"induction_heads_found": found, "copies_on": copying, "tests": tests, "competent": competent,
            "answer": answer, "reading": reading}  # fmt: skip


@dataclasses.dataclass
class TextInductionResult:
    """The settings, the model studied, head ``scores`` (name -> ``[L][h]``), the heads zeroed
    (``induction``: above the threshold, or the best ``candidates`` when ``above`` is False;
    ``control``: one list of heads per random draw), per probe and condition the losses
    (:func:`_gain`; control heads: the mean over the draws), the verdict and the files."""

    settings: Settings
    model: dict
    scores: dict[str, list[list[float]]]
    induction: list[tuple[int, int]]
    above: bool
    control: list[list[tuple[int, int]]]
    rows: dict[str, dict[str, dict]]
    verdict: dict
    files: dict[str, str]

    def heads_line(self) -> str:
        """The best heads of each detector, ``layer.head (score)``."""
        parts = []
        for name in ("induction", "previous", "duplicate"):
            best = _ranked(torch.tensor(self.scores[name]))[:3]
            parts.append(f"best {name}: " + ", ".join(f"{la}.{h} ({v:.2f})" for la, h, v in best))
        return "; ".join(parts)

    def cells(self) -> tuple[list[str], list[list[str]]]:
        """``(header, rows)``: the losses per probe and condition."""
        named = ", ".join(f"{la}.{h}" for la, h in self.induction)
        which = {
            "intact": "none",
            "induction heads zeroed": named + ("" if self.above else " (best, none above threshold)"),
            "control heads zeroed": (
                f"{len(self.control[0])} others, "
                + ("1 random draw" if len(self.control) == 1 else f"{len(self.control)} random draws (mean)")
                if self.control and self.control[0]
                else "none (no other head to draw)"
            ),
        }
        header = ["probe", "heads zeroed", "loss, first copy", "loss, repeat", "in-context gain (± se)"]
        rows = [
            [
                probe,
                which[cond],
                f"{r['loss_first']:.3f}",
                f"{r['loss_repeat']:.3f}",
                f"{r['gain']:+.3f} (± {r['standard_error']:.3f})",
            ]  # fmt: skip
            for probe, conditions in self.rows.items()
            for cond, r in conditions.items()
        ]
        return header, rows

    def table(self) -> str:
        """:meth:`cells` as a Markdown table."""
        return markdown(*self.cells())

    def summary(self) -> str:
        la, h = self.induction[0]  # ranked on the unrounded scores, as the ablation chose (ties too)
        best = (la, h, self.scores["induction"][la][h])
        v = self.verdict
        if not v.get("competent", True):
            return f"Verdict: {v['answer']}. " + too_weak(self.model.get("gate"))
        tests = "; ".join(
            f"{p}: {t['difference']:+.3f} nats (95% {t['interval'][0]:+.3f} to {t['interval'][1]:+.3f})"
            for p, t in v.get("tests", {}).items()
        )
        return (
            f"Best induction score {best[2]:.2f} (head {best[0]}.{best[1]}; threshold "
            f"{self.settings.threshold:g}). In-context gain kept with the control heads zeroed "
            f"({len(self.control)} distinct random draw{'s' if len(self.control) != 1 else ''}) minus with "
            f"the induction heads zeroed: {tests}. Verdict: "
            f"{v.get('answer', '')}: on this model the claim {v['reading']}."
        )

    def to_json(self) -> dict:
        return {
            "claim": CLAIM,
            "settings": dataclasses.asdict(self.settings),
            "model": self.model,
            "scores": self.scores,
            "induction_heads": self.induction,
            "above_threshold": self.above,
            "control_heads": self.control,
            "probes": self.rows,
            "verdict": self.verdict,
            "summary": self.summary(),
        }


def control_heads(
    ranked: list[tuple[int, int, float]], induction: list[tuple[int, int]], seed: int
) -> list[tuple[int, int]]:
    """One control draw: as many heads as ``induction``, drawn at random (seeded) from the other heads
    of the same layers (so a layer-0 previous-token head, the induction circuit's other half, is not
    the control), then from the other layers when those run out."""
    layers = {la for la, _ in induction}
    others = [(la, h) for la, h, _ in ranked if (la, h) not in induction]
    gen = torch.Generator().manual_seed(seed)
    chosen: list[tuple[int, int]] = []
    for pool in ([x for x in others if x[0] in layers], [x for x in others if x[0] not in layers]):
        order = torch.randperm(len(pool), generator=gen).tolist()
        chosen += [pool[i] for i in order[: len(induction) - len(chosen)]]
    return sorted(chosen)


def control_draws(
    ranked: list[tuple[int, int, float]], induction: list[tuple[int, int]], seed: int, draws: int
) -> list[list[tuple[int, int]]]:
    """Up to ``draws`` distinct :func:`control_heads` sets (seeds ``seed``, ``seed + 1``, ..., at
    most ``20 * draws`` tried): fewer when the other heads of those layers allow fewer."""
    found: list[list[tuple[int, int]]] = []
    for k in range(20 * draws):
        heads = control_heads(ranked, induction, seed + k)
        if heads not in found:
            found.append(heads)
        if len(found) == draws:
            break
    return found


def measure(lm: TextModel, settings: Settings, files: dict[str, str]) -> TextInductionResult:
    """Gate, probe, score, ablate (module docstring): the result before anything is written."""
    model, ps = lm.model, probes(lm, settings)
    info = lm.describe()
    info["baselines"] = lm.baselines()
    info["gate"] = gate(lm.val_loss, info["baselines"]) if lm.val_loss is not None else None
    scores = head_scores(model, ps[PROBES[0]])
    ranked = _ranked(scores["induction"])
    above = [(la, h) for la, h, v in ranked if v > settings.threshold]
    induction = above or [(la, h) for la, h, _ in ranked[: settings.candidates]]
    controls = control_draws(ranked, induction, settings.seed, settings.controls)
    rows: dict[str, dict[str, dict]] = {}
    tests = {}
    for probe, ids in ps.items():
        rows[probe] = {"intact": _gain(*halves(model, ids))}
        with ablated(model, induction):
            first, repeat = halves(model, ids)  # [B], [B]
        rows[probe]["induction heads zeroed"] = _gain(first, repeat)
        induction_gain = first - repeat  # [B]
        firsts, repeats = [], []
        for heads in controls:
            with ablated(model, heads):
                first, repeat = halves(model, ids)  # [B], [B]
            firsts.append(first)
            repeats.append(repeat)
        firsts_k, repeats_k = torch.stack(firsts), torch.stack(repeats)  # [K, B]
        rows[probe]["control heads zeroed"] = _gain(firsts_k.mean(0), repeats_k.mean(0))
        tests[probe] = causal_test(induction_gain, firsts_k - repeats_k)
    as_lists = {n: [[round(float(v), 4) for v in row] for row in s.tolist()] for n, s in scores.items()}
    competent = bool(info["gate"] and info["gate"]["passed"])
    return TextInductionResult(
        settings,
        info,
        as_lists,
        induction,
        bool(above),
        controls,
        rows,
        _verdict(bool(above), rows, tests, competent),
        files,
    )


def plot(result: TextInductionResult, path: Path) -> None:
    """Left: every head's induction and previous-token score; right: per probe, the loss on the
    first copy and on the repeat, intact and with the induction or the control heads zeroed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), gridspec_kw={"width_ratios": [1, 1, 1.6]})
    for ax, name in zip(axes[:2], ("induction", "previous")):
        s = np.array(result.scores[name])
        im = ax.imshow(s, vmin=0, vmax=1, cmap="viridis")
        ax.set_xticks(range(s.shape[1]))
        ax.set_yticks(range(s.shape[0]))
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(f"{name}{'-token' if name == 'previous' else ''} score (random-token probe)", fontsize=9)
        for (i, j), v in np.ndenumerate(s):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w" if v < 0.6 else "k")
    fig.colorbar(im, ax=axes[:2], shrink=0.8)
    ax = axes[2]
    conds = list(next(iter(result.rows.values())))
    x = np.arange(len(result.rows))
    width = 0.8 / (2 * len(conds))
    for k, cond in enumerate(conds):
        for half, hatch in (("loss_first", ""), ("loss_repeat", "//")):
            offset = (2 * k + (half == "loss_repeat") - len(conds) + 0.5) * width
            values = [result.rows[p][cond][half] for p in result.rows]
            label = f"{cond}: {'first copy' if half == 'loss_first' else 'repeat'}"
            ax.bar(x + offset, values, width, color=f"C{k}", hatch=hatch, edgecolor="w", label=label)
    ax.set_xticks(x, list(result.rows))
    ax.set_ylabel("next-token loss (nats)")
    ax.grid(axis="y", alpha=0.3)
    place_legend(ax, fontsize=6)
    fig.suptitle(
        "Induction heads in a GPT trained on Shakespeare: does it copy a repeated half?", fontsize=10
    )
    save_figure(fig, path)
    plt.close(fig)


def run(
    settings: Settings,
    out_dir: str | Path,
    *,
    run_dir: str | Path | None = None,
    progress: bool = False,
    log=print,
) -> TextInductionResult:
    """Probe the text run (``run_dir`` or ``out_dir/model``, trained once: :func:`text_model`); write
    ``results.json``, ``results.md`` and ``induction.png`` into ``out_dir``."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir={out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    lm = text_model(run_dir, out, settings.preset, progress=progress, log=log)
    files = {
        "json": str(out / "results.json"),
        "table": str(out / "results.md"),
        "plot": str(out / "induction.png"),
    }
    with torch_threads(1):  # small models: one thread is fastest on a busy machine (see training)
        result = measure(lm, settings, files)
    atomic_write_json(files["json"], result.to_json())
    atomic_write_bytes(files["table"], (result.table() + "\n").encode())
    plot(result, Path(files["plot"]))
    return result
