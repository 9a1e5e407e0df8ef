"""``attnlab train``, ``attnlab evaluate`` and ``attnlab translate``: train a model on a built-in
task or a GPT on text, score a trained model, and run it on your own input."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click
from click.core import ParameterSource

from attnlab._io import dumps_json
from attnlab.commands._errors import BadInput, command_flags, usage_errors
from attnlab.commands._types import (
    NON_NEGATIVE,
    POSITIVE,
    RATE,
    SEED,
    Positive,
    choice,
    decode_options,
    device_option,
)
from attnlab.devices import resolve_device
from attnlab.names import TEXT_TASK

_FROM_USER = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


@click.command()
@click.option(
    "--task",
    type=choice("attnlab.names:TASKS"),
    default=None,
    help="The built-in task to train on. Required (unless --resume, which reads it from --out, or --text).",
)
@click.option(
    "--text",
    "text_source",  # not "text": that name reads standard input as lines (commands._errors)
    type=str,
    default=None,
    help="Train a GPT on text instead: shakespeare (4 plays held out), a UTF-8 file or - for stdin "
    "(the last 10% held out).",
)
@click.option(
    "--preset",
    type=choice("attnlab.names:TEXT_PRESETS"),
    default=None,
    help="--text: a set of sizes and settings (quick: under a minute on a CPU; nanogpt: nanoGPT's CPU run). "
    "Options you give override it.",
)
@click.option(
    "--tokenizer",
    type=choice("attnlab.names:TEXT_TOKENIZERS"),
    default=None,
    help="--text: characters, or byte-level BPE learnt from the training text (default char).",
)
@click.option(
    "--vocab-size", type=POSITIVE, default=None, help="--tokenizer bpe: ids to learn (default 1024)."
)
@click.option(
    "--context", type=POSITIVE, default=None, help="--text: tokens per training window (default 64)."
)
@click.option(
    "--positions",
    type=POSITIVE,
    default=None,
    help="gpt, transformer: positions the model has (default: --context for text, 256 for tasks).",
)
@click.option(
    "--model",
    type=choice("attnlab.names:TRAINABLE"),
    default="transformer",
    show_default=True,
    help="The model to train (with --text: gpt).",
)
@click.option("--steps", type=POSITIVE, default=1000, show_default=True, help="Optimisation steps in total.")
@click.option("--batch", type=POSITIVE, default=64, show_default=True, help="Global batch size.")
@click.option("--lr", type=float, default=1e-3, show_default=True, help="Peak learning rate (noam: factor).")
@click.option(
    "--schedule",
    type=choice("attnlab.names:SCHEDULES"),
    default="cosine",
    show_default=True,
    help="Learning-rate schedule.",
)
@click.option("--warmup", type=NON_NEGATIVE, default=50, show_default=True, help="Warm-up steps.")
@click.option(
    "--label-smoothing", type=float, default=0.0, show_default=True, help="Label smoothing epsilon in [0, 1)."
)
@click.option("--clip", type=float, default=1.0, show_default=True, help="Max gradient norm (0 = off).")
@click.option("--weight-decay", type=float, default=0.01, show_default=True, help="AdamW weight decay.")
@click.option("--eval-every", type=NON_NEGATIVE, default=0, show_default=True, help="0 = only at the end.")
@click.option(
    "--eval-size",
    type=POSITIVE,
    default=200,
    show_default=True,
    help="Validation examples (--text: held-out windows of --context tokens).",
)
@decode_options("Decoding for evaluation.")
@click.option("--ckpt-every", type=NON_NEGATIVE, default=0, show_default=True, help="0 = only at the end.")
@click.option("--train-size", type=POSITIVE, default=10000, show_default=True, help="Training examples.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Random seed (data, init, dropout).")
@click.option("--min-len", type=POSITIVE, default=None, help="Task: shortest source.")
@click.option("--max-len", type=POSITIVE, default=None, help="Task: longest source.")
@click.option("--num-symbols", type=POSITIVE, default=None, help="Symbol tasks: alphabet size.")
@click.option("--d-model", type=POSITIVE, default=None, help="transformer/gpt width (default 64).")
@click.option("--heads", type=POSITIVE, default=None, help="transformer/gpt heads (default 4).")
@click.option("--d-ff", type=POSITIVE, default=None, help="transformer/gpt FFN width (default 4 d_model).")
@click.option("--layers", type=POSITIVE, default=None, help="Layers (default 2 transformer/gpt, 1 RNN).")
@click.option("--hidden", type=POSITIVE, default=None, help="RNN state width (default 64).")
@click.option("--emb", type=POSITIVE, default=None, help="RNN embedding width (default 32).")
@click.option("--cell", type=choice("attnlab.names:CELLS"), default=None, help="RNN cell (default gru).")
@click.option(
    "--attention",
    type=choice("attnlab.names:attention_choices"),
    default=None,
    help="attention-rnn: the score (default bahdanau); gpt: the block's attention kind (default sdpa).",
)
@click.option(
    "--window",
    type=POSITIVE,
    default=None,
    help="gpt: a causal sliding window of W tokens, the query included (needed by --attention block_sparse).",
)
@click.option("--dropout", type=RATE, default=None, help="Dropout rate in [0, 1) (default: the model's).")
@click.option(
    "--out",
    type=str,
    default=None,
    help="Checkpoint folder (default: runs/TASK-MODEL, numbered when it exists).",
)
@click.option("--resume", is_flag=True, help="Continue the checkpoint in --out.")
@click.option(
    "--overwrite", is_flag=True, help="Replace the run already in --out (an attnlab run folder only)."
)
@click.option("--nproc", type=POSITIVE, default=1, show_default=True, help="DDP processes (gloo on CPU).")
@device_option()
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print the final metrics as JSON.")
@click.pass_context
@usage_errors(names=lambda: _field_flags())
def train(
    ctx: click.Context,
    out: str | None,
    resume: bool,
    overwrite: bool,
    nproc: int,
    device: str,
    quiet: bool,
    as_json: bool,
    **opts,
) -> None:
    """Train a model on a built-in task (teacher forcing, AdamW, warm-up + cosine or Noam), or a GPT on
    text (--text: next-token loss, held-out loss per token and bits per character)."""
    from attnlab.training import checkpoint, distributed, ranks

    if nproc > 1 and device == "cuda":
        raise ValueError("--device cuda trains in one process; --nproc > 1 runs DDP over gloo on the CPU")
    device = resolve_device("cpu" if nproc > 1 else device)  # cuda asked for and absent: one line, exit 2
    if resume and out is None:
        raise ValueError("resume=True needs out=DIR")
    resumed, fallback = (
        checkpoint.load_resumable(out) if resume else (None, None)
    )  # the checkpoint the run continues
    if resumed is not None and resumed.restored and fallback is None:  # (after a fallback it is stale)
        click.echo(
            checkpoint.restored_note(out, resumed.path, resumed.restored), err=True
        )  # even with --quiet
    base = resumed.config if resumed is not None else None
    from attnlab.training.config import config_from_options

    given = {name for name in opts if ctx.get_parameter_source(name) in _FROM_USER}
    _text_options(opts, given, base)
    config = config_from_options(opts, given, base)
    _check_heads(config)
    # torchrun sets WORLD_SIZE/RANK; the group is left when the command ends (click closes the resource)
    rank, world = (0, 1) if nproc > 1 else ctx.with_resource(distributed.group_from_env())
    chosen_out = out is None
    if chosen_out:  # named in the last line: never thrown away; under torchrun rank 0's choice
        out = ranks.same_everywhere(
            _default_out(_source_name(config), config.model) if rank == 0 else None, world
        )
    if nproc < 1:
        raise ValueError(f"--nproc must be a positive integer, got {nproc}")
    log = lambda line: click.echo(line, err=True)  # noqa: E731 (repairs are said even with --quiet)
    with _resume_line():
        history, step = _run(config, out, resume, overwrite, nproc, quiet, rank, world, device, log)
    if rank != 0:
        return
    _warn_nothing_trained(resumed, config.steps)
    summarise = _text_summary if config.task == TEXT_TASK else _task_summary
    summarise(config, step, out, history, chosen_out, as_json)


@contextlib.contextmanager
def _resume_line():
    """A run stopped by Ctrl-C (:class:`attnlab.training.interrupt.TrainingInterrupted`) says how to
    continue it as a command line, not a Python call."""
    try:
        yield
    except KeyboardInterrupt as stop:
        if hasattr(stop, "resume_with"):
            stop.resume_with = f"attnlab train --resume --out {stop.saved}"
        raise


def _run(config, out, resume, overwrite, nproc, quiet, rank, world, device, log) -> tuple[list[dict], int]:
    """Train (in ``nproc`` processes, or this one as ``rank`` of ``world``); the history and step."""
    from attnlab.training import checkpoint, distributed, trainer

    if nproc > 1:
        distributed.train_distributed(config, out, nproc=nproc, resume=resume, progress=not quiet, log=log)
        _, state = checkpoint.load_trained(out)
        return state["history"], state["step"]
    result = trainer.train(
        config,
        out,
        resume=resume,
        overwrite=overwrite,
        progress=not quiet and rank == 0,
        rank=rank,
        world=world,
        log=log,
        device=device,
    )
    return result.history, result.step


def _field_flags() -> dict[str, str]:
    """The library's names for what ``train``'s options set -> the option: a TrainConfig field
    (``batch_size`` -> ``--batch``; its error ``lr must be ...`` -> ``--lr must be ...``), a task or
    model parameter (``model_params.max_len`` -> ``--positions``) and ``out_dir`` -> ``--out``."""
    from attnlab.training.config import OPTION_ROUTES

    options = command_flags()  # (text_source -> --text)
    flags = {"out_dir": "--out", "source": options["text_source"]}
    for name, (where, key) in OPTION_ROUTES.items():
        flags[key if where == "train" else f"{where}_params.{key}"] = options[name]
    return flags


def _warn_nothing_trained(resumed, steps: int) -> None:
    """A resume from a checkpoint already at (or past) ``--steps`` trains nothing: said, whatever
    ``--nproc`` (the run still ends with its summary)."""
    if resumed is not None and resumed.step >= steps:
        click.echo(
            f"Warning: nothing trained: the checkpoint is at step {resumed.step} and --steps is "
            f"{steps}; give a larger --steps to train on",
            err=True,
        )


def _check_heads(config) -> None:
    """``--d-model`` must split evenly over ``--heads``: said with the flags' names, before anything runs."""
    from attnlab.models.registry import model_class

    sizes = model_class(config.model).options(config.model_params)
    d, h = sizes.get("d_model"), sizes.get("heads")
    if isinstance(d, int) and isinstance(h, int) and h > 0 and d % h:
        raise BadInput(
            f"--d-model {d} is not divisible by --heads {h} (each head takes d_model / heads dimensions)"
        )


def _task_summary(config, step: int, out, history: list[dict], chosen_out: bool, as_json: bool) -> None:
    """The last lines of a task run: validation token and exact-sequence accuracy."""
    final = history[-1] if history else {}
    summary = {
        "task": config.task,
        "model": config.model,
        "step": step,
        "out": out,
        "val_token_acc": final.get("val_token_acc"),
        "val_exact": final.get("val_exact"),
        "loss": final.get("loss"),
    }
    if as_json:
        click.echo(dumps_json(summary, indent=2))
        return
    if final:
        click.echo(
            f"{config.model} on {config.task}: step {step}, loss {final['loss']:.4f}, "
            f"validation token accuracy {final['val_token_acc']:.3f}, exact {final['val_exact']:.3f}"
        )
    _saved(out, chosen_out, f"load with attnlab.models.load({out!r})")


def _source_name(config) -> str:
    """``reverse``, ``shakespeare``, ``notes`` (a file's stem): the default run folder's first word."""
    if config.task != TEXT_TASK:
        return config.task
    source = config.task_params["source"]
    return "stdin" if source == "-" else Path(source).stem


def _text_options(opts: dict, given: set[str], base) -> None:
    """Complete ``opts``/``given`` for a text run (``--text`` sets the task, a preset fills the options
    the user left out: :func:`attnlab.training.text_presets.complete_text_options`)."""
    from attnlab.training.text_presets import complete_text_options

    complete_text_options(opts, given, base)


def _text_summary(config, step: int, out, history: list[dict], chosen_out: bool, as_json: bool) -> None:
    """The last lines of a text run: held-out loss per token and bits per character."""
    from attnlab.training.text_data import read_meta

    meta = read_meta(Path(out))
    final = history[-1] if history else {}
    summary = {
        "task": TEXT_TASK,
        "source": meta["source"],
        "holdout": meta["holdout"],
        "tokenizer": meta["params"]["tokenizer"],
        "vocab_size": meta["vocab_size"],
        "model": config.model,
        "step": step,
        "out": out,
        "loss": final.get("loss"),
        "val_loss": final.get("val_loss"),
        "val_bits_per_char": final.get("val_bpc"),
        "val_tokens": final.get("val_tokens"),
        "val_chars": final.get("val_chars"),
        "evaluations": [
            {k: r[k] for k in ("step", "loss", "val_loss", "val_bpc")} for r in history if "val_loss" in r
        ],
    }
    if as_json:
        click.echo(dumps_json(summary, indent=2))
        return
    if final:
        click.echo(
            f"{config.model} on {Path(meta['source']).name} ({summary['tokenizer']}, {meta['vocab_size']} "
            f"tokens): step {step}, loss {final['loss']:.4f}, held-out loss {final['val_loss']:.4f} per "
            f"token, {final['val_bpc']:.3f} bits/char; {meta['holdout']}"
        )
    _saved(out, chosen_out, f"continue text with: attnlab generate {out} PROMPT")


def _saved(out, chosen_out: bool, then: str) -> None:
    """The run's last line: where its checkpoint is (said even when no --out was given) and what next."""
    where = " (no --out given: saved in this default folder)" if chosen_out else ""
    click.echo(f"checkpoint: {Path(out) / 'latest.json'}{where}; {then}")


def _default_out(task: str | None, model: str | None) -> str:
    """``runs/<task>-<model>``, then ``-2``, ``-3``, ... when that folder exists: never thrown away."""
    base = Path("runs") / f"{task or 'run'}-{model or 'model'}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return str(candidate)


def _task_run(directory: str, device):
    """What :func:`attnlab.models.load` reads in ``directory``, which must be a run on a task."""
    from attnlab.models import load

    loaded = load(directory, device=device)
    if loaded.origin == "run" and loaded.text is not None:
        raise ValueError("this run trained a GPT on text: continue text with attnlab generate DIR PROMPT")
    if loaded.task is None:
        raise ValueError(
            f"{directory} is not a run of attnlab train on a task (it holds a {loaded.origin} model)"
        )
    return loaded


def _lines(value: str) -> list[str]:
    """A TEXT of translate: a file's non-empty lines (a folder is refused), else the text itself."""
    from attnlab.commands._text import path_kind, text_or_file

    if path_kind(value) is None:
        return [value]
    return [line for line in text_or_file(value, "TEXT").splitlines() if line.strip()]


def _task_of(spec: dict, min_len: int | None, max_len: int | None):
    from attnlab.tasks import get_task

    params = dict(spec.get("params", {}))
    if min_len is not None:
        params["min_len"] = min_len
    if max_len is not None:
        params["max_len"] = max_len
    return get_task(spec["name"], **params)


def _check_positions(directory: str, model, task) -> None:
    """The task's longest sequence (a larger --max-len) must fit the model's positions: said with
    the options' names, not as a tensor's length inside the model."""
    from attnlab.training.data import positions_needed
    from attnlab.training.evaluate import model_positions

    positions = model_positions(model)
    need = positions_needed(task, bool(getattr(model, "DECODER_ONLY", False)))
    if positions is not None and need is not None and need > positions:
        longest = task.params().get("max_len")
        what = f"--max-len {longest}" if isinstance(longest, int) else f"task {task.name!r}"
        raise BadInput(
            f"{what} needs sequences of {need} tokens but the model in {directory} has {positions} "
            f"positions (its --positions); lower --max-len"
        )


@click.command()
@click.argument("directory", type=str)
@click.option(
    "--task",
    type=choice("attnlab.names:TASKS"),
    default=None,
    help="Must match the checkpoint's task (default: it).",
)
@click.option(
    "--split",
    type=choice("attnlab.names:SPLITS"),
    default="test",
    show_default=True,
    help="Which examples to score.",
)
@click.option("--n", "n", type=Positive(1_000_000), default=500, show_default=True, help="Examples to score.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Random seed of the examples.")
@click.option("--min-len", type=POSITIVE, default=None, help="Override the task's shortest source.")
@click.option("--max-len", type=POSITIVE, default=None, help="Override the task's longest source.")
@decode_options()
@device_option()
@click.option("--json", "as_json", is_flag=True, help="Print the scores as JSON.")
@usage_errors(names=lambda: {"resume": "attnlab train --resume"})
def evaluate(
    directory: str,
    task: str | None,
    split: str,
    n: int,
    seed: int,
    min_len: int | None,
    max_len: int | None,
    decode: str,
    beam_size: int,
    device: str,
    as_json: bool,
) -> None:
    """Score the model trained in DIRECTORY: token and exact-sequence accuracy, by source length."""
    from attnlab.training.checkpoint import restore_top_level
    from attnlab.training.evaluate import predict, score

    device = resolve_device(device)  # before loading: cuda asked for and absent is one line, exit 2
    loaded = _task_run(directory, device)
    note = restore_top_level(directory)  # the top-level copy, verified as the checkpoint was
    if note is not None:
        click.echo(f"note: {note}", err=True)
    model = loaded.model
    if task is not None and task != loaded.task["name"]:
        raise ValueError(f"{directory} was trained on task {loaded.task['name']!r}, not {task!r}")
    t = _task_of(loaded.task, min_len, max_len)
    _check_positions(directory, model, t)
    examples = t.sample(split, n, seed=seed)
    preds = predict(model, t, [e.src for e in examples], decode=decode, beam_size=beam_size)
    total = score(preds, [e.tgt for e in examples])
    by_len: dict[int, list[int]] = {}
    for i, e in enumerate(examples):
        by_len.setdefault(len(e.src), []).append(i)
    rows = [
        {"src_len": k, **score([preds[i] for i in v], [examples[i].tgt for i in v])}
        for k, v in sorted(by_len.items())
    ]
    if as_json:
        click.echo(
            dumps_json({"task": t.spec(), "split": split, "overall": total, "by_length": rows}, indent=2)
        )
        return
    click.echo(
        f"{loaded.kind} on {t.name} ({split}, {n} examples, {decode}): "
        f"token accuracy {total['token_acc']:.3f}, exact {total['exact']:.3f}"
    )
    click.echo(f"{'src len':>7}  {'n':>5}  {'token acc':>9}  {'exact':>6}")
    for r in rows:
        click.echo(f"{r['src_len']:>7}  {r['n']:>5}  {r['token_acc']:>9.3f}  {r['exact']:>6.3f}")


@click.command()
@click.argument("directory", type=str)
@click.argument("text", nargs=-1, required=True)
@decode_options()
@device_option()
@click.option("--json", "as_json", is_flag=True, help="Print the outputs as JSON.")
@usage_errors
def translate(
    directory: str, text: tuple[str, ...], decode: str, beam_size: int, device: str, as_json: bool
) -> None:
    """Run the model trained in DIRECTORY on TEXT (one or more inputs; a FILE gives one input per
    non-empty line, - standard input's lines)."""
    from attnlab.training.evaluate import predict

    device = resolve_device(device)
    loaded = _task_run(directory, device)
    model = loaded.model
    t = _task_of(loaded.task, None, None)
    text = tuple(line for s in text for line in _lines(s))
    for s in text:
        t.tokenizer.check_text(s, t.name)
    if any(not s for s in text):
        raise ValueError("text must not be empty")
    longest = t.params().get("max_len")
    longer = [s for s in text if longest is not None and len(s) > longest]
    if longer:
        click.echo(
            f"Warning: {len(longer)} of {len(text)} inputs are longer than the {t.params()['min_len']} to "
            f"{longest} symbols trained on; the model has not learned such lengths",
            err=True,
        )
    preds = predict(model, t, list(text), decode=decode, beam_size=beam_size)
    if as_json:
        click.echo(dumps_json([{"src": s, "out": p} for s, p in zip(text, preds)], indent=2))
        return
    for s, p in zip(text, preds):
        click.echo(f"{s}  ->  {p}")
