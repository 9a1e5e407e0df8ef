"""The decoding experiment: greedy, beam search and sampling on a GPT trained on Shakespeare, and
whether beam search gives the most probable, the blandest and the most repetitive text.

The Week 19 course page (greedy and beam search): beam search "suits translation and
summarisation, where there is a 'right' answer; for open-ended generation it produces bland,
repetitive text". Here every method continues the same held-out prompts (the first
``prompt_tokens`` tokens of a speech from the held-out plays) by ``new_tokens`` tokens, with
:mod:`attnlab.decoding` as it is (no end token: every continuation has ``new_tokens`` tokens).
Measured for each method, over all its continuations:

- mean log-probability per token under the model, ``(1 / N) Σ_t log p(y_t | prompt, y_<t)`` (nats;
  the model's own, unfiltered distribution at temperature 1: what beam search maximises);
- distinct-n (Li et al. 2016): distinct word n-grams / all word n-grams, n = 1, 2, 3, over the
  method's continuations together (words: the text split at white space; higher = more varied);
- repeated 4-grams (Welleck et al. 2019's seq-rep-4): the share of a continuation's 4-grams of
  tokens that already occurred earlier in the same continuation (higher = more repetitive);

and beside them the same numbers for the held-out text itself (the true continuation of each
prompt), the reference for what real text looks like. Each sampler draws from its own random
stream, seeded by :func:`sampler_seed` from the experiment's seed and the sampler's name (with one
shared seed, top-p, temperature 0.8 and pure sampling drew the same uniforms and their samples began
alike, reading as one sampler).

Verdict (the rule of :mod:`attnlab.experiments.verdicts`, stated before the result): first the
competence gate, the model's held-out loss at least
:data:`~attnlab.experiments.baselines.MARGIN` nats per token below the best n-gram table's, else
"model too weak" (a model whose samples are not words says nothing about blandness). Then each of
the claim's three parts compares the most extreme beam with the most extreme sampler, the
difference's 95% interval from 1,000 bootstrap resamples of the prompts (the same resample for
both methods): **agrees** when the interval excludes zero on the claimed side, **disagrees** when it
excludes zero on the other, **inconclusive** otherwise. Greedy against that beam gets the same
interval, reported beside it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from pathlib import Path

import numpy as np
import torch

from attnlab import decoding
from attnlab._io import atomic_write_bytes, atomic_write_json
from attnlab.devices import torch_threads
from attnlab.experiments import verdicts
from attnlab.experiments.baselines import gate, too_weak
from attnlab.experiments.claim_result import markdown
from attnlab.experiments.text_model import TextModel, text_model
from attnlab.viz.legends import save_figure

CLAIM = (
    "Beam search keeps the k best partial sequences at each step instead of only the single best "
    "(greedy). It suits translation and summarisation, where there is a 'right' answer; for open-ended "
    "generation it produces bland, repetitive text. (the Week 19 course page, greedy and beam search)"
)
REFERENCE = "held-out text"


@dataclasses.dataclass(frozen=True)
class Settings:
    """The model (``preset`` trained when no run is given), the prompts (``prompts`` speeches of the
    held-out plays, their first ``prompt_tokens`` tokens), ``new_tokens`` per continuation (None:
    what fills the model's positions; ``prompt_tokens + new_tokens`` must fit them, as beam search
    does not slide), the beams, ``top_k``, ``top_p``, ``temperature`` and the sampling ``seed``."""

    preset: str = "nanogpt"
    prompts: int = 48
    prompt_tokens: int = 16
    new_tokens: int | None = None
    beams: tuple[int, ...] = (4, 8)
    top_k: int = 10
    top_p: float = 0.9
    temperature: float = 0.8
    seed: int = 0

    def methods(self) -> list[tuple[str, dict]]:
        """``(name, options)`` of every method, in the table's order (options: ``beam`` or the
        sampling ``temperature``/``top_k``/``top_p`` and the sampler's own ``seed``; greedy is
        temperature 0)."""
        samplers = [
            (f"top-k {self.top_k}", {"temperature": 1.0, "top_k": self.top_k}),
            (f"top-p {self.top_p:g}", {"temperature": 1.0, "top_p": self.top_p}),
            (f"temperature {self.temperature:g}", {"temperature": self.temperature}),
            ("pure sampling (T = 1)", {"temperature": 1.0}),
        ]
        return [
            ("greedy", {"temperature": 0}),
            *((f"beam {k}", {"beam": k}) for k in self.beams),
            *((name, {**options, "seed": sampler_seed(self.seed, name)}) for name, options in samplers),
        ]


def sampler_seed(seed: int, name: str) -> int:
    """The seed of sampler ``name``'s own stream: the first 4 bytes of ``sha256("seed/name")``, the
    same in every process (not Python's salted ``hash``), different for each sampler."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{name}".encode()).digest()[:4], "big")


QUICK = Settings(preset="quick", prompts=16)


def generate(model, prompts: torch.Tensor, n: int, settings: Settings, options: dict) -> torch.Tensor:
    """``[P, n]`` continuations of ``prompts [P, T_p]`` by one method (``options``, see
    :meth:`Settings.methods`), with :mod:`attnlab.decoding`."""
    if "beam" in options:  # beam_search searches each row alone; eos -1: text has no end token
        rows = [
            decoding.beam_search(model, prompts[i : i + 1], options["beam"], n, eos_id=-1).hypotheses[0][0]
            for i in range(prompts.shape[0])
        ]
        return torch.tensor([list(h.tokens) for h in rows])  # [P, N]
    return decoding.sample(
        model,
        prompts,
        n,
        temperature=options["temperature"],
        top_k=options.get("top_k"),
        top_p=options.get("top_p"),
        seed=options.get("seed", settings.seed),
        eos_id=-1,
    )  # [P, N]


def mean_log_prob(model, prompts: torch.Tensor, continuations: torch.Tensor) -> float:
    """``(1 / P N) Σ log p(y_t | prompt, y_<t)`` over continuations ``[P, N]`` of ``prompts [P, T_p]``
    (nats per token; the model's full distribution at temperature 1)."""
    return float(np.mean(log_probs(model, prompts, continuations)))


def log_probs(model, prompts: torch.Tensor, continuations: torch.Tensor) -> list[float]:
    """Each continuation's mean ``log p`` per token ``[P]`` (as :func:`mean_log_prob`)."""
    full = torch.cat([prompts, continuations], dim=1)  # [P, T_p + N]
    with torch.no_grad():
        logp = model(full[:, :-1]).float().log_softmax(dim=-1)  # [P, T_p + N - 1, V]
    picked = logp.gather(-1, full[:, 1:, None])[..., 0]  # [P, T_p + N - 1]
    return picked[:, prompts.shape[1] - 1 :].mean(dim=1).tolist()


def distinct(texts: list[str], n: int) -> float:
    """Distinct-n: distinct word n-grams / all word n-grams over ``texts`` together (0 if none)."""
    grams = [tuple(w[i : i + n]) for t in texts for w in [t.split()] for i in range(len(w) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def repeated_ngrams(sequences: list[list[int]], n: int = 4) -> float:
    """The share of n-grams (of tokens) that already occurred earlier in the same sequence, over
    ``sequences`` together (seq-rep-n; 0 if none)."""
    repeats = total = 0
    for seq in sequences:
        grams = [tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)]
        repeats += len(grams) - len(set(grams))  # every occurrence after a gram's first
        total += len(grams)
    return repeats / total if total else 0.0


@dataclasses.dataclass
class MethodResult:
    """One method's measurements (see the module docstring) and ``example``: its continuation of
    the first prompt."""

    name: str
    mean_log_prob: float
    distinct_1: float
    distinct_2: float
    distinct_3: float
    repeat_4: float
    example: str
    seconds: float
    per_prompt: dict = dataclasses.field(default_factory=dict, repr=False)  # texts, tokens, log_probs


def measure(
    lm: TextModel, name: str, prompts: torch.Tensor, cont: torch.Tensor, seconds: float
) -> MethodResult:
    """The measurements of continuations ``cont [P, N]`` of ``prompts [P, T_p]``."""
    texts = [lm.decode(row) for row in cont]
    logps = log_probs(lm.model, prompts, cont)
    return MethodResult(
        name=name,
        mean_log_prob=round(float(np.mean(logps)), 4),
        distinct_1=round(distinct(texts, 1), 4),
        distinct_2=round(distinct(texts, 2), 4),
        distinct_3=round(distinct(texts, 3), 4),
        repeat_4=round(repeated_ngrams(cont.tolist(), 4), 4),
        example=texts[0],
        seconds=round(seconds, 2),
        per_prompt={"texts": texts, "tokens": cont.tolist(), "log_probs": logps},
    )


SERIES = {  # kind of method -> (bar colour, legend label)
    "greedy": ("C1", "greedy (search, 1 path)"),
    "beam": ("C3", "beam search"),
    "sampling": ("C0", "sampling (each its own seed stream)"),
    REFERENCE: ("0.6", "held-out text"),
}


def series(name: str) -> tuple[str, str]:
    """``(colour, legend label)`` of the bar of method ``name``: greedy, beam, sampler or real text."""
    if name in ("greedy", REFERENCE):
        return SERIES[name]
    return SERIES["beam" if name.startswith("beam") else "sampling"]


def _is_beam(m: MethodResult) -> bool:
    return m.name.startswith("beam")


def _extreme(methods: list[MethodResult], measure: str, sign: int) -> tuple[str, float]:
    """``(name, value)`` of the method with the largest ``sign * measure``."""
    best = max(methods, key=lambda m: sign * getattr(m, measure))
    return best.name, getattr(best, measure)


def _statistic(m: MethodResult, measure: str, idx: np.ndarray) -> float:
    """``measure`` of ``m``'s continuations of the prompts ``idx [n]`` (a bootstrap resample)."""
    pp = m.per_prompt
    if measure == "mean_log_prob":
        return float(np.mean([pp["log_probs"][i] for i in idx]))
    if measure == "distinct_2":
        return distinct([pp["texts"][i] for i in idx], 2)
    return repeated_ngrams([pp["tokens"][i] for i in idx], 4)


def _interval(a: MethodResult, b: MethodResult, measure: str) -> list[float]:
    """The 95% bootstrap interval of ``measure(a) - measure(b)`` over the prompts (module doc)."""
    n = len(a.per_prompt["texts"])
    lo, hi = verdicts.bootstrap_interval(
        lambda idx: _statistic(a, measure, idx) - _statistic(b, measure, idx), n
    )
    return [round(lo, 4), round(hi, 4)]


def verdict(methods: list[MethodResult], competent: bool = True) -> list[dict]:
    """The claim in three parts: is beam search's text more probable (higher mean log-probability),
    blander (lower distinct-2) and more repetitive (more repeated 4-grams) than sampling's? Each part
    ``{"part", "measure", "beam", "sampling", "greedy", "interval", "greedy_interval", "answer"}``:
    the most extreme beam and sampling method, ``(name, value)``, greedy's value (greedy is the other
    search for the most probable text), the 95% intervals of beam - sampling and greedy - beam, and
    the answer of :func:`attnlab.experiments.verdicts.decide` (``competent``: the model passed its
    gate)."""
    generated = [m for m in methods if m.name != REFERENCE]
    beams = [m for m in generated if _is_beam(m)]
    samplers = [m for m in generated if not _is_beam(m) and m.name != "greedy"]
    greedy = next((m for m in generated if m.name == "greedy"), None)
    if not beams or not samplers:
        raise ValueError("the verdict compares beam search with sampling: both must be measured")
    out = []
    for part, measure, sign in (
        ("more probable", "mean_log_prob", 1),
        ("blander", "distinct_2", -1),
        ("more repetitive", "repeat_4", 1),
    ):
        beam, sampling = _extreme(beams, measure, sign), _extreme(samplers, measure, sign)
        by_name = {m.name: m for m in generated}
        interval = _interval(by_name[beam[0]], by_name[sampling[0]], measure)
        greedy_interval = None if greedy is None else _interval(greedy, by_name[beam[0]], measure)
        out.append(
            {
                "part": part,
                "measure": measure,
                "beam": beam,
                "sampling": sampling,
                "greedy": None if greedy is None else getattr(greedy, measure),
                "interval": interval,
                "greedy_interval": greedy_interval,
                "answer": verdicts.decide(interval[0], interval[1], sign, competent),
            }
        )
    return out


@dataclasses.dataclass
class DecodingResult:
    """The settings, the model studied (:meth:`TextModel.describe`), the prompts and the tokens each
    method added (``new_tokens``), one :class:`MethodResult` per method (the held-out text last), the
    verdict and the files written."""

    settings: Settings
    model: dict
    prompts: list[str]
    new_tokens: int
    methods: list[MethodResult]
    verdict: list[dict]
    files: dict[str, str]

    def cells(self) -> tuple[list[str], list[list[str]]]:
        """``(header, rows)``: one row per method, numbers rounded to 3 places."""
        header = ["method", "mean log-prob (nats/token)", "distinct-1", "distinct-2", "distinct-3",
                  "repeated 4-grams"]  # fmt: skip
        rows = [
            [m.name]
            + [f"{v:.3f}" for v in (m.mean_log_prob, m.distinct_1, m.distinct_2, m.distinct_3, m.repeat_4)]
            for m in self.methods
        ]
        return header, rows

    def table(self) -> str:
        """:meth:`cells` as a Markdown table."""
        return markdown(*self.cells())

    def examples(self) -> list[str]:
        """The first prompt and each method's continuation of it, line breaks shown as ⏎."""
        shown = [f"prompt: {self.prompts[0]!r}"]
        width = max(len(m.name) for m in self.methods)
        shown += [f"{m.name:<{width}}  {m.example.replace(chr(10), ' ⏎ ')}" for m in self.methods]
        return shown

    def summary(self) -> str:
        """The claim's three parts, each with its numbers and whether this model agrees."""
        if any(v["answer"] == verdicts.TOO_WEAK for v in self.verdict):
            return too_weak(self.model.get("gate"))
        agreed = sum(v["answer"] == verdicts.AGREES for v in self.verdict)
        parts = []
        for v in self.verdict:
            greedy = ""
            if v["greedy"] is not None:
                g_lo, g_hi = v["greedy_interval"]
                apart = "separated" if g_lo > 0 or g_hi < 0 else "not separated"
                greedy = f"; greedy {v['greedy']:.3f}, {apart} from the beam ({g_lo:+.3f} to {g_hi:+.3f})"
            lo, hi = v["interval"]
            parts.append(
                f"{v['part']} than sampling: {v['answer']} ({v['measure']} {v['beam'][0]} "
                f"{v['beam'][1]:.3f} vs {v['sampling'][0]} {v['sampling'][1]:.3f}, 95% interval of the "
                f"difference {lo:+.3f} to {hi:+.3f}{greedy})"
            )
        real = next(m for m in self.methods if m.name == REFERENCE)
        return (
            f"This model agrees with {agreed} of the claim's 3 parts: beam search's text is "
            + "; ".join(parts)
            + ". "
            f"The held-out text itself scores {real.mean_log_prob:.2f} nats per token, distinct-2 "
            f"{real.distinct_2:.2f}, repeated 4-grams {real.repeat_4:.2f}: real text is not the most "
            f"probable text."
        )

    def to_json(self) -> dict:
        return {
            "claim": CLAIM,
            "settings": dataclasses.asdict(self.settings),
            "model": self.model,
            "prompts": self.prompts,
            "new_tokens": self.new_tokens,
            "methods": [
                {k: v for k, v in dataclasses.asdict(m).items() if k != "per_prompt"} for m in self.methods
            ],
            "verdict": self.verdict,
            "summary": self.summary(),
        }


def plot(result: DecodingResult, path: Path) -> None:
    """Three panels of horizontal bars, one bar per method (the held-out text grey): mean
    log-probability per token, distinct-2 and repeated 4-grams."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = result.methods
    names = [m.name for m in methods]
    kinds = [series(m.name) for m in methods]  # (colour, legend label) of each bar
    colours = [colour for colour, _ in kinds]
    fig, axes = plt.subplots(1, 3, figsize=(11, 0.35 * len(methods) + 1.6), sharey=True)
    for ax, (measure, label) in zip(
        axes,
        (
            ("mean_log_prob", "mean log-prob per token (nats)"),
            ("distinct_2", "distinct-2 (word bigrams)"),
            ("repeat_4", "repeated 4-grams (tokens)"),
        ),
    ):
        ax.barh(range(len(methods)), [getattr(m, measure) for m in methods], color=colours)
        ax.set_xlabel(label)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(methods)), names)
    axes[0].invert_yaxis()
    fig.suptitle(
        "Decoding a Shakespeare GPT: search (greedy, beams) against sampling and real text", fontsize=10
    )
    from matplotlib.patches import Patch

    legend = dict.fromkeys(kinds)  # every kind of bar drawn, in order, once
    fig.legend(
        handles=[Patch(color=colour, label=label) for colour, label in legend],
        loc="lower center",
        ncol=len(legend),
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5, -0.01),
    )
    fig.subplots_adjust(bottom=0.24)
    save_figure(fig, path)
    plt.close(fig)


def run(
    settings: Settings,
    out_dir: str | Path,
    *,
    run_dir: str | Path | None = None,
    progress: bool = False,
    log=print,
) -> DecodingResult:
    """Continue the held-out prompts with every method of ``settings``; write ``results.json``,
    ``results.md`` and ``decoding.png`` into ``out_dir``. The model: ``run_dir`` or ``out_dir/model``
    (:func:`attnlab.experiments.text_model.text_model`: trained once, then reused)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir={out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    lm = text_model(run_dir, out, settings.preset, progress=progress, log=log)
    s = settings
    n = lm.context - s.prompt_tokens if s.new_tokens is None else s.new_tokens
    if n < 1 or s.prompt_tokens + n > lm.context:
        raise ValueError(
            f"prompts of {s.prompt_tokens} tokens + {n} new tokens do not fit the model's {lm.context} "
            f"positions (beam search cannot slide its context)"
        )
    pieces = lm.pieces(lm.speech_starts(s.prompts, s.prompt_tokens + n), s.prompt_tokens + n)  # [P, T_p + N]
    prompts, real = pieces[:, : s.prompt_tokens], pieces[:, s.prompt_tokens :]
    with torch_threads(1):  # small models: one thread is fastest on a busy machine (see training)
        methods = []
        for name, options in s.methods():
            t0 = time.perf_counter()
            cont = generate(lm.model, prompts, n, s, options)
            methods.append(measure(lm, name, prompts, cont, time.perf_counter() - t0))
            m = methods[-1]
            log(f"{name:<22} mean log-prob {m.mean_log_prob:.3f}, distinct-2 {m.distinct_2:.3f}")
        methods.append(measure(lm, REFERENCE, prompts, real, 0.0))
    files = {
        "json": str(out / "results.json"),
        "table": str(out / "results.md"),
        "plot": str(out / "decoding.png"),
    }
    texts = [lm.decode(p) for p in prompts]
    model = lm.describe()
    model["baselines"] = lm.baselines()
    model["gate"] = gate(lm.val_loss, model["baselines"]) if lm.val_loss is not None else None
    competent = bool(model["gate"] and model["gate"]["passed"])
    result = DecodingResult(s, model, texts, n, methods, verdict(methods, competent), files)
    atomic_write_json(files["json"], result.to_json())
    atomic_write_bytes(files["table"], (result.table() + "\n").encode())
    plot(result, Path(files["plot"]))
    return result
