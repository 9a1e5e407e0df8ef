"""The week as a study path: the seven lessons of the Week 19 course page, its practice, its milestone.

Each lesson ("tick each one once you could explain it") links to its concept pages in ``docs/concepts``,
the attnlab command that shows it, the myths it guards against (``attnlab myths N``) and its quiz
topics (``attnlab quiz --topic T``). :data:`EXERCISES` are the page's three practice items; the
warm-up and the core are graded by ``attnlab practice check``, the stretch is a written summary.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab._checks import did_you_mean

COURSE = "the Week 19 course page (Seq2seq and attention)"
DONE_WHEN = "You can draw a transformer block from memory and explain what each component is for."
MILESTONE = "Draw the transformer block from memory"


@dataclass(frozen=True)
class Lesson:
    """One lesson of the Week 19 course page ("Week 19 lesson N", ticked with ``attnlab study tick N``;
    not a Week 1 code block of ``attnlab lesson``) with where attnlab covers it."""

    number: int
    title: str
    summary: str
    concepts: tuple[str, ...]
    commands: tuple[str, ...]
    myths: tuple[int, ...]
    quiz_topics: tuple[str, ...]

    @property
    def name(self) -> str:
        """``"Week 19 lesson 5"``."""
        return f"Week 19 lesson {self.number}"


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        1,
        "Sequence-to-sequence models",
        "encoder and decoder, teacher forcing, greedy and beam search, cross-attention",
        ("01-seq2seq-bottleneck.md", "15-decoding.md"),
        ("attnlab experiment bottleneck --help", "attnlab experiment beam --quick"),
        (1, 15, 24),
        ("context",),
    ),
    Lesson(
        2,
        "Bahdanau and Luong attention",
        "score, softmax, weighted sum: alpha_ti = softmax_i(score(s_t, h_i)), c_t = sum_i alpha_ti h_i",
        ("02-bahdanau-attention.md", "03-luong-attention.md"),
        ("attnlab lesson 05", "attnlab experiment scoring --quick"),
        (11, 16, 17),
        ("additive",),
    ),
    Lesson(
        3,
        "Self-attention",
        "queries, keys, values; softmax(Q K^T / sqrt(d_k) + M) V; the causal mask",
        ("04-self-attention-qkv.md", "05-scaled-dot-product.md", "06-masks.md"),
        (
            "attnlab lesson 01",
            "attnlab lesson 02",
            "attnlab experiment paths --quick",
            "attnlab experiment icl --quick",
        ),
        (2, 3, 4, 12, 18, 26),
        ("softmax", "scores"),
    ),
    Lesson(
        4,
        "Multi-head attention",
        "h heads of d/h, Concat(heads) W^O; GQA and MQA",
        ("07-multi-head-attention.md", "08-gqa-mqa.md"),
        ("attnlab lesson 03", "attnlab experiment relations --quick", "attnlab experiment gqa --quick"),
        (9, 14, 20, 28),
        ("wo",),
    ),
    Lesson(
        5,
        "Positional information",
        "sinusoidal, learned, RoPE, ALiBi: self-attention alone sees a set",
        ("11-positions.md",),
        (),
        (19,),
        ("positions",),
    ),
    Lesson(
        6,
        "The transformer block",
        "x = x + MHA(LN(x)); x = x + MLP(LN(x)); residual stream, 4x MLP, pre-norm and post-norm",
        ("09-feed-forward.md", "10-residuals-and-norms.md", "12-parameter-counting.md"),
        (
            "attnlab lesson 04",
            "attnlab audit shapes --model gpt --vocab 100 --norm pre",
            "attnlab experiment residuals --quick",
            "attnlab experiment facts --quick",
        ),
        (7, 8, 21, 25),
        ("shapes", "params", "concepts"),  # concepts: the page's bar, "explain what each component is for"
    ),
    Lesson(
        7,
        "Cost and FlashAttention",
        "n^2 scores, FLOPs 4 n^2 d and 16 n d^2, tiling with an online softmax, the KV cache",
        ("13-cost-and-flashattention.md", "14-kv-cache.md"),
        ("attnlab audit cost --help",),
        (10, 27, 29),
        ("flops", "kvcache"),
    ),
)


@dataclass(frozen=True)
class Exercise:
    """One practice item of the course page; ``graded`` when ``attnlab practice check`` grades it."""

    name: str
    level: str
    title: str
    task: str
    graded: bool


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "block",
        "warm-up",
        "Draw it from memory",
        "Draw a decoder-only transformer block (LayerNorm, attention, residual, MLP) with tensor shapes "
        "on every arrow. This is also the week's milestone.",
        True,
    ),
    Exercise(
        "attention",
        "core",
        "Attention in NumPy",
        "Implement scaled dot-product attention, a causal mask and multi-head splitting in NumPy, and "
        "verify against torch.nn.functional.scaled_dot_product_attention.",
        True,
    ),
    Exercise(
        "summary",
        "stretch",
        "Paper with the annotated code",
        "Read Attention Is All You Need alongside The Annotated Transformer and write a one-page summary "
        "of what each component is for (not graded).",
        False,
    ),
)
GRADED = tuple(e.name for e in EXERCISES if e.graded)


def get_lesson(number) -> Lesson:
    """Lesson 1..7; ``ValueError`` naming the range otherwise."""
    text = str(number).strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= len(LESSONS):
        raise ValueError(
            f"unknown Week 19 lesson {str(number)!r}: choose a number from 1 to {len(LESSONS)} "
            "(the Week 1 code blocks are 'attnlab lesson')"
        )
    return LESSONS[int(text) - 1]


def get_exercise(name: str, graded_only: bool = False) -> Exercise:
    """The exercise called ``name``; ``ValueError`` naming the choices otherwise."""
    choices = [e for e in EXERCISES if e.graded or not graded_only]
    for e in choices:
        if e.name == name:
            return e
    names = [e.name for e in choices]
    raise ValueError(
        f"unknown exercise {name!r}: choose one of {', '.join(names)}{did_you_mean(name, names)}"
    )


def practice_next(latest: dict, passed: set[str]) -> list[str]:
    """What ``attnlab practice list`` suggests: for each graded exercise not yet passed, start it or
    check it again (its latest file); once every one has passed, that (the stretch is not graded)."""
    steps = []
    for name in GRADED:
        if name in passed:
            continue
        last = latest.get(name)
        if last is None:
            steps.append(f"next: attnlab practice start {name}")
        else:
            steps.append(
                f"next: attnlab practice check {name} {last['file']} (latest {last['score']}/{last['total']})"
            )
    if not steps:
        return ["every graded exercise has passed; the stretch goal (summary) is not graded"]
    return steps


# where the concept pages are, from any folder: they ship in the package (attnlab/concepts/pages)
CONCEPTS_HOW = "'attnlab study --html study.html' writes them (concepts/NN-name.html beside it, linked)"


def quiz_score(right: int, asked: int, planned: int) -> str:
    """A quiz's score as ``attnlab quiz`` prints it: ``3/4``, or ``0/1 (3 not asked)``."""
    return f"{right}/{asked}" + (f" ({planned - asked} not asked)" if asked < planned else "")


def progress(ticked: dict, latest: dict, passed: set[str], best_quiz: dict) -> dict:
    """The state of the week as data: lessons (ticked, best quiz scores per topic), ``mixed_quiz``
    (the best quiz taken without ``--topic``, ``None`` if none), practice, milestone, next step."""
    lessons = []
    for lesson in LESSONS:
        scores = {t: best_quiz[t] for t in lesson.quiz_topics if t in best_quiz}
        lessons.append(
            {
                "number": lesson.number,
                "title": lesson.title,
                "ticked": lesson.number in ticked,
                "quiz": {t: quiz_score(*score) for t, score in scores.items()},
            }
        )
    practice = []
    for e in EXERCISES:
        last = latest.get(e.name)
        practice.append(
            {
                "name": e.name,
                "level": e.level,
                "title": e.title,
                "graded": e.graded,
                "passed": e.name in passed,
                "latest": None if last is None else f"{last['score']}/{last['total']}",
            }
        )
    milestone = "block" in passed
    todo = [n["number"] for n in lessons if not n["ticked"]]
    if todo:
        lesson = LESSONS[todo[0] - 1]
        run = f"'{lesson.commands[0]}'" if lesson.commands else f"'attnlab myths {lesson.myths[0]}'"
        page = lesson.concepts[0].removesuffix(".md")
        step = (
            f"{lesson.name} ({lesson.title}): read concept {page}, run {run}, "
            f"then 'attnlab study tick {lesson.number}' once you can explain it"
        )
    elif "attention" not in passed:
        step = (
            "the core practice: 'attnlab practice start attention', then "
            "'attnlab practice check attention FILE'"
        )
    elif not milestone:
        step = "the milestone: 'attnlab practice start block', then 'attnlab practice check block FILE'"
    else:
        step = "the week is done; the stretch goal (a one-page summary of the paper) is optional"
    mixed = best_quiz.get(None)
    return {
        "lessons": lessons,
        "mixed_quiz": None if mixed is None else quiz_score(*mixed),
        "practice": practice,
        "milestone": milestone,
        "next": step,
    }
