"""Much factual knowledge lives in the MLP: facts learned from sentences, then attention or MLP ablated.

The Week 19 course page gives the MLP its role: "the MLP processes each position independently
(computation, and where much factual knowledge is stored)", and "much factual association appears
to live in MLP weights". Here a small GPT learns made-up facts, one sentence per fact,
``"<subject> lives in <city>"`` (:func:`make_facts`: subjects and cities are invented words, each
subject's city drawn at random, so nothing but memory can answer), as four word tokens. Recall of a
fact: the model's most likely token after ``"<subject> lives in"`` is the subject's city.

Then every layer's MLP output (``blocks.{l}.ffn.out``) or attention output
(``blocks.{l}.self_attn.out``) is mean-ablated, replaced by its mean over all facts (the clean
run's), and recall measured again, fact by fact: at every position, and at the subject's position
alone (the first token, where both sub-blocks read only the subject's own vector). Besides recall it
measures the sentence frame under the same ablation: how often ``lives`` and ``in`` are still
predicted, so a lost fact is not just a broken model. Attention ablated at every position is shown
for context only: attention must carry the subject to ``in`` whatever stores the fact, so its loss
says nothing about storage.

Verdict (the rule of :mod:`attnlab.experiments.verdicts`, stated before the result): first a
competence gate, recall of the unablated model at least chance (1 / cities) plus :data:`MARGIN`,
else "model too weak". Then per fact ``d = recall(unablated) - recall(every MLP mean-ablated at every
position)`` (each 0 or 1), its mean and a 95% interval from 1,000 bootstrap resamples of the facts:
**agrees** (the MLPs hold facts the rest of the model cannot recall) when the interval lies above
zero, **disagrees** (recall rises without them) below, **inconclusive** otherwise.

The model is trained once into ``OUT/models/facts`` (``config.json``, ``model.safetensors`` and the
settings it was trained with) and reused from there when the settings match; without ``--out`` it
is trained in memory.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from attnlab._checks import positive_float, positive_int
from attnlab.devices import torch_threads
from attnlab.experiments import verdicts
from attnlab.experiments.claim_result import ClaimResult, figure, save, write
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.nn.hooks import capture, patch
from attnlab.progress import progress as progress_bar

CLAIM = (
    "the MLP processes each position independently (computation, and where much factual knowledge is stored)"
)
SOURCE = "the Week 19 course page, lesson 'The transformer block', Roles"
MARGIN = 0.5  # the unablated model's recall must beat chance by this much before anything is judged
SUBJECT, ANSWER_AT = 0, 2  # the subject's position; the position whose next token is the city
SYLLABLES = ("ka", "lo", "mi", "ru", "ze", "ta", "no", "vi", "sa", "pe", "du", "fo", "gi", "ha", "ju", "be")


@dataclasses.dataclass(frozen=True)
class Settings:
    """The facts (``subjects``, ``cities``), the GPT (``d_model``, ``layers``, ``heads``, d_ff = 4
    d_model) and its full-batch AdamW training (``steps``, ``lr``), the bootstrap ``resamples`` and
    the ``seed`` of facts, weights and resamples."""

    subjects: int = 256
    cities: int = 16
    d_model: int = 64
    layers: int = 2
    heads: int = 4
    steps: int = 1500
    lr: float = 3e-3
    resamples: int = 1000
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("subjects", "cities", "d_model", "layers", "heads", "steps", "resamples"):
            positive_int(name, getattr(self, name))
        positive_float("lr", self.lr)
        if self.cities < 2:
            raise ValueError(f"cities must be at least 2 (one city is no fact), got {self.cities}")
        if self.subjects + self.cities > len(SYLLABLES) ** 3:
            raise ValueError(
                f"subjects + cities must be at most {len(SYLLABLES) ** 3}, got {self.subjects + self.cities}"
            )
        if self.d_model % self.heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by heads={self.heads}")


QUICK = Settings(subjects=128, steps=800)


@dataclasses.dataclass(frozen=True)
class Facts:
    """``sentences [N]`` (``"<subject> lives in <city>"``), their token ids ``ids [N, 4]``, the
    vocabulary ``words`` (id -> word; 0 is padding, never used) and each fact's city id ``city [N]``."""

    sentences: list[str]
    ids: torch.Tensor
    words: list[str]
    city: torch.Tensor


def make_facts(subjects: int, cities: int, seed: int = 0) -> Facts:
    """``subjects`` invented names, ``cities`` invented city names, each subject's city drawn uniformly
    (seeded); one sentence per subject, tokenised by words."""
    rng = np.random.default_rng(seed)
    names = [
        "".join(SYLLABLES[i] for i in rng.integers(len(SYLLABLES), size=3))
        for _ in range(4 * (subjects + cities))
    ]
    names = list(dict.fromkeys(names))[: subjects + cities]  # distinct, in drawn order
    if len(names) < subjects + cities:
        raise ValueError(f"could not draw {subjects + cities} distinct names; ask for fewer subjects")
    people, places = names[:subjects], [n.capitalize() for n in names[subjects:]]
    homes = rng.integers(cities, size=subjects)  # [N]
    sentences = [f"{p} lives in {places[c]}" for p, c in zip(people, homes)]
    words = ["<pad>", "lives", "in", *people, *places]
    index = {w: i for i, w in enumerate(words)}
    ids = torch.tensor([[index[w] for w in s.split()] for s in sentences])  # [N, 4]
    return Facts(sentences, ids, words, ids[:, 3].clone())


def _train(facts: Facts, s: Settings, progress: bool) -> GPT:
    """A pre-norm GPT trained on every sentence at once (next-token loss after the subject)."""
    torch.manual_seed(s.seed)
    config = GPTConfig(
        len(facts.words),
        num_layers=s.layers,
        max_len=4,
        d_model=s.d_model,
        num_heads=s.heads,
        d_ff=4 * s.d_model,
    )
    model = GPT(config)
    opt = torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=0.0)
    x, y = facts.ids[:, :-1], facts.ids[:, 1:]  # [N, 3] inputs, [N, 3] next tokens
    for _ in progress_bar(range(s.steps), desc="facts: training", unit="step", quiet=not progress):
        logits = model(x)  # [N, 3, V]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def trained(facts: Facts, s: Settings, folder: Path | None, progress: bool = False) -> tuple[GPT, float]:
    """The model: loaded from ``folder`` when it holds one trained with these settings, else trained
    (and saved there). Returns ``(model, seconds spent training)``, 0 when reused."""
    key = json.dumps(dataclasses.asdict(s), sort_keys=True)
    if (
        folder is not None
        and (folder / "settings.json").is_file()
        and (folder / "settings.json").read_text() == key
    ):
        return GPT.load(folder).eval(), 0.0
    t0 = time.perf_counter()
    model = _train(facts, s, progress)
    seconds = time.perf_counter() - t0
    if folder is not None:
        model.save(folder)
        (folder / "settings.json").write_text(key)
    return model, seconds


def recall(model: GPT, facts: Facts, replace: dict | None = None) -> np.ndarray:
    """Per fact, 1 if the most likely token after ``"<subject> lives in"`` is its city, else 0
    (``[N]``); ``replace``: hook point -> function, as :func:`attnlab.nn.patch` takes."""
    with torch.no_grad(), patch(model, replace or {}):
        logits = model(facts.ids[:, :-1])  # [N, 3, V]
    return (logits[:, ANSWER_AT].argmax(-1) == facts.city).numpy().astype(float)


def frame_accuracy(model: GPT, facts: Facts, replace: dict | None = None) -> float:
    """The share of the sentence frame still predicted: ``lives`` after the subject and ``in`` after
    ``lives``, over all facts (``replace`` as for :func:`recall`)."""
    with torch.no_grad(), patch(model, replace or {}):
        logits = model(facts.ids[:, :-1])  # [N, 3, V]
    return float((logits[:, :ANSWER_AT].argmax(-1) == facts.ids[:, 1 : ANSWER_AT + 1]).float().mean())


def _mean_ablation(model: GPT, facts: Facts, points: list[str], where: str) -> dict:
    """Replacements setting each point to its mean over the facts (clean run), at the subject's
    position (``where="subject"``) or at every position (``"all"``)."""
    with torch.no_grad(), capture(model, points) as cache:
        model(facts.ids[:, :-1])
    out = {}
    for p in points:
        mean = cache[p].mean(0, keepdim=True)  # [1, 3, d]

        def fn(t, mean=mean):
            t = t.clone()
            if where == "subject":
                t[:, SUBJECT] = mean[:, SUBJECT]
            else:
                t[:] = mean
            return t

        out[p] = fn
    return out


def _points(kind: str, layers) -> list[str]:
    return [f"blocks.{i}.{'self_attn.out' if kind == 'attention' else 'ffn.out'}" for i in layers]


def run(
    settings: Settings = QUICK, out_dir: str | Path | None = None, *, log=print, progress=True
) -> ClaimResult:
    """Train (or reuse) the model, measure recall under each ablation, judge; with ``out_dir`` write
    JSON, table and plot."""
    s = settings
    t0 = time.perf_counter()
    facts = make_facts(s.subjects, s.cities, s.seed)
    with torch_threads(1):  # a model this small gains nothing from a second thread
        folder = None if out_dir is None else Path(out_dir) / "models" / "facts"
        model, seconds = trained(facts, s, folder, progress)
        log("facts: model " + (f"trained in {seconds:.0f} s" if seconds else f"reused from {folder}"))
        full = recall(model, facts)
        every = tuple(range(s.layers))
        cases = [("MLP", "all", (i,)) for i in every] + [("MLP", "all", every)]
        cases += [("MLP", "subject", every), ("attention", "subject", every), ("attention", "all", every)]
        per = {}
        for kind, where, layers in cases:
            replace = _mean_ablation(model, facts, _points(kind.lower(), layers), where)
            per[(kind, where, layers)] = recall(model, facts, replace)
        frame = frame_accuracy(model, facts, _mean_ablation(model, facts, _points("mlp", every), "all"))
    chance = 1 / s.cities
    competent = float(full.mean()) >= chance + MARGIN
    d = full - per[("MLP", "all", every)]  # [N]: facts lost with the MLPs
    lo, hi = verdicts.bootstrap_interval(lambda idx: float(d[idx].mean()), len(d), s.resamples, s.seed)
    answer = verdicts.decide(lo, hi, +1, competent)
    rows = [["none", "-", "-", f"{full.mean():.3f}", ""]]
    cells = []
    for (kind, where, layers), r in per.items():
        which = "all" if len(layers) == s.layers and s.layers > 1 else ",".join(map(str, layers))
        place = "subject" if where == "subject" else "every position"
        rows.append([kind, place, which, f"{r.mean():.3f}", f"{r.mean() - full.mean():+.3f}"])
        cells.append(
            {"ablated": kind, "position": where, "layers": list(layers), "recall": round(float(r.mean()), 4)}
        )
    data = {
        "facts": s.subjects,
        "chance": round(chance, 4),
        "recall": round(float(full.mean()), 4),
        "competent": competent,
        "ablations": cells,
        "frame_with_mlps_ablated": round(frame, 4),
        "difference": round(float(d.mean()), 4),
        "interval": [round(lo, 4), round(hi, 4)],
        "answer": answer,
        "examples": facts.sentences[:3],
        "trained_seconds": round(seconds, 1),
    }
    verdict = _sentence(data, s)
    notes = [
        f"{s.subjects} facts like '{facts.sentences[0]}', {s.cities} cities (chance {chance:.3f}); "
        f"GPT d_model {s.d_model}, {s.layers} layers, {s.heads} heads, {s.steps} full-batch AdamW steps, "
        f"lr {s.lr}, seed {s.seed}",
        "ablated: the sub-block's output replaced by its mean over the facts; gate: recall >= chance + "
        f"{MARGIN}; difference: recall unablated minus with every MLP ablated at every position, 95% "
        f"interval over {s.resamples} bootstrap resamples of the facts; attention ablated everywhere "
        "also stops the subject reaching 'in', whatever stores the fact (context, not the test)",
    ]
    result = ClaimResult(
        "facts", CLAIM, SOURCE, ["ablated", "at", "layers", "recall", "vs none"], rows, verdict, data,
        dataclasses.asdict(s), time.perf_counter() - t0, notes,
    )  # fmt: skip
    if out_dir is not None:
        write(result, out_dir, _plot)
    return result


def _sentence(d: dict, s: Settings) -> str:
    """The verdict in one paragraph, the figures in it."""
    base = f"The model recalls {d['recall']:.3f} of the {d['facts']} facts (chance {d['chance']:.3f})."
    if not d["competent"]:
        return f"{base} Model too weak: that is not {MARGIN} above chance, so nothing is judged."
    mlps = [c for c in d["ablations"] if c["ablated"] == "MLP" and len(c["layers"]) == s.layers]
    mlp, sub = (next(c for c in mlps if c["position"] == where) for where in ("all", "subject"))
    lo, hi = d["interval"]
    return (
        f"{base} With every MLP mean-ablated it recalls {mlp['recall']:.3f} while still predicting "
        f"{d['frame_with_mlps_ablated']:.3f} of the sentence frame ('lives', 'in'): it loses "
        f"{d['difference']:.3f} of the facts (95% {lo:.3f} to {hi:.3f}), so the claim {d['answer']}. "
        f"Ablated at the subject alone the MLPs leave {sub['recall']:.3f}"
        + (
            ": the lookup happens mostly at 'in', after attention has carried the subject there."
            if sub["recall"] >= d["recall"] - 0.25
            else ": much of the lookup happens at the subject's own position, before attention moves it."
        )
    )


def _plot(result: ClaimResult, path: Path) -> None:
    """Recall after each ablation, with chance and the unablated model."""
    fig, (ax,) = figure(1, width=6.0)
    cells = result.data["ablations"]
    labels = [
        f"{c['ablated']} {'all' if len(c['layers']) > 1 else c['layers'][0]}"
        + (" @subject" if c["position"] == "subject" else "")
        for c in cells
    ]
    colours = ["tab:blue" if c["ablated"] == "attention" else "tab:orange" for c in cells]
    ax.bar(range(len(cells)), [c["recall"] for c in cells], color=colours)
    ax.axhline(result.data["recall"], color="black", lw=1, label="no ablation")
    ax.axhline(result.data["chance"], color="grey", lw=1, ls="--", label="chance")
    ax.set_xticks(range(len(cells)), labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("fact recall")
    ax.set_ylim(0, 1.05)
    save(fig, path, "Fact recall, sub-blocks mean-ablated (blue attention, orange MLP)")
