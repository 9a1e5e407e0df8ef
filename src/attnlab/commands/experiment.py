"""``attnlab experiment bottleneck`` (fixed context vs attention, accuracy by source length),
``attnlab experiment extrapolation`` (positions trained at L, scored at L..8L),
``attnlab experiment induction`` (induction heads forming in small GPTs) and
``attnlab experiment recall`` (MQAR: what windows, linear attention and SSMs trade); the claim
experiments of :mod:`attnlab.commands.experiment_claims` (paths, residuals, gqa, relations, icl,
scoring); on a GPT trained on Shakespeare: ``attnlab experiment decoding`` (greedy, beam search and sampling),
``attnlab experiment induction --text`` and ``attnlab experiment faithfulness`` (attention against
occlusion and gradient x input)."""

from __future__ import annotations

import contextlib
import dataclasses
import json

import click

from attnlab._io import dumps_json
from attnlab.commands._errors import usage_errors
from attnlab.commands._types import POSITIVE, SEED, SuggestingGroup, choice
from attnlab.commands.experiment_claims import claim_commands
from attnlab.experiments.recall_settings import QUICK as RECALL_QUICK
from attnlab.experiments.recall_settings import Settings as _RecallSettings
from attnlab.names import TRAINED_POSITIONS

RECALL_FULL = _RecallSettings()
# the text run the language-model experiments study: the library's run= is the command's --run
_RUN = {"run": "--run"}


def _sizes(values: tuple[int, ...]) -> str:
    """``(4, 8, 16)`` -> ``"4/8/16"`` for help texts."""
    return "/".join(str(v) for v in values)


def _one_writer(out: str | None):
    """The folder's writer lock (``OUT/.attnlab.lock``, :func:`attnlab.training.rundir.writer_lock`),
    taken before any work: a second experiment writing into ``--out`` is refused naming the first's
    pid, and a lock left by a killed process is taken over. Nothing to lock without ``--out``."""
    if out is None:
        return contextlib.nullcontext()
    from attnlab._io import check_out_path
    from attnlab.training.rundir import writer_lock

    return writer_lock(check_out_path(out), "experiment")


@click.group(cls=SuggestingGroup)
def experiment() -> None:
    """Studies that train small models and write tables and plots."""


@experiment.command()
@click.option(
    "--task",
    type=choice("attnlab.names:TASKS"),
    default="reverse",
    show_default=True,
    help="The built-in task the models learn.",
)
@click.option("--quick", is_flag=True, help="The demo's small run (about 2-3 minutes on 2 cores).")
@click.option("--out", type=str, required=True, help="Folder for the results.")
@click.option("--steps", type=POSITIVE, default=None, help="Training steps per model (overrides the preset).")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Random seed (data and models).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.option("--json", "as_json", is_flag=True, help="Print results.json instead of the table.")
@usage_errors
def bottleneck(
    task: str, quick: bool, out: str, steps: int | None, seed: int, quiet: bool, as_json: bool
) -> None:
    """Train Seq2SeqRNN (fixed context), AttentionRNN (Bahdanau, Luong) and a Transformer at
    comparable sizes; report exact and token accuracy by source-length bucket on held-out data."""
    from attnlab.experiments.bottleneck import DATES, QUICK, Settings, run

    settings = QUICK if quick else Settings()
    changes = {"task": task, "seed": seed}
    if task == "dates":
        changes.update(DATES)
    if steps is not None:
        changes["steps"] = steps
    settings = dataclasses.replace(settings, **changes)
    log = (lambda *_: None) if as_json else click.echo
    with _one_writer(out):  # checked and locked before minutes of training
        result = run(settings, out, progress=not quiet, log=log)
    if as_json:
        with open(result.files["json"]) as f:
            click.echo(dumps_json(json.load(f), indent=2))
        return
    click.echo("")
    click.echo("Exact-sequence accuracy on held-out sources, by source length:")
    click.echo(result.table())
    click.echo("")
    click.echo(result.summary)
    click.echo(
        f"wrote {result.files['csv']}, {result.files['json']}, {result.files['plot']} and "
        f"{len(result.heatmaps)} heatmaps"
    )


@experiment.command()
@click.option(
    "--quick",
    is_flag=True,
    help="The small preset (21 s of CPU; 4-5 min on 2 busy cores); default: the full one (~13 min).",
)
@click.option("--out", type=str, default=None, help="Folder for results.json and accuracy_vs_length.png.")
@click.option("--steps", type=int, default=None, help="Training steps per model (overrides the preset).")
@click.option(
    "--finetune-steps", type=int, default=None, help="Steps of the PI/YaRN fine-tunes at 2L (0: none)."
)
@click.option(
    "--models",
    type=str,
    default=None,
    help="Comma-separated positions to train, from: " + ", ".join(TRAINED_POSITIONS) + " (default: all).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the weights and the data.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of the table.")
@usage_errors
def extrapolation(
    quick: bool,
    out: str | None,
    steps: int | None,
    finetune_steps: int | None,
    models: str | None,
    seed: int,
    quiet: bool,
    as_json: bool,
) -> None:
    """Train GPTs that differ only in positions (NoPE, sinusoidal, learned, RoPE, ALiBi) at length L on
    the latest-passkey task; score them at L, 2L, 4L, 8L, with RoPE also scaled (PI, dynamic NTK,
    YaRN) at evaluation and after a short fine-tune at 2L."""
    from attnlab.experiments.extrapolation import QUICK, Settings, run

    changes: dict = {"seed": seed}
    if steps is not None:
        changes["steps"] = steps
    if finetune_steps is not None:
        changes["finetune_steps"] = finetune_steps
    if models is not None:
        changes["models"] = tuple(m.strip() for m in models.split(",") if m.strip())
    settings = dataclasses.replace(QUICK if quick else Settings(), **changes)
    log = (lambda *_: None) if (as_json or quiet) else click.echo
    with _one_writer(out):  # checked and locked before minutes of training
        result = run(settings, out, progress=not quiet, log=log)
    if as_json:
        click.echo(dumps_json(result.to_json(), indent=2))
        return
    if not quiet:
        click.echo("")
    click.echo(
        f"Latest-passkey accuracy and loss, trained at T={settings.train_len} ({result.seconds:.0f} s):"
    )
    click.echo(result.table())
    bad = result.did_not_learn()
    if bad:
        click.echo(
            f"Below {settings.reached:.0%} at the training length (curves untrusted, not ranked): "
            f"{', '.join(bad)}"
        )
    if result.files:
        click.echo(f"wrote {result.files['json']} and {result.files['plot']}")
    else:
        click.echo("no --out: the table only (no JSON or plot files written)")


@experiment.command()
@click.option(
    "--quick", is_flag=True, help="The two attention-only models, 1000 steps (about 2 minutes on 2 cores)."
)
@click.option(
    "--text",
    is_flag=True,
    help="Study a GPT trained on Shakespeare instead (--run DIR, or the preset trained into OUT/model): "
    "repeat probes, head scores, ablation.",
)
@click.option("--out", type=str, required=True, help="Folder for results.json, results.md and induction.png.")
@click.option("--steps", type=int, default=None, help="Training steps per model (overrides the preset).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the weights and the data.")
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.option("--json", "as_json", is_flag=True, help="Print results.json instead of the table.")
@click.option(
    "--run",
    "run_dir",
    type=str,
    default=None,
    help="--text: the text run folder to study (trained there once when it holds no run; default OUT/model).",
)
@usage_errors(names=lambda: _RUN)
def induction(
    quick: bool,
    text: bool,
    out: str,
    steps: int | None,
    seed: int,
    quiet: bool,
    as_json: bool,
    run_dir: str | None,
) -> None:
    """Train 1- and 2-layer attention-only GPTs (and, without --quick, a 2-layer GPT with MLPs) on
    sequences with repeated random segments; log the loss on first occurrences and on repeats and
    every head's previous-token and induction score; ablate the induction heads at the end.
    With --text: the same questions put to a GPT trained on Shakespeare."""
    if text or run_dir is not None:
        if steps is not None:
            raise ValueError("--steps applies to the synthetic models; with --text the model is a text run")
        _text_induction(quick, run_dir, out, seed, quiet, as_json)
        return
    from attnlab.experiments.induction import QUICK, Settings, run

    settings = QUICK if quick else Settings()
    changes = {"seed": seed}
    if steps is not None:
        changes["steps"] = steps
    settings = dataclasses.replace(settings, **changes)
    log = (lambda *_: None) if as_json or quiet else click.echo
    with _one_writer(out):
        result = run(settings, out, show_progress=not quiet and not as_json, log=log)
    if as_json:
        with open(result.files["json"]) as f:
            click.echo(dumps_json(json.load(f), indent=2))
        return
    click.echo("")
    click.echo(result.table())
    click.echo(f"wrote {result.files['json']}, {result.files['table']} and {result.files['plot']}")


def _run_on_text(run, settings, out: str, run_dir: str | None, quiet: bool, as_json: bool):
    """Run a language-model experiment (``run(settings, out, run_dir=...)``) with the command's output
    choices; with ``--json`` print its results and return None, else return the result."""
    log = (lambda *_: None) if as_json or quiet else click.echo
    with _one_writer(out):
        result = run(settings, out, run_dir=run_dir, progress=not quiet and not as_json, log=log)
    if as_json:
        click.echo(dumps_json(result.to_json(), indent=2))
        return None
    return result


def _claim_and_files(result, claim: str) -> None:
    """The closing lines of a language-model experiment: the course's claim, the verdict, the files."""
    from attnlab.experiments.baselines import describe

    click.echo(describe(result.model.get("baselines"), result.model.get("gate")))
    click.echo("The claim: " + claim)
    click.echo(result.summary())
    click.echo(f"wrote {result.files['json']}, {result.files['table']} and {result.files['plot']}")


def _text_induction(
    quick: bool, run_dir: str | None, out: str, seed: int, quiet: bool, as_json: bool
) -> None:
    """``attnlab experiment induction --text``: :mod:`attnlab.experiments.text_induction`."""
    from attnlab.experiments.text_induction import CLAIM, QUICK, Settings, run

    settings = dataclasses.replace(QUICK if quick else Settings(), seed=seed)
    result = _run_on_text(run, settings, out, run_dir, quiet, as_json)
    if result is None:
        return
    click.echo(f"\n{result.model['run']}: {result.heads_line()}\n")
    click.echo(result.table())
    click.echo("")
    _claim_and_files(result, CLAIM)


@experiment.command()
@click.option(
    "--quick",
    is_flag=True,
    help=f"The small preset (pairs {_sizes(RECALL_QUICK.pairs)}, widths {_sizes(RECALL_QUICK.widths)}, "
    f"{RECALL_QUICK.steps} steps; default pairs {_sizes(RECALL_FULL.pairs)}, widths "
    f"{_sizes(RECALL_FULL.widths)}, {RECALL_FULL.steps} steps).",
)
@click.option("--out", type=str, default=None, help="Folder for results.json, table.txt and the plot.")
@click.option("--steps", type=int, default=None, help="Training steps per model (overrides the preset).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every model and batch.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of the table.")
@usage_errors
def recall(quick: bool, out: str | None, steps: int | None, seed: int, quiet: bool, as_json: bool) -> None:
    """Multi-query associative recall (MQAR, Zoology): full attention, a sliding window shorter
    than the distance to the keys, linear attention and a selective state-space layer, at several
    numbers of key-value pairs and model widths; accuracy on fresh sequences."""
    from attnlab.experiments.recall import QUICK, Settings, dumps, run

    settings = QUICK if quick else Settings()
    changes = {"seed": seed}
    if steps is not None:
        changes["steps"] = steps
    settings = dataclasses.replace(settings, **changes)
    log = (lambda *_: None) if (as_json or quiet) else click.echo
    with _one_writer(out):
        result = run(settings, out, log=log)
    if as_json:
        click.echo(dumps(result))
        return
    click.echo("")
    click.echo(f"MQAR recall accuracy (window = {settings.window} tokens, {settings.steps} steps per model):")
    click.echo(result.table())
    if result.files:
        click.echo(f"wrote {result.files['json']}, {result.files['table']} and {result.files['plot']}")


for _claim in claim_commands(_one_writer):  # the course material's claims, one command each
    experiment.add_command(_claim)


def _run_option(f):
    """``--run DIR``: the text run the language-model experiments study (trained there once)."""
    return click.option(
        "--run",
        "run_dir",
        type=str,
        default=None,
        help="A text run folder (attnlab train --text) to study; one that holds no run yet gets the "
        "preset trained into it first, then reused. Default: OUT/model, likewise.",
    )(f)


@experiment.command()
@click.option("--quick", is_flag=True, help="The quick preset's model (about 25 s to train) and 16 prompts.")
@_run_option
@click.option("--out", type=str, required=True, help="Folder for results.json, results.md and decoding.png.")
@click.option("--prompts", type=POSITIVE, default=None, help="Held-out prompts (default 48; --quick 16).")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the sampling methods.")
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.option("--json", "as_json", is_flag=True, help="Print results.json instead of the table.")
@usage_errors(names=lambda: _RUN)
def decoding(
    quick: bool, run_dir: str | None, out: str, prompts: int | None, seed: int, quiet: bool, as_json: bool
) -> None:
    """Continue held-out Shakespeare prompts with greedy, beam 4 and 8, top-k, top-p 0.9 and
    temperature sampling; report the mean log-probability per token, distinct-1/2/3, repeated
    4-grams and an example of each, against the course's claim that beam search is bland and
    repetitive for open-ended text."""
    from attnlab.experiments.beam_blandness import QUICK, Settings, run

    changes: dict = {"seed": seed}
    if prompts is not None:
        changes["prompts"] = prompts
    settings = dataclasses.replace(QUICK if quick else Settings(), **changes)
    result = _run_on_text(run, settings, out, run_dir, quiet, as_json)
    if result is None:
        return
    click.echo(
        f"\n{result.model['run']}: {len(result.prompts)} held-out prompts of "
        f"{settings.prompt_tokens} tokens, {result.new_tokens} new tokens each\n"
    )
    click.echo(result.table())
    click.echo("")
    click.echo("\n".join(result.examples()))
    click.echo("")
    _claim_and_files(result, result.to_json()["claim"])


@experiment.command()
@click.option("--quick", is_flag=True, help="The quick preset's model (about 25 s to train) and 16 lines.")
@_run_option
@click.option(
    "--out", type=str, required=True, help="Folder for results.json, results.md and faithfulness.png."
)
@click.option("--lines", type=POSITIVE, default=None, help="Held-out lines (default 64; --quick 16).")
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.option("--json", "as_json", is_flag=True, help="Print results.json instead of the table.")
@usage_errors(names=lambda: _RUN)
def faithfulness(
    quick: bool, run_dir: str | None, out: str, lines: int | None, quiet: bool, as_json: bool
) -> None:
    """For held-out Shakespeare lines, rank the input positions by the attention the last position
    gives them (each layer, heads averaged), by occlusion (the token removed) and by gradient x
    input; report Spearman's rho per layer against the course's claim that attention weights are
    not faithful explanations."""
    from attnlab.experiments.faithfulness import CLAIM, QUICK, Settings, run

    settings = QUICK if quick else Settings()
    if lines is not None:
        settings = dataclasses.replace(settings, lines=lines)
    result = _run_on_text(run, settings, out, run_dir, quiet, as_json)
    if result is None:
        return
    click.echo(
        f"\n{result.model['run']}: {settings.lines} held-out lines of {result.model['context']} tokens; "
        "rho: mean (± sd) over lines\n"
    )
    click.echo(result.table())
    click.echo("")
    _claim_and_files(result, CLAIM)
