"""``attnlab demo``: build the one-page report ``index.html`` (plus ``explorer.html``).

Sections, each guarded so a missing piece becomes a note instead of a crash:

1. the five lessons of the Week 1 notes (``attnlab.lessons``), each Concept -> Code -> Output ->
   Interpretation;
2. the parameter and the shape audit of the base encoder layer (d_model 512, 8 heads, d_ff 2048);
3. the quick bottleneck experiment (plot and table) and
4. its alignment heatmaps;
5. inside the heads: the induction curve of a two-layer attention-only GPT and MiniLM's head table;
6. a language model: a GPT trained on Shakespeare, sampled, and the decoding, induction and
   faithfulness experiments on it (:mod:`attnlab.report.language_model`);
7. the attention explorer pages: MiniLM on the notes' sentence, and the trained Transformer's
   cross-attention on a reversal.

The concept pages are written beside the report as HTML (``concepts/``, formulas as MathML), and each
section links the pages it draws on.
"""

from __future__ import annotations

import contextlib
import html
import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from attnlab import concepts
from attnlab._io import atomic_write_bytes
from attnlab.progress import progress as progress_bar
from attnlab.report import page
from attnlab.report.page import Section

SENTENCE = "The animal didn't cross the street because it was too tired."

# the concept pages each lesson of the Week 1 notes draws on
LESSON_CONCEPTS = {
    "01": ("04-self-attention-qkv.md", "05-scaled-dot-product.md"),
    "02": ("05-scaled-dot-product.md",),
    "03": ("07-multi-head-attention.md",),
    "04": ("12-parameter-counting.md", "09-feed-forward.md"),
    "05": ("02-bahdanau-attention.md",),
}
BACK = ("index.html", "\u2190 back to the attnlab demo report")


# every section's title after the lessons' (the contents list shows them; the language model's is
# language_model.TITLE)
TITLES = {
    "audit": "Parameter and shape audit of the base encoder layer",
    "practice": "Practice: your own attention code and your drawing of the block, graded",
    "bottleneck": "The bottleneck experiment: fixed context vs attention",
    "heatmaps": "Alignment heatmaps of the trained attention models",
    "explorer": "Attention explorer",
    "next": "Where to go next",
    "heads": "Inside the heads: an induction head forms; MiniLM's previous-token head",
}


def _lesson_sections() -> list[Callable[[], Section]]:
    from attnlab.lessons import LESSONS

    def make(number: str) -> Callable[[], Section]:
        def build() -> Section:
            lesson = LESSONS[number]
            output = page.pre("\n".join(lesson.run()), "output")
            return Section(
                f"lesson-{number}",
                f"{lesson.name}: {lesson.title}",
                lesson.concept,
                lesson.code,
                output,
                lesson.interpretation,
                concepts=LESSON_CONCEPTS.get(number, ()),
            )

        return build

    return [make(n) for n in sorted(LESSONS)]


def _audit_section() -> Section:
    from attnlab.audit.config import ModelSpec, Workload
    from attnlab.audit.params import audit_params, render_params
    from attnlab.audit.shapes import audit_shapes, render_shapes

    params = audit_params(ModelSpec.from_sizes("encoder-layer", d_model=512, heads=8, d_ff=2048))
    shapes = audit_shapes(
        ModelSpec.from_sizes("encoder-layer", d_model=512, heads=8, d_ff=2048), Workload(seq=50, batch=5)
    )
    code = (
        "from attnlab.audit import ModelSpec, Workload, audit_params, audit_shapes, render_params, "
        "render_shapes\n\n"
        'base = ModelSpec.from_sizes("encoder-layer", d_model=512, heads=8, d_ff=2048)\n'
        "print(render_params(audit_params(base)))\n"
        "print(render_shapes(audit_shapes(base, Workload(seq=50, batch=5))))\n"
        "# the same from the shell: attnlab audit params / attnlab audit shapes"
    )
    interpretation = (
        f"One post-norm encoder layer of the base model holds {params['total']:,} parameters: "
        f"{params['formula']} with d = 512, f = 2048, counted row by row, by the closed form and by "
        f"building the module, and all three agree. The feed-forward network holds about two thirds "
        f"of them. None of these numbers depends on the sequence length; the activations do: the "
        f"score tensor of one layer is [B, h, T, T] = {shapes['config'].get('batch', 5)} x 8 x 50 x 50, "
        f"which grows with the square of T while the parameters stay fixed."
    )
    return Section(
        "audit",
        TITLES["audit"],
        "A parameter audit separates what is learned (weights, biases, the LayerNorm scale and "
        "shift) from what is computed per input (activations, whose size depends on the batch "
        "and the sequence length).",
        code,
        page.pre(render_params(params), "output") + page.pre(render_shapes(shapes), "output"),
        interpretation,
        concepts=("12-parameter-counting.md", "10-residuals-and-norms.md"),
    )


# a drawing of the block from memory with two classic slips: the norm after the sublayer, no residual
# around the MLP (graded as `attnlab practice check block` does)
_DRAWING = """block: pre-norm
sizes: B=2 T=5 d=48 h=4 d_ff=192
x -> [B, T, d]
LayerNorm -> [B, T, d]
attention -> [B, T, d]
residual -> [B, T, d]
MLP -> [B, T, d]
LayerNorm -> [B, T, d]
"""


def _practice_section() -> Section:
    from attnlab.practice.block import grade_block
    from attnlab.practice.cases import attention_checks

    graded = grade_block(_DRAWING, "block.txt")
    lines = [f"{'pass' if r.passed else 'FAIL'}  {r.title}" + ("" if r.passed else f"\n      {r.message}")
             for r in graded.results]  # fmt: skip
    lines.append(f"score: {graded.score}/{graded.total}")
    return Section(
        "practice",
        TITLES["practice"],
        "The Week 19 course page ends with practice: implement attention, a causal mask and multi-head "
        "splitting in NumPy and verify them against torch's scaled_dot_product_attention; draw the "
        "decoder-only block from memory with a shape on every arrow. attnlab grades both "
        f"('attnlab practice check attention FILE' runs {len(attention_checks())} checks in a separate, "
        "limited process and names the likely mistake of each failure) and keeps the week's seven "
        "lessons as a study path ('attnlab study'). The session is shown in docs/practice.md.",
        _DRAWING,
        page.pre("\n".join(lines), "output wrap"),
        "The drawing is graded against the shapes 'attnlab audit shapes' measures on attnlab's GPT "
        "block: the missing LayerNorm before the MLP, the norm left after it and the missing residual "
        "around the MLP are each named, with their line.",
    )


def _experiment_sections(out: Path, settings, progress: bool, state: dict) -> tuple[Section, Section]:
    from attnlab.experiments.bottleneck import run

    result = run(settings, out / "bottleneck", progress=progress, log=lambda *a: None)
    state["experiment"] = result
    header = (
        ["model", "params"]
        + [f"len {b['lo']}-{b['hi']}" for b in result.models[0].buckets]
        + ["token acc (all)", "train s"]
    )
    rows = [
        [m.name, f"{m.params:,}"]
        + [f"{b['exact']:.2f}" for b in m.buckets]
        + [f"{m.overall['token_acc']:.3f}", f"{m.train_seconds:.0f}"]
        for m in result.models
    ]
    s = result.settings
    code = (
        f"attnlab experiment bottleneck --task {s.task} --quick --out out/demo/bottleneck\n\n"
        f"# in Python\nfrom attnlab.experiments.bottleneck import QUICK, run\n"
        f"result = run(QUICK, 'out/demo/bottleneck')\nprint(result.table())"
    )
    fixed = next((m for m in result.models if m.kind == "seq2seq-rnn"), None)
    attn = [m for m in result.models if m.kind != "seq2seq-rnn"]
    verdict = ""
    if fixed is not None and attn:
        f0, f1 = fixed.buckets[0]["exact"], fixed.buckets[-1]["exact"]
        best = max(attn, key=lambda m: m.buckets[-1]["exact"])
        verdict = (
            f"In this run the fixed-context model's exact accuracy goes from {f0:.2f} on the shortest "
            f"sources to {f1:.2f} on the longest, while the best attention model "
            f"({best.name}) scores {best.buckets[-1]['exact']:.2f} on the longest. "
        )
    interpretation = (
        verdict + "A fixed-width c has to carry every source symbol to every output step, and reversal needs "
        "the first source symbol last; with attention, each output step reads the encoder state it needs "
        "directly. The notes call this a strain, not a law: with a bigger model, more training or shorter "
        "inputs the fixed-context model does better, and an undertrained attention model also loses exact "
        "accuracy with length, because per-token errors compound over longer outputs.\n\n"
        f"Settings: task {s.task}, source lengths {s.min_len}-{s.max_len} mixed in training, {s.steps} steps "
        f"of batch {s.batch_size} per model, about {s.target_params:,} parameters each, "
        f"{s.eval_per_bucket} held-out test sources per length bucket, greedy decoding.\n\n"
        "Full summary: " + result.summary
    )
    experiment = Section(
        "bottleneck",
        TITLES["bottleneck"],
        "A fixed-context encoder-decoder models p(y | x) = prod_t p(y_t | y_<t, c): the decoder sees the "
        "source only through one fixed-width vector c, the same size for a 3-symbol and a 30-symbol source. "
        "Bahdanau attention replaces c by c_t = sum_i alpha_ti h_i, a fresh weighted combination of all "
        "encoder states at every decoder step; Luong attention and the Transformer's cross-attention do "
        "the same with other scores.",
        code,
        page.img(result.files["plot"], "accuracy against source length") + page.table(header, rows),
        interpretation,
        concepts=("01-seq2seq-bottleneck.md", "02-bahdanau-attention.md", "03-luong-attention.md"),
    )
    # the heatmaps are drawn in the contestants' order, one per attention model
    drawn = [m for m in result.models if m.kind != "seq2seq-rnn"]
    heat_html = "".join(
        f"<figure>{page.img(p, caption)}<figcaption>{html.escape(caption)}</figcaption></figure>"
        for p, caption in zip(result.heatmaps, map(heatmap_caption, drawn))
    )
    heatmaps = Section(
        "heatmaps",
        TITLES["heatmaps"],
        "alpha_ti, the weight output step t gives source position i, drawn as a matrix: rows are output "
        "steps (queries), columns source symbols (keys); each row sums to one.",
        "from attnlab.viz import heatmap\n"
        "# weights [T_tgt, T_src]: the hook point attention.weights, read with attnlab.nn.capture\n"
        "heatmap(weights, source_tokens, output_tokens)",
        heat_html or "<p>No attention model was trained.</p>",
        "For a reversal the mass should run along the anti-diagonal: the first output symbol attends to the "
        "last source symbol, and so on, ending with <eos> attending near the source's <eos>. The Transformer "
        "panel averages the heads of its last decoder layer's cross-attention, so it can look more diffuse "
        "than a single RNN alignment.",
        concepts=("02-bahdanau-attention.md", "03-luong-attention.md"),
    )
    return experiment, heatmaps


# what each attention-rnn score is called in the notes
SCORES = {
    "bahdanau": "Bahdanau (additive) attention",
    "luong-dot": "Luong dot-product attention",
    "luong-general": "Luong general (bilinear) attention",
    "luong-concat": "Luong concat attention",
}


def heatmap_caption(model) -> str:
    """A heatmap's caption from the model it shows (a :class:`~attnlab.experiments.bottleneck.ModelResult`
    of an attention model): which attention, of which model, on what."""
    sizes = model.model_params
    if model.kind == "transformer":
        heads = sizes.get("heads", 1)
        what = (
            f"Cross-attention of the Transformer ({sizes.get('layers', 1)} layers), its last decoder "
            f"layer's {heads} head{'s' if heads != 1 else ''} averaged"
        )
    else:
        score = sizes.get("attention", "")
        what = f"{SCORES.get(score, score + ' attention')} of the RNN encoder-decoder"
    return (
        f"{what}, {model.params:,} parameters: one held-out source of the longest length bucket "
        "(shown in the title), rows output steps, columns source symbols."
    )


EXPLORER_CONCEPTS = ("04-self-attention-qkv.md", "07-multi-head-attention.md")


def _explorer_section(out: Path, state: dict) -> Section:
    from attnlab.viz.explorer import Explorer, model_views, write_explorer

    back = BACK
    links = [(concepts.href(n), f"concept page: {concepts.page_title(n)}") for n in EXPLORER_CONCEPTS]
    # opens on "it" and the head that links it to "animal": the notes' example of a resolved reference
    write_explorer(SENTENCE, "minilm", out / "explorer.html", focus=("it", "animal"), back=back, links=links)
    paragraphs = [
        '<p><a href="explorer.html">Open the attention explorer: MiniLM (all-MiniLM-L6-v2) on '
        f'"{SENTENCE}"</a></p>'
    ]
    result = state.get("experiment")
    if result is not None:
        name = next((n for n, m in result.trained.items() if getattr(m, "kind", "") == "transformer"), None)
        if name is not None:
            from attnlab.tasks import BOS, EOS
            from attnlab.training.evaluate import predict

            model = result.trained[name]
            task = _task_for(result.settings)
            tok = task.tokenizer
            if task.name == "dates":
                src_text = "jan 25th 2026"
            else:
                src_text = "".join(tok.symbols)[: min(10, result.settings.max_len)]
            pred = predict(model, task, [src_text])[0]
            src = tok.encode(src_text) + [EOS]
            tgt = [BOS] + tok.encode(pred)
            views = model_views(model, src, tok.tokens(src), tgt, tok.tokens(tgt))
            Explorer(
                views,
                model_label=f"Transformer trained on {task.name} (bottleneck experiment); output {pred!r}",
                sentence=src_text,
                back=back,
                links=links,
            ).save(out / "explorer-trained.html")
            paragraphs.append(
                f'<p><a href="explorer-trained.html">Open the explorer on the trained Transformer: '
                f"{src_text} -> {pred}</a> (encoder self-, decoder self- and cross-attention)</p>"
            )
    return Section(
        "explorer",
        TITLES["explorer"],
        "Every head of every layer, for one input: pick a layer and a head, hover a token to see "
        "where it attends.",
        f'attnlab explore "{SENTENCE}" --out out/demo/explorer.html',
        "".join(paragraphs),
        "In MiniLM, look at the heads where 'it' attends to 'animal' (the notes' example of "
        "self-attention resolving a reference). The pages are separate files next to this one, "
        "self-contained and readable offline too.",
        concepts=EXPLORER_CONCEPTS,
    )


# (what, the command or page, why) -- the report's last section; every command here exists.
NEXT_STEPS = (
    (
        "Concept pages",
        "docs/concepts/README.md",
        "one idea per page, each with an example whose output is tested",
    ),
    ("Myths", "attnlab myths", "the misconceptions the notes warn about, each refuted by a computation"),
    ("Quiz", "attnlab quiz", "worked checks with fresh numbers, answers shown step by step"),
    ("Study path", "attnlab study", "the seven Week 19 lessons, your progress and what to do next"),
    ("Practice", "docs/practice.md", "your own NumPy attention and your drawing of the block, graded"),
    ("Week 1 code blocks", "attnlab lesson --list", "the five, run beside attnlab's"),
    ("Explorer", 'attnlab explore "your sentence"', "MiniLM's attention (or --model DIR) on your own text"),
    (
        "Serve",
        "attnlab serve",
        "a local page (127.0.0.1, port 8000): type any text, see every head, switch heads off",
    ),
    ("Audit", "attnlab audit params --d-model 768 --heads 12 --d-ff 3072 --layers 12", "exact counts"),
    ("Train", "attnlab train --task dates --model transformer", "a small model in minutes, saved in runs/"),
    (
        "Claims, measured",
        "attnlab experiment --help",
        "paths, residuals, gqa, relations, icl, scoring: sentences the notes state in words, each measured",
    ),
    ("Shakespeare", "attnlab train --text shakespeare --preset nanogpt", "nanoGPT's CPU run, then generate"),
)


def _where(where: str) -> str:
    """A next step's place as HTML: a concept page is a link to its rendered page, anything else code."""
    if where.startswith("docs/concepts/"):
        name = where.rsplit("/", 1)[1]
        return page.link(concepts.href(name), f"{concepts.FOLDER}/{concepts.html_name(name)}")
    return f"<code>{html.escape(where)}</code>"


def _next_steps_section() -> Section:
    rows = [[html.escape(what), _where(where), html.escape(why)] for what, where, why in NEXT_STEPS]
    return Section(
        "next",
        TITLES["next"],
        "The report showed each piece once. Each line below is a place to go deeper; the commands run "
        "from this folder's virtual environment (.venv/bin/attnlab); the concept pages are written "
        "beside this report (concepts/), the other pages are in the repository's docs/.",
        "",
        page.table(["what", "command or page", "for"], rows, html_cells=True),
        "A learner: concept pages in order, with the quiz and myths beside them. An engineer: the "
        "audits with a preset, then attnlab.nn.BlockConfig in docs/engine.md.",
    )


def _heads_section(out: Path, induction, progress: bool) -> Section:
    """The induction curve of a two-layer attention-only GPT and MiniLM's named heads."""
    from attnlab.experiments.induction import DEMO, run
    from attnlab.interp.scan import scan_repeat

    result = run(
        DEMO if induction is None else induction,
        out / "induction",
        show_progress=progress,
        log=lambda *a: None,
    )
    r = result.runs[0]
    scan = scan_repeat("minilm", length=20, batch=4)[0]
    named = []
    for name, found in scan.above(0.4).items():
        shown = ", ".join(f"{layer}.{head} ({v:.2f})" for layer, head, v in found[:6])
        more = f" and {len(found) - 6} more" if len(found) > 6 else ""
        named.append([name, (shown + more) or "none above 0.4"])
    prev = scan.scores["previous"]
    header = ["layer"] + [str(h) for h in range(len(prev[0]))]
    rows = [[str(i)] + [f"{v:.2f}" for v in row] for i, row in enumerate(prev)]
    return Section(
        "heads",
        TITLES["heads"],
        "A head's score for a pattern P is the share of its attention that follows P: sum(A * P) / sum(A) "
        "(TransformerLens's measure). Induction: P[i, j] = 1 where the token before j equals token i, j < i, "
        "the head that completes '... A B ... A -> B'. Trained on sequences with a repeated random segment, "
        "a two-layer attention-only GPT learns to copy the segment's continuation in a sudden phase "
        "change (Olsson et al. 2022).",
        "attnlab experiment induction --quick --out out/induction\nattnlab heads minilm",
        page.img(result.files["plot"], "induction curve")
        + page.table(*result.rows())
        + "<p>MiniLM, previous-token score of every head (8 probes [CLS] r r, L = 20):</p>"
        + page.table(header, rows)
        + page.table(["detector", "heads above 0.4 (layer.head, score)"], named),
        f"In this run the repeat loss fell below half the first-occurrence loss at step {r.phase_step}, "
        f"when head {r.best_head[0]}.{r.best_head[1]}'s induction score reached {r.best_induction:.2f} "
        f"beside previous-token head {r.previous_head[0]}.{r.previous_head[1]} ({r.best_previous:.2f})."
        f" Zeroing the "
        f"induction heads' output sends the repeat loss from {r.loss_repeat:.2f} back to "
        f"{r.loss_repeat_all_ablated:.2f} nats (first occurrences: {r.loss_first:.2f}). MiniLM is "
        f"bidirectional: its previous-token head is clear, most of its heads park attention on [CLS], "
        f"and duplicate/induction scores only count earlier copies. More: docs/heads.md; 'attnlab experiment "
        f"icl --quick' measures in-context learning beside the induction score, 'attnlab experiment "
        f"relations --quick' scores MiniLM's heads on verb -> subject and pronoun -> antecedent pairs.",
        concepts=("07-multi-head-attention.md",),
    )


def _lm_section(out: Path, settings, progress: bool) -> Section:
    from attnlab.report.language_model import DEMO_LM, language_model_section

    return language_model_section(out, DEMO_LM if settings is None else settings, progress)


def _task_for(settings):
    from attnlab.experiments.bottleneck import _task

    return _task(settings)


def quick_settings():
    """``(bottleneck settings, induction settings)`` of ``attnlab demo --quick``: every section of the
    full report, at sizes that build in a minute (the numbers are not meant to be read)."""
    import dataclasses

    from attnlab.experiments.bottleneck import Settings
    from attnlab.experiments.induction import DEMO

    bottleneck = Settings(
        min_len=3,
        max_len=6,
        bucket_width=2,
        target_params=4000,
        steps=10,
        batch_size=16,
        train_size=200,
        eval_per_bucket=4,
        warmup=3,
    )
    return bottleneck, dataclasses.replace(DEMO, steps=20, eval_every=10, eval_size=16)


def _steps(
    out: Path, settings, progress: bool, state: dict, induction, language_model, explorer: bool
) -> list:
    """The report's parts in order: ``(progress label, key, title, build)``, ``build() -> Section``."""
    try:
        lesson_builders = _lesson_sections()
    except Exception as exc:
        err = f"{type(exc).__name__}: {exc}".splitlines()[0]
        lesson_builders = [lambda err=err: Section("lessons", "Week 1 code blocks", error=err)]
    steps = [
        (f"lesson {i + 1}", f"lesson-{i + 1:02d}", f"Week 1 code block {i + 1}", b)
        for i, b in enumerate(lesson_builders)
    ]
    steps.append(("audit", "audit", "Parameter and shape audit", _audit_section))
    steps.append(("practice", "practice", "Practice", _practice_section))
    steps.append(
        (
            "bottleneck experiment",
            "bottleneck",
            "The bottleneck experiment",
            lambda: _experiment_sections(out, settings, progress, state),
        )
    )
    steps.append(("heads", "heads", "Inside the heads", lambda: _heads_section(out, induction, progress)))
    steps.append(
        (
            "language model",
            "language-model",
            "A language model",
            lambda: _lm_section(out, language_model, progress),
        )
    )
    if explorer:
        steps.append(("explorer", "explorer", "Attention explorer", lambda: _explorer_section(out, state)))
    steps.append(("next steps", "next", "Where to go next", _next_steps_section))
    return steps


# The parts that train models run in two lanes side by side, one core each, sharing nothing: this
# process builds the bottleneck experiment and the explorer pages of its trained Transformer (which
# need its models in memory), a second (spawned) process every other part. About equal work: 218 s and
# 168 s of a sequential run on the 2-core Xeon (load 5-11). Every part seeds its own generators, and
# the report is the same, number for number, with one thread per lane as with two threads in one lane.
MAIN_LANE = frozenset({"bottleneck", "explorer"})


def _lanes() -> tuple[int, int]:
    """``(lanes, torch threads per lane)``: two lanes where this process may use two cores or more."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return (2, cores // 2) if cores >= 2 else (1, cores)


@contextlib.contextmanager
def _torch_threads(n: int | None):
    """Torch's intra-op threads set to ``n`` inside the block (None: left as they are)."""
    import torch

    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _guarded(key: str, title: str, build: Callable[[], Section | tuple[Section, ...]]) -> list[Section]:
    """The sections ``build()`` returns, each timed; a note naming the error when it raises (a missing
    or broken piece must not sink the whole report)."""
    t0 = time.perf_counter()
    try:
        built = build()
    except Exception as exc:
        built = Section(key, title, error=f"{type(exc).__name__}: {exc}".splitlines()[0])
    sections = list(built) if isinstance(built, tuple) else [built]
    for s in sections:
        s.seconds = time.perf_counter() - t0
    return sections


def _side_lane(out: str, settings, induction, language_model, explorer: bool, keys, threads: int) -> dict:
    """The second lane, in its own process: the parts ``keys`` built in order with ``threads`` torch
    threads and no progress bars (two processes would draw over each other); ``{key: [Section]}``."""
    steps = _steps(Path(out), settings, False, {}, induction, language_model, explorer)
    with _torch_threads(threads):
        return {key: _guarded(key, title, build) for _, key, title, build in steps if key in keys}


MARK = ".attnlab-demo"  # in a folder the demo writes into: building again there is expected


def check_demo_folder(out: str | Path, overwrite: bool = False) -> None:
    """A ``ValueError`` when ``out`` holds files and is not a demo's folder (no :data:`MARK`, and no
    ``index.html`` of an earlier demo): the demo writes ``index.html`` and a dozen folders there, and
    would replace what is in it without a word. ``overwrite=True``: no check."""
    out = Path(out)
    if overwrite or not out.is_dir() or (out / MARK).exists():
        return
    index = out / "index.html"
    if index.is_file() and "Generated by `attnlab demo`" in index.read_text("utf-8", errors="replace"):
        return
    held = sorted(p.name for p in out.iterdir())
    if held:
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise ValueError(
            f"out={out} holds files that are not a demo's ({shown}); the demo would overwrite them: "
            "choose an empty or new folder, or pass overwrite=True"
        )


def build_demo(
    out_dir: str | Path,
    *,
    settings=None,
    progress: bool = True,
    explorer: bool = True,
    log=print,
    induction=None,
    language_model=None,
) -> dict:
    """Build ``out_dir/index.html``; returns ``{"index", "seconds", "sections": {key: seconds or error}}``.
    ``language_model``: the sizes of that section (:class:`attnlab.report.language_model.DemoLM`; None:
    the quick preset's model and the experiments' quick settings)."""
    from attnlab.experiments.bottleneck import QUICK

    settings = QUICK if settings is None else settings
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir={out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    (out / MARK).touch()  # before anything is written: an interrupted build is still a demo's folder
    t_start = time.perf_counter()
    concepts.write_pages(out / concepts.FOLDER, back=("../index.html", "the attnlab demo report"))
    steps = _steps(out, settings, progress, {}, induction, language_model, explorer)
    lanes, threads = _lanes()
    side = [key for _, key, _, _ in steps if key not in MAIN_LANE] if lanes > 1 else []
    built: dict[str, list[Section]] = {}
    bar = progress_bar(total=len(steps), desc="attnlab demo", unit="part", quiet=not progress)
    spawn = multiprocessing.get_context("spawn")  # a fresh interpreter: no fork of torch's thread pools
    with ProcessPoolExecutor(1, mp_context=spawn) if side else contextlib.nullcontext() as pool:
        args = (str(out), settings, induction, language_model, explorer, side, threads)
        later = pool.submit(_side_lane, *args) if side else None
        with _torch_threads(threads if side else None):
            for label, key, title, build in steps:
                if key not in side:
                    bar.set_postfix_str(label)
                    built[key] = _guarded(key, title, build)
                    bar.update()
        if later is not None:
            bar.set_postfix_str(", ".join(label for label, key, _, _ in steps if key in side))
            try:
                built |= later.result()
            except Exception as exc:  # the second process died (killed, out of memory)
                err = f"{type(exc).__name__}: {exc}".splitlines()[0]
                built |= {key: [Section(key, title, error=err)] for _, key, title, _ in steps if key in side}
            bar.update(len(side))
    bar.close()
    sections = [s for _, key, _, _ in steps for s in built[key]]
    seconds = time.perf_counter() - t_start
    text = page.render(
        "attnlab demo: attention, implemented twice and proven correct",
        f"Generated by `attnlab demo` in {seconds:.0f} s on this machine. Every number below was computed "
        f"while building this page.",
        sections,
        top_html=f"<p>The concept pages, one idea each with its equations: "
        f"{page.link(concepts.href('README.md'), 'all concept pages')}.</p>",
        footer="Self-contained: images are embedded; explorer and concept pages are local files beside it.",
    )
    index = out / "index.html"
    atomic_write_bytes(index, text.encode("utf-8"))
    return {
        "index": str(index),
        "seconds": seconds,
        "sections": {s.key: (s.error or round(s.seconds, 1)) for s in sections},
    }


__all__ = ["SENTENCE", "build_demo"]
