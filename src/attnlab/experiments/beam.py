"""Beam search against greedy where there is a right answer: exact match on the reverse and dates tasks.

The Week 19 course page: beam search "suits translation and summarisation, where there is a 'right'
answer; for open-ended generation it produces bland, repetitive text". The open-ended half is the
decoding experiment's (``attnlab experiment decoding``, on a GPT trained on Shakespeare). This is
the other half: a small encoder-decoder Transformer trained briefly on each built-in task with a
right answer (:mod:`attnlab.tasks`: ``reverse``, ``dates``), then the same held-out sources decoded
greedily and with beam search of width 2, 4 and 8 (:func:`attnlab.training.evaluate.predict`), each
prediction scored by exact match (the whole target, length included) and token accuracy.

Each model is trained once into ``OUT/models/<task>`` and reused from there (without ``--out``,
in memory only). Training is short on purpose: a model that is always right leaves a search
nothing to fix.

Verdict (the rule of :mod:`attnlab.experiments.verdicts`, stated before the result), per task:
first a competence gate, greedy token accuracy at least :data:`GATE` (chance is one symbol in the
task's alphabet: 0.1 for ``reverse``), else "model too weak". Then per beam width, the difference
in exact match beam minus greedy, its 95% interval from 1,000 bootstrap resamples of the examples
(the same resample for both): **agrees** (beam search finds more right answers) when the interval
lies above zero, **disagrees** when below, **inconclusive** otherwise (as when both are always right).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from attnlab.devices import torch_threads
from attnlab.experiments import verdicts
from attnlab.experiments.claim_result import ClaimResult, figure, save, write
from attnlab.models.load import load
from attnlab.tasks import get_task
from attnlab.training.checkpoint import checkpoint_dir, verify
from attnlab.training.config import TrainConfig
from attnlab.training.evaluate import predict
from attnlab.training.trainer import train

CLAIM = (
    "Beam search keeps the k best partial sequences at each step instead of only the single best "
    "(greedy). It suits translation and summarisation, where there is a 'right' answer."
)
SOURCE = "the Week 19 course page, greedy and beam search"
GATE = 0.5  # the greedy token accuracy a model needs before its beams are judged


@dataclasses.dataclass(frozen=True)
class Settings:
    """Tasks and their training ``steps`` and peak ``lr`` (one each per task), the Transformer's size,
    the beam widths,
    the held-out ``examples`` per task and the ``seed`` of weights and data."""

    tasks: tuple[str, ...] = ("reverse", "dates")
    steps: tuple[int, ...] = (400, 800)
    lr: tuple[float, ...] = (3e-3, 1e-3)
    d_model: int = 32
    layers: int = 2
    heads: int = 4
    beams: tuple[int, ...] = (2, 4, 8)
    examples: int = 300
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "lr"):
            if len(getattr(self, name)) != len(self.tasks):
                raise ValueError(
                    f"{name} has {len(getattr(self, name))} entries but tasks has {len(self.tasks)}"
                )


QUICK = Settings(examples=200)


def trained(task: str, steps: int, lr: float, s: Settings, folder: Path | None):
    """The task's Transformer: loaded from ``folder`` when it holds a finished run of the same
    configuration, else trained there (or in memory when ``folder`` is None); a run of another
    configuration there is a ``ValueError``. Returns ``(model, seconds spent training)``."""

    params = {"d_model": s.d_model, "layers": s.layers, "heads": s.heads}
    config = TrainConfig(task=task, model="transformer", steps=steps, lr=lr, model_params=params, seed=s.seed)
    if folder is not None and (folder / "latest.json").is_file():
        saved = verify(checkpoint_dir(folder)).get("config")
        if saved != config.to_dict():
            raise ValueError(f"{folder} holds a run of other settings; remove it, or use another out folder")
        return load(folder).model.eval(), 0.0
    t0 = time.perf_counter()
    result = train(config, folder, progress=False)
    return result.model.eval(), time.perf_counter() - t0


def decode_all(model, task, examples, beams) -> dict[str, dict]:
    """Per decoder (``greedy``, ``beam k``): per-example exact match ``exact [N]`` (0/1) and token
    accuracy ``token [N]``, as lists."""
    out = {}
    for name, kw in [("greedy", {"decode": "greedy"})] + [
        (f"beam {k}", {"decode": "beam", "beam_size": k}) for k in beams
    ]:
        preds = predict(model, task, [e.src for e in examples], **kw)
        exact = [float(p == e.tgt) for p, e in zip(preds, examples)]
        token = [sum(a == b for a, b in zip(p, e.tgt)) / len(e.tgt) for p, e in zip(preds, examples)]
        out[name] = {"exact": exact, "token": token}
    return out


def judge(scores: dict[str, dict], competent: bool, seed: int = 0) -> dict[str, dict]:
    """Per beam of ``scores`` (:func:`decode_all`): exact match beam minus greedy, its bootstrap 95%
    interval over the examples and :func:`attnlab.experiments.verdicts.decide` (claimed > 0)."""
    greedy = np.asarray(scores["greedy"]["exact"])  # [N]
    out = {}
    for name, s in scores.items():
        if name == "greedy":
            continue
        diff = np.asarray(s["exact"]) - greedy  # [N]
        lo, hi = verdicts.bootstrap_interval(lambda idx, d=diff: float(d[idx].mean()), len(diff), seed=seed)
        out[name] = {"difference": round(float(diff.mean()), 4), "interval": [round(lo, 4), round(hi, 4)],
                     "answer": verdicts.decide(lo, hi, +1, competent)}  # fmt: skip
    return out


def run(
    settings: Settings = QUICK, out_dir: str | Path | None = None, *, log=print, progress=True
) -> ClaimResult:
    """Train (or reuse) each task's model, decode its held-out examples every way, judge; with
    ``out_dir`` write JSON, table and plot."""
    s = settings
    t0 = time.perf_counter()
    header = ["task", "decoder", "exact match", "token accuracy", "beam - greedy, exact (95%)", "verdict"]
    rows, data = [], {}
    with torch_threads(1):
        for task_name, steps, lr in zip(s.tasks, s.steps, s.lr):
            task = get_task(task_name)
            folder = None if out_dir is None else Path(out_dir) / "models" / task_name
            model, seconds = trained(task_name, steps, lr, s, folder)
            log(f"{task_name}: model " + (f"trained in {seconds:.0f} s" if seconds else "reused"))
            examples = task.sample("test", s.examples, seed=s.seed)
            scores = decode_all(model, task, examples, s.beams)
            greedy_token = float(np.mean(scores["greedy"]["token"]))
            competent = greedy_token >= GATE
            judged = judge(scores, competent, s.seed)
            data[task_name] = {
                "steps": steps,
                "greedy_token_accuracy": round(greedy_token, 4),
                "competent": competent,
                "exact": {k: round(float(np.mean(v["exact"])), 4) for k, v in scores.items()},
                "token": {k: round(float(np.mean(v["token"])), 4) for k, v in scores.items()},
                "beam_vs_greedy": judged,
            }
            for name in scores:
                j = judged.get(name)
                cell = (
                    ""
                    if j is None
                    else "{:+.3f} ({:+.3f} to {:+.3f})".format(j["difference"], *j["interval"])
                )
                d = data[task_name]
                answer = "" if j is None else j["answer"]
                rows.append(
                    [task_name, name, f"{d['exact'][name]:.3f}", f"{d['token'][name]:.3f}", cell, answer]
                )
    verdict = " ".join(_sentence(t, d) for t, d in data.items()) + (
        " The open-ended half of the sentence (bland, repetitive text) is the decoding experiment's "
        "(attnlab experiment decoding)."
    )
    notes = [
        f"encoder-decoder Transformer, d_model {s.d_model}, {s.layers}+{s.layers} layers, {s.heads} heads; "
        + ", ".join(f"{t} {n} steps at lr {lr:g}" for t, n, lr in zip(s.tasks, s.steps, s.lr))
        + f"; {s.examples} held-out examples per task (test split, seed {s.seed}); gate: greedy token "
        f"accuracy >= {GATE}."
    ]
    result = ClaimResult(
        "beam",
        CLAIM,
        SOURCE,
        header,
        rows,
        verdict,
        data,
        dataclasses.asdict(s),
        time.perf_counter() - t0,
        notes,
    )
    if out_dir is not None:
        write(result, out_dir, plot)
    return result


def _sentence(task: str, d: dict) -> str:
    """One task's verdict sentence."""
    if not d["competent"]:
        return (
            f"{task}: model too weak (greedy token accuracy {d['greedy_token_accuracy']:.2f} < {GATE}); "
            "train longer."
        )
    parts = ", ".join(
        "{} {} ({:+.3f}, 95% {:+.3f} to {:+.3f})".format(name, j["answer"], j["difference"], *j["interval"])
        for name, j in d["beam_vs_greedy"].items()
    )
    return f"{task}: greedy exact match {d['exact']['greedy']:.3f}; beam against greedy: {parts}."


def plot(result: ClaimResult, path: Path) -> None:
    """Exact match per decoder (greedy, beam 2, 4, 8), one group of bars per task."""
    fig, (ax,) = figure(1, width=6.0)
    tasks = list(result.data)
    names = list(result.data[tasks[0]]["exact"])
    width = 0.8 / len(names)
    for k, name in enumerate(names):
        values = [result.data[t]["exact"][name] for t in tasks]
        ax.bar(np.arange(len(tasks)) + (k - (len(names) - 1) / 2) * width, values, width, label=name)
    ax.set_xticks(range(len(tasks)), tasks)
    ax.set_ylabel("exact match (held-out)")
    ax.set_ylim(0, 1.05)
    ax.grid(axis="y", alpha=0.3)
    save(fig, path, "Greedy against beam search on tasks with a right answer")
