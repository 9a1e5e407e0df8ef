"""The training loop: teacher forcing, AdamW, scheduled learning rate, label smoothing, gradient
clipping, periodic validation with decoding, atomic checkpoints, exact resumption, optional DDP.

Loss (teacher forcing): L = -(1/N) sum_{i,t} log p(y_t^i | y_<t^i, x^i), over the N non-PAD target
tokens of the batch, with label smoothing eps: the one-hot target becomes
(1 - eps) onehot + eps / V.

Reproducibility: parameters are initialised after ``torch.manual_seed(seed)``; before step ``s``
the generator is reseeded from ``(seed, s, rank)`` (dropout) and the batch is a function of
``(seed, s)`` (see :mod:`attnlab.training.data`). So weights after step ``s`` depend only on the
config and the state after step ``s - 1`` — the state a checkpoint holds — and a run killed and
resumed ends bit-for-bit where an uninterrupted run ends (on the same machine and thread count).

A text run (``config.task == "text"``, :mod:`attnlab.training.text_data`) goes through the same loop:
its batches are seeded windows of a token file, its evaluation the held-out loss and bits per
character instead of decoding.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import attnlab.training.rundir as rundir
from attnlab._checks import positive_int
from attnlab.devices import DEVICES, resolve_device, torch_threads
from attnlab.models.base import check_fits, count_parameters
from attnlab.models.registry import build_model, model_class
from attnlab.progress import progress as progress_bar
from attnlab.tasks import PAD, Task, get_task
from attnlab.tasks.text_source import STDIN
from attnlab.training.checkpoint import (
    latest_step,
    load_checkpoint_at,
    point_at,
    recover_pointer,
    restored_note,
    resume_folder,
    resume_point,
    save_checkpoint,
)
from attnlab.training.config import TrainConfig, resume_conflicts
from attnlab.training.data import TrainData, positions_needed
from attnlab.training.evaluate import evaluate_examples
from attnlab.training.gemm import onednn_linears, use_onednn
from attnlab.training.interrupt import TrainingInterrupted, stop_requests
from attnlab.training.ranks import lead_first
from attnlab.training.schedule import learning_rate
from attnlab.training.text_data import (
    TEXT_TASK,
    TextData,
    install_corpus,
    read_meta,
    stage_corpus,
    text_params,
)


@dataclass
class TrainResult:
    """What a run returns: the trained ``model`` (unwrapped, CPU), its ``history`` of metric
    records, the final ``step`` and the task (None for a text run: ``extra["text"]`` holds its
    ``text.json``)."""

    model: torch.nn.Module
    history: list[dict[str, Any]]
    step: int
    task: Task | None
    params: int
    resumed_from: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def step_seed(seed: int, step: int, rank: int) -> int:
    """The torch seed used for step ``step`` on ``rank`` (a hash of the three)."""
    return int(np.random.SeedSequence([seed, step, rank, 0x5EED]).generate_state(1)[0])


def batch_loss(
    model,
    batch: tuple[torch.Tensor, ...],
    decoder_only: bool,
    label_smoothing: float,
    ignore_index: int = PAD,
):
    """Cross-entropy over the targets that are not ``ignore_index`` (PAD for tasks; a text window
    has no padding) -> ``(loss, correct tokens, target tokens)``.

    Seq2seq batch ``(src [B, S], tgt_in [B, T], tgt_out [B, T])``; GPT batch ``(ids [B, L], labels
    [B, L])``."""
    if decoder_only:
        ids, target = batch
        logits = model(ids)  # [B, L, V]
    else:
        src, tgt_in, target = batch
        logits = model(src, tgt_in)  # [B, T, V]
    vocab = logits.shape[-1]
    loss = F.cross_entropy(
        logits.reshape(-1, vocab),
        target.reshape(-1),  # [B*T, V] vs [B*T]
        ignore_index=ignore_index,
        label_smoothing=label_smoothing,
    )
    mask = target != ignore_index
    correct = ((logits.argmax(-1) == target) & mask).sum()
    return loss, int(correct), int(mask.sum())


def prepare(config: TrainConfig) -> Task | None:
    """Build the task and check the model options (raises ``ValueError`` before any work); a text
    run has no task (None): its options are checked instead."""
    if config.task == TEXT_TASK:
        _check_text_options(config)
        return None
    task = get_task(config.task, **config.task_params)
    # the model's size, counted on the meta device: d_model 10^6 or max_len 10^9 is refused here
    _check_fits(config, task.tokenizer.vocab_size)
    _check_positions(config, task)
    if config.batch_size > config.train_size:
        raise ValueError(
            f"batch size {config.batch_size} is larger than the training set ({config.train_size} examples)"
        )
    return task


def _check_positions(config: TrainConfig, task: Task) -> None:
    """The task's longest sequence must fit the model's positions (``model_params.max_len``), said
    with the parameters' names before the run folder is touched (not as a tensor's length at the
    first step)."""
    cls = model_class(config.model)
    positions = cls.options(config.model_params).get("max_len")
    need = positions_needed(task, cls.DECODER_ONLY)
    if positions is None or need is None or need <= positions:
        return
    longest = task.params().get("max_len")
    what = f"task_params.max_len={longest}" if isinstance(longest, int) else f"task {task.name!r}"
    raise ValueError(
        f"{what} needs sequences of {need} tokens but the model has model_params.max_len={positions}; "
        f"raise model_params.max_len="
        + (" or lower task_params.max_len=" if isinstance(longest, int) else "")
    )


def _check_text_options(config: TrainConfig) -> None:
    """A text run trains a GPT (a decoder-only family) whose positions hold one context window."""
    if not model_class(config.model).DECODER_ONLY:
        raise ValueError(
            f"a text run trains a GPT (model=gpt); model {config.model!r} reads source/target pairs"
        )
    p = text_params(config.task_params)
    positions = model_class(config.model).options(config.model_params)["max_len"]
    if p["context"] > positions:
        raise ValueError(
            f"task_params.context={p['context']} is longer than the model's {positions} positions "
            f"(model_params.max_len=)"
        )
    _check_fits(config, p["vocab_size"] or 1024)  # a char vocabulary's size is not known yet


def _check_fits(config: TrainConfig, vocab_size: int) -> None:
    """Refuse model options no machine here can build (an unknown option, or a model too big)."""
    cls = model_class(config.model)
    check_fits(cls, cls.from_options(vocab_size, **cls.options(config.model_params)), "the model options")


def preflight(
    config: TrainConfig, out_dir: str | Path | None, resume: bool, overwrite: bool = False, log=None
):
    """Every check that must pass before training; returns the checkpoint to resume (or None).
    Raises ``ValueError`` naming the problem. Writes only inside an attnlab run folder (the marker,
    see :mod:`attnlab.training.rundir`): leftovers of killed writes removed, a missing pointer to a
    completed checkpoint restored, and with ``overwrite`` the old run cleared."""
    prepare(config)
    if out_dir is None:
        if resume:
            raise ValueError("resume=True needs out_dir=DIR")
        return None
    if resume and overwrite:
        raise ValueError("resume=True and overwrite=True contradict each other; choose one")
    out = rundir.check_out_path(out_dir)
    if resume:
        resume_folder(out)  # before claim() creates it: a mistyped --out is not a fresh run
    rundir.claim(out)  # refuses a folder holding someone else's files
    removed = rundir.clean_leftovers(out)
    if removed and log:
        log(f"removed {len(removed)} file(s) left by an interrupted write in {out}")
    if resume:
        return _resume_from(config, out, log)
    recovered = recover_pointer(out)
    if recovered is not None and log:
        log(f"{out}: the run was killed before its pointer was written; it now names step {recovered}")
    has_run = latest_step(out) is not None
    if overwrite and has_run:
        rundir.clear_run(out)
        has_run = False
    if has_run:
        raise ValueError(
            f"{out} already holds a checkpoint (step {latest_step(out)}); "
            f"pass resume=True to continue it, overwrite=True to replace it, or choose another out_dir="
        )
    return None


def _resume_from(config: TrainConfig, out: Path, log):
    """The checkpoint ``--resume`` continues (:func:`resume_point`: the newest that verifies when
    ``latest.json`` is missing or names a damaged one, said through ``log`` and the pointer
    repaired), checked against ``config``; None when the folder holds no checkpoint yet."""
    chosen = resume_point(out)
    if chosen is None:
        if log:
            log(f"{out} holds no completed checkpoint: starting from step 0")
        return None
    path, note = chosen
    ckpt = load_checkpoint_at(out, path)
    if ckpt.restored and note is None and log:  # damaged, not left stale by a kill (that note says)
        log(restored_note(out, path, ckpt.restored))
    conflicts = resume_conflicts(ckpt.config, config)
    if conflicts:
        raise ValueError(f"cannot resume {out}: " + "; ".join(conflicts))
    if note is not None:  # only now is the folder changed
        if log:
            log(note)
        point_at(out, path)
    return ckpt


def train(
    config: TrainConfig,
    out_dir: str | Path | None = None,
    *,
    resume: bool = False,
    progress: bool = True,
    rank: int = 0,
    world: int = 1,
    desc: str | None = None,
    threads: int | None = 1,
    until: int | None = None,
    overwrite: bool = False,
    log=None,
    device: str = "cpu",
) -> TrainResult:
    """Run (or resume) training; see the module doc. Only ``rank`` 0 writes or evaluates.

    ``threads``: torch intra-op threads while training (restored afterwards; None = leave as is).
    One thread is the default: these models are small, and on a busy 2-core machine extra threads
    spin against each other and can make a step ten times slower.
    ``until``: stop after this step as if interrupted (the schedule still runs to ``config.steps``).
    ``overwrite``: replace the run already in ``out_dir``. ``log``: where to say what was repaired.
    ``device``: where the model trains (``"cpu"``, ``"cuda"``; :func:`attnlab.devices.resolve_device`
    resolves ``"auto"``); checkpoints and the returned model are on the CPU.

    Raises ``ValueError`` (before writing anything) for a bad config, an unusable ``out_dir``
    or a checkpoint that cannot be resumed."""
    check_distributed(config, out_dir, world)
    device = _check_device(device)
    if threads is not None:
        positive_int("threads", threads)
    use_onednn()  # a bad ATTNLAB_TRAIN_GEMM is named before anything is written
    # the folder's lock, a text run's temporary folders, and the thread count (restored first)
    with contextlib.ExitStack() as held:
        with lead_first(rank, world):  # rank 0 prepares the folder; the others then read it
            ckpt, source = _prepare(config, out_dir, resume, overwrite, rank, log, held, progress)
        held.enter_context(torch_threads(threads))  # restored when the run ends, however it ends
        return _run(
            config,
            out_dir,
            ckpt,
            source,
            progress=progress,
            rank=rank,
            world=world,
            desc=desc,
            until=config.steps if until is None else min(until, config.steps),
            device=device,
        )


def _check_device(device) -> str:
    """``device`` as :func:`attnlab.devices.resolve_device` gives it (``auto``, ``cpu``, ``cuda``), or a
    device torch names (``cuda:1``); anything else is a ``ValueError`` naming the argument."""
    if device in DEVICES:
        return resolve_device(device)
    try:
        torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device must be one of {', '.join(DEVICES)} (or a torch device such as 'cuda:1'), got {device!r}"
        ) from None
    return device


def check_distributed(config: TrainConfig, out_dir, world: int) -> None:
    """A text run over ``world > 1`` processes needs a run folder (the ranks share its token files)
    and a file or Shakespeare (standard input reaches one process only)."""
    if config.task != TEXT_TASK or world <= 1:
        return
    if out_dir is None:
        raise ValueError("a text run over several processes needs out_dir=: they share its token files")
    if text_params(config.task_params)["source"] == STDIN:
        raise ValueError(
            "task_params.source=- (standard input) reaches one process only; "
            "give a file to train with several"
        )


def _prepare(
    config: TrainConfig, out_dir, resume: bool, overwrite: bool, rank: int, log, held, chatty: bool = True
):
    """``(checkpoint to resume or None, the run's data)``. Rank 0 of a fresh text run first reads and
    tokenizes the text into a staging folder (every check of the text before the run folder is
    touched), then takes the folder's lock (kept in ``held`` for the run), runs :func:`preflight`
    and moves the token files in. A text run without ``out_dir`` lives in a temporary folder.
    ``log`` hears every repair, and, when ``chatty`` (progress shown), what the text became."""
    lead, staged, folder = rank == 0, None, out_dir
    # the options first: a bad --context or --max-len is refused before any text is read or the run
    # folder is touched (the lock below creates it)
    prepare(config)
    if resume and out_dir is not None:
        resume_folder(rundir.check_out_path(out_dir))
    if config.task == TEXT_TASK:
        if lead and not _has_checkpoint(out_dir, resume):
            tmp = held.enter_context(rundir.staging_folder(_near(out_dir), log if lead else None))
            staged = (Path(tmp), stage_corpus(config.task_params, Path(tmp)))
        if out_dir is None:
            folder = held.enter_context(tempfile.TemporaryDirectory(prefix="attnlab-text-"))
    if out_dir is not None and lead:
        # one writer per folder, and the lock is taken before anything in the folder is touched
        out = rundir.check_out_path(out_dir)
        rundir.refuse_foreign(out)
        held.enter_context(rundir.writer_lock(out, "training run"))
    ckpt = preflight(config, out_dir, resume, overwrite, log=log if lead else None)
    return ckpt, _source(config, folder, staged, log if lead and chatty else None)


def _near(out_dir) -> str | None:
    """Where a text run stages its token files: the nearest existing folder above ``out_dir`` (the
    same file system, so moving them in is a rename), or the system's temporary folder."""
    if out_dir is None:
        return None
    parent = Path(out_dir).resolve().parent
    while not parent.is_dir():
        parent = parent.parent
    return str(parent)


def _has_checkpoint(out_dir, resume: bool) -> bool:
    """Whether this run continues a checkpoint (so the text is not read again)."""
    if out_dir is None or not resume:
        return False
    try:
        return latest_step(rundir.check_out_path(out_dir)) is not None
    except ValueError:
        return False  # preflight names the problem


class _TaskSource:
    """A built-in task's batches and evaluation (decoding the validation examples)."""

    ignore_index = PAD

    def __init__(self, config: TrainConfig):
        self.task = get_task(config.task, **config.task_params)
        self.config, self.vocab_size = config, self.task.tokenizer.vocab_size
        self.data, self.val = _data(config, self.task, model_class(config.model).DECODER_ONLY)

    def batch(self, step: int, rank: int, world: int):
        return self.data.batch(step, rank, world)

    def evaluate(self, model) -> dict[str, float]:
        c = self.config
        m = evaluate_examples(model, self.task, self.val, decode=c.decode, beam_size=c.beam_size)
        return {"val_token_acc": m["token_acc"], "val_exact": m["exact"]}

    def spec(self) -> dict[str, Any]:
        return self.task.spec()

    def line(self, step: int, record: dict[str, Any]) -> str:
        return (
            f"step {step}: loss {record['loss']:.4f}  val token acc {record['val_token_acc']:.3f}  "
            f"val exact {record['val_exact']:.3f}  ({record['tokens_per_s']:.0f} tokens/s)"
        )


def _source(config: TrainConfig, folder, staged, log=None):
    """The run's data: a task's examples, or a text run's token files (``staged``: ``(staging
    folder, metadata)`` when this rank has just written them, moved into ``folder`` now; else
    verified against ``text.json``; ``log`` hears what was written and what is held out)."""
    if config.task != TEXT_TASK:
        return _TaskSource(config)
    folder = Path(folder)
    if staged is not None:
        install_corpus(staged[0], folder, staged[1])
        meta = staged[1]
        if log:
            log(
                f"text: {meta['train_chars']:,} characters -> {meta['train_tokens']:,} training tokens "
                f"({meta['params']['tokenizer']}, {meta['vocab_size']} ids); for validation: "
                f"{meta['holdout']}"
            )
    meta = read_meta(folder)
    if meta["params"] != text_params(config.task_params):
        raise ValueError(f"{folder / 'text.json'} was written for other text options: {meta['params']}")
    return TextData(folder, meta, config.batch_size, config.seed, config.eval_size)


@dataclass
class _Loop:
    """What the loop carries from step to step (and a checkpoint saves): the model and its optimizer
    on ``device``, the metric ``history``, the window of the last 20 ``(loss, token acc)`` pairs."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    step: int
    history: list[dict[str, Any]]
    recent: list[tuple[float, float]]
    device: str
    onednn: bool = False  # the linear layers on oneDNN's GEMM (attnlab.training.gemm)


def _restore(config: TrainConfig, vocab_size: int, ckpt, device: str) -> _Loop:
    """A fresh model (seeded) and AdamW, or both as ``ckpt`` left them, on ``device``."""
    torch.manual_seed(config.seed)
    model = build_model(config.model, vocab_size, config.model_params)
    if ckpt is not None:
        model.load_state_dict(ckpt.model.state_dict())
    model.to(device)  # parameters keep their identity: the optimizer below holds the moved ones
    optimizer = make_optimizer(model, config)
    onednn = str(device) == "cpu" and use_onednn()
    if ckpt is None:
        return _Loop(model, optimizer, 0, [], [], device, onednn)
    optimizer.load_state_dict(ckpt.optimizer_state)  # its state follows the parameters' device
    torch.set_rng_state(ckpt.rng_state)
    recent = [tuple(r) for r in ckpt.recent]  # the loss window, so a resumed run reports the same
    return _Loop(model, optimizer, ckpt.step, ckpt.history, recent, device, onednn)


def make_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """AdamW (``config.lr``, ``config.weight_decay``) with PyTorch's fused kernel: one call updates
    every parameter (the default loops over them in Python, about ten operations each). The same
    update rule and state, so a checkpoint of either loads into the other."""
    kw = dict(lr=config.lr, weight_decay=config.weight_decay)
    try:
        return torch.optim.AdamW(model.parameters(), fused=True, **kw)
    except RuntimeError:  # pragma: no cover - a device or dtype without the fused kernel
        return torch.optim.AdamW(model.parameters(), **kw)


def _train_step(
    loop: _Loop,
    net,
    config: TrainConfig,
    batch,
    lr: float,
    decoder_only: bool,
    ignore_index: int = PAD,
    world: int = 1,
) -> int:
    """One optimisation step at learning rate ``lr`` on ``batch`` (tensors ``[B, ...]``); appends
    ``(loss, token accuracy)`` of the global batch to the loss window and returns its number of
    target tokens (under DDP the ranks' sums, so the recorded loss is the one process's at the same
    global batch, not rank 0's share of it)."""
    for g in loop.optimizer.param_groups:
        g["lr"] = lr
    batch = tuple(t.to(loop.device) for t in batch)
    with onednn_linears(loop.onednn):
        loss, correct, count = batch_loss(net, batch, decoder_only, config.label_smoothing, ignore_index)
    loop.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if config.clip > 0:
        torch.nn.utils.clip_grad_norm_(loop.model.parameters(), config.clip)
    loop.optimizer.step()
    loop.step += 1
    value = float(loss.detach())
    if world > 1:  # [nats summed, correct, tokens] over the ranks: one small all-reduce
        sums = torch.tensor([value * count, correct, count], dtype=torch.float64, device=loop.device)
        torch.distributed.all_reduce(sums)
        value, correct, count = float(sums[0] / sums[2].clamp(min=1)), int(sums[1]), int(sums[2])
    loop.recent = (loop.recent + [(value, correct / max(count, 1))])[-20:]
    return count


def _record(loop: _Loop, lr: float, tokens_seen: int, elapsed: float) -> dict[str, Any]:
    """The metrics of the step just taken: loss and token accuracy averaged over the window."""
    return {
        "step": loop.step,
        "lr": lr,
        "loss": float(np.mean([r[0] for r in loop.recent])),
        "train_token_acc": float(np.mean([r[1] for r in loop.recent])),
        "tokens_per_s": tokens_seen / elapsed if elapsed > 0 else 0.0,
    }


def _evaluate(loop: _Loop, source, record: dict, elapsed: float, bar, say: bool):
    """Evaluate on held-out data (decoded task examples, or a text's held-out loss), add the scores
    to ``record`` and keep it in the history; ``say``: print a progress line (not for the last
    step: the caller's summary is printed once)."""
    record.update(source.evaluate(loop.model), elapsed_s=elapsed)
    loop.history.append(record)
    if say:
        bar.write(source.line(loop.step, record))


def _checkpoint(loop: _Loop, config: TrainConfig, source, out_dir) -> None:
    """Save the loop's state as checkpoint ``loop.step`` in ``out_dir`` (atomically; see checkpoint)."""
    save_checkpoint(
        out_dir,
        model=loop.model,
        optimizer=loop.optimizer,
        step=loop.step,
        config=config,
        history=loop.history,
        task_spec=source.spec(),
        recent=loop.recent,
    )


def _data(config: TrainConfig, task: Task, decoder_only: bool):
    """``(training batches, validation examples)``, both fixed by ``config.seed``."""
    data = TrainData(
        task.sample("train", config.train_size, seed=config.seed),
        task.tokenizer,
        decoder_only=decoder_only,
        batch_size=config.batch_size,
        seed=config.seed,
    )
    return data, task.sample("validation", config.eval_size, seed=config.seed)


def _due(every: int, step: int, last: bool) -> bool:
    """Evaluation or checkpoint at ``step``: every ``every`` steps (0 = never) and at the last step."""
    return last or bool(every and step % every == 0)


def _run(
    config: TrainConfig,
    out_dir,
    ckpt,
    source,
    *,
    progress: bool,
    rank: int,
    world: int,
    desc: str | None,
    until: int,
    device: str = "cpu",
) -> TrainResult:
    loop = _restore(config, source.vocab_size, ckpt, device)
    n_params = count_parameters(loop.model)
    net = torch.nn.parallel.DistributedDataParallel(loop.model) if world > 1 else loop.model
    lead = rank == 0
    bar = progress_bar(
        total=config.steps,
        initial=loop.step,
        quiet=not (progress and lead),
        unit="step",
        desc=desc
        or f"train {config.model} on {_what(config)}" + (f" ({world} processes)" if world > 1 else ""),
    )
    loop.model.train()
    with stop_requests(world == 1) as stop_asked:
        _loop(
            loop,
            net,
            config,
            source,
            out_dir,
            bar,
            stop_asked,
            until=until,
            rank=rank,
            world=world,
            say=progress,
        )
    bar.close()
    model = loop.model.to("cpu").eval()
    extra = {"text": source.meta} if isinstance(source, TextData) else {}
    return TrainResult(
        model,
        loop.history,
        loop.step,
        getattr(source, "task", None),
        n_params,
        resumed_from=ckpt.step if ckpt else None,
        extra=extra,
    )


def _loop(
    loop: _Loop, net, config: TrainConfig, source, out_dir, bar, stop_asked, *, until, rank, world, say
):
    """Steps until ``until``; on a stop signal, after the step in progress, checkpoint (when the run has
    a folder) and raise :class:`TrainingInterrupted`."""
    lead = rank == 0
    decoder_only = model_class(config.model).DECODER_ONLY
    d_model = int(model_class(config.model).options(config.model_params).get("d_model", 512))
    t0, tokens_seen = time.perf_counter(), 0
    while loop.step < until:
        step = loop.step
        lr = learning_rate(
            step,
            schedule=config.schedule,
            lr=config.lr,
            warmup=config.warmup,
            total=config.steps,
            d_model=d_model,
        )
        torch.manual_seed(step_seed(config.seed, step, rank))  # seeds every device's generator
        batch = source.batch(step, rank, world)
        tokens_seen += _train_step(loop, net, config, batch, lr, decoder_only, source.ignore_index, world)
        elapsed = time.perf_counter() - t0
        record = _record(loop, lr, tokens_seen, elapsed)
        bar.update(1)
        bar.set_postfix(
            loss=f"{record['loss']:.3f}",
            acc=f"{record['train_token_acc']:.3f}",
            tok_s=f"{record['tokens_per_s']:.0f}",
        )
        last = loop.step in (config.steps, until)
        if lead and _due(config.eval_every, loop.step, last):
            _evaluate(loop, source, record, elapsed, bar, say=say and not last)
        saves = lead and out_dir is not None
        checkpointed = saves and _due(config.ckpt_every, loop.step, last)
        if checkpointed:
            _checkpoint(loop, config, source, out_dir)
        signum = stop_asked()
        if signum is not None and loop.step < until:
            if saves and not checkpointed:
                _checkpoint(loop, config, source, out_dir)
            bar.close()
            raise TrainingInterrupted(loop.step, config.steps, str(out_dir) if saves else None, signum)


def _what(config: TrainConfig) -> str:
    """What a run trains on, for the progress bar: the task, or the text's source."""
    if config.task == TEXT_TASK:
        source = str(config.task_params.get("source", "text"))
        return Path(source).name if source not in ("-", "shakespeare") else source
    return config.task
