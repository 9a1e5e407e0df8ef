"""The demo report's "language model" section: a GPT trained on Shakespeare's plays (the quick
preset), a sample of it, and the quick tables of the three language-model experiments (decoding,
induction heads, faithfulness of attention), each beside the course's claim it tests."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from attnlab.decoding import GenerationRequest, generate_text
from attnlab.experiments import beam_blandness, faithfulness, text_induction
from attnlab.report import page
from attnlab.report.page import Section
from attnlab.tasks.shakespeare import play_files
from attnlab.training.text_presets import train_text

PROMPT = "ROMEO:\n"
CONCEPTS = ("07-multi-head-attention.md",)
TITLE = "A language model: a GPT trained on Shakespeare, and three claims tested on it"


@dataclasses.dataclass(frozen=True)
class DemoLM:
    """The section's sizes: the model (``preset``, ``steps``: None = the preset's), the sample
    (``sample_tokens`` at temperature 0.8, seed 0) and each experiment's settings."""

    preset: str = "quick"
    steps: int | None = None
    sample_tokens: int = 400
    decoding: beam_blandness.Settings = beam_blandness.QUICK
    induction: text_induction.Settings = text_induction.QUICK
    faithfulness: faithfulness.Settings = faithfulness.QUICK


DEMO_LM = DemoLM()
# attnlab demo --quick: every part at a size that builds in seconds (the numbers are not meant to be read)
QUICK_LM = DemoLM(
    steps=20,
    sample_tokens=60,
    decoding=dataclasses.replace(beam_blandness.QUICK, prompts=2, beams=(2,)),
    induction=dataclasses.replace(text_induction.QUICK, probes=4),
    faithfulness=dataclasses.replace(faithfulness.QUICK, lines=4),
)


def _train(folder: Path, settings: DemoLM, progress: bool) -> tuple[dict, float]:
    """Train the section's model into ``folder``: its last record and the seconds it took."""
    t0 = time.perf_counter()
    extra = {} if settings.steps is None else {"steps": settings.steps}
    result = train_text(settings.preset, folder, progress=progress, overwrite=True, **extra)
    return result.history[-1], time.perf_counter() - t0


def language_model_section(out: Path, settings: DemoLM = DEMO_LM, progress: bool = False) -> Section:
    """Train, sample, run the three experiments on the trained model; one :class:`Section`."""

    title = TITLE
    concept = (
        "A GPT learns p(x_t | x_<t) from text: here Shakespeare's plays, one token per character, four "
        "whole plays held out. Its held-out loss in bits per character says how well it predicts text it "
        "has never seen. The course makes claims about language models that a trained one can test: beam "
        "search is bland and repetitive for open-ended text (the Week 19 course page), induction heads "
        "are a key mechanism behind in-context learning (the same page), and attention weights are not "
        "faithful explanations (the Week 1 notes)."
    )
    try:
        play_files()
    except ValueError as exc:  # the corpus is an optional install (Python >= 3.11)
        return Section("language-model", title, concept, "", page.pre(str(exc), "output"), "Not run here.")
    folder = out / "lm"
    record, seconds = _train(folder / "model", settings, progress)
    sample = generate_text(
        folder / "model",
        GenerationRequest(PROMPT, max_new=settings.sample_tokens, temperature=0.8, seed=0),
    )["text"]
    quiet = {"run_dir": folder / "model", "log": lambda *a: None}
    dec = beam_blandness.run(settings.decoding, folder / "decoding", **quiet)
    ind = text_induction.run(settings.induction, folder / "induction", **quiet)
    faith = faithfulness.run(settings.faithfulness, folder / "faithfulness", **quiet)
    trained = (
        f"{dec.model['params']:,} parameters, {record['step']} steps in {seconds:.0f} s: held-out loss "
        f"{record['val_loss']:.2f} nats per token, {record['val_bpc']:.2f} bits per character."
    )
    output = (
        page.pre(f"{trained}\n\n{PROMPT}{sample}", "output")
        + "<p>Decoding (the same held-out prompts, every method):</p>"
        + page.img(dec.files["plot"], "decoding methods")
        + page.table(*dec.cells())
        + "<p>Induction heads (repeat probes; heads zeroed):</p>"
        + page.table(*ind.cells())
        + "<p>Faithfulness (Spearman's ρ between rankings of the input positions):</p>"
        + page.img(faith.files["plot"], "attention against occlusion")
        + page.table(*faith.cells())
    )
    interpretation = "\n\n".join(
        [
            f"Trained here: {trained}",
            "Decoding. " + dec.summary(),
            "Induction heads. " + ind.summary() + _induction_note(ind),
            "Faithfulness. " + faith.summary(),
        ]
    )
    code = (
        "attnlab train --text shakespeare --preset quick --out out/demo/lm/model\n"
        f'attnlab generate out/demo/lm/model "ROMEO:" --max-new {settings.sample_tokens} --temperature 0.8 '
        "--seed 0\n"
        "attnlab experiment decoding --quick --run out/demo/lm/model --out out/demo/lm/decoding\n"
        "attnlab experiment induction --text --quick --run out/demo/lm/model --out out/demo/lm/induction\n"
        "attnlab experiment faithfulness --quick --run out/demo/lm/model --out out/demo/lm/faithfulness"
    )
    return Section("language-model", title, concept, code, output, interpretation, concepts=CONCEPTS)


def _induction_note(result) -> str:
    """What to read beside a text model's induction result, from what it found."""
    if result.verdict["induction_heads_found"]:
        return ""
    return (
        " The synthetic experiment (previous section) forms induction heads on data built to need them; "
        "this small model, trained briefly on plays, has not learned to copy (docs/language-model.md: "
        "nor had one with a 256-character context after 2,000 steps)."
    )
