"""``TrainConfig``: everything that decides a training run's result (frozen, validated)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from attnlab._checks import non_negative_float, positive_float, positive_int, probability
from attnlab.models.registry import TRAINABLE, model_class
from attnlab.names import DECODERS
from attnlab.names import TEXT_TASK as TEXT_TASK
from attnlab.training.schedule import SCHEDULES

MODEL_KINDS = TRAINABLE  # every family that names its training OPTIONS (attnlab.models.registry)
# fields that may change between a run and its resumption without changing the result's meaning
RESUMABLE_CHANGES = ("steps", "eval_every", "eval_size", "ckpt_every", "decode", "beam_size")


# upper bounds: 10^7 steps is days of training on a laptop; the rest bound memory (examples are kept)
LIMITS = {
    "steps": 10_000_000,
    "batch_size": 65_536,
    "train_size": 10_000_000,
    "eval_size": 1_000_000,
    "beam_size": 1_024,
    "warmup": 10_000_000,
    "eval_every": 10_000_000,
    "ckpt_every": 10_000_000,
}


@dataclass(frozen=True)
class TrainConfig:
    """One training run.

    Attributes:
        task, task_params: the built-in task and its parameters (``attnlab.tasks.get_task``).
        model, model_params: model kind (one of ``MODEL_KINDS``) and size options (the class's
            ``OPTIONS``, e.g. :attr:`attnlab.models.GPT.OPTIONS`).
        steps: optimisation steps in total; batch_size: global batch (all DDP ranks together).
        lr, schedule, warmup: peak learning rate, ``cosine``/``noam``/``constant``, warm-up steps.
        label_smoothing: epsilon_ls of the cross-entropy; clip: max global grad norm (0 = off);
        weight_decay: AdamW's decoupled weight decay.
        eval_every: evaluate on validation every N steps (0 = only at the end);
        eval_size: validation examples; decode: ``greedy`` or ``beam`` (``beam_size``).
        ckpt_every: checkpoint every N steps (0 = only at the end).
        train_size: examples in the fixed training set; seed: data, init, dropout seed.
    """

    task: str
    model: str
    steps: int
    task_params: dict[str, Any] = field(default_factory=dict)
    model_params: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 64
    lr: float = 1e-3
    schedule: str = "cosine"
    warmup: int = 50
    label_smoothing: float = 0.0
    clip: float = 1.0
    weight_decay: float = 0.01
    eval_every: int = 0
    eval_size: int = 200
    decode: str = "greedy"
    beam_size: int = 4
    ckpt_every: int = 0
    train_size: int = 10000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.model not in MODEL_KINDS:
            raise ValueError(f"unknown model {self.model!r}; choose from {list(MODEL_KINDS)}")
        for name in ("steps", "batch_size", "eval_size", "train_size", "beam_size"):
            positive_int(name, getattr(self, name))
        for name, most in LIMITS.items():  # past these a run cannot finish here: refused, not started
            if getattr(self, name) > most:
                raise ValueError(f"{name} must be at most {most:,}, got {getattr(self, name):,}")
        for name in ("warmup", "eval_every", "ckpt_every", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
        # non-finite values train to a NaN loss: refuse them (inf, nan) with the rest
        if positive_float("lr", self.lr) > 1e6:
            raise ValueError(f"lr must be at most 1e6 (larger steps overflow float32), got {self.lr!r}")
        probability("label_smoothing", self.label_smoothing)
        non_negative_float("clip", self.clip)
        non_negative_float("weight_decay", self.weight_decay)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {list(SCHEDULES)}, got {self.schedule!r}")
        if self.decode not in DECODERS:
            raise ValueError(f"decode must be one of {list(DECODERS)}, got {self.decode!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"TrainConfig has no field(s) {unknown}")
        return cls(**data)

    def replace(self, **changes: Any) -> TrainConfig:
        return dataclasses.replace(self, **changes)


def resume_conflicts(saved: TrainConfig, new: TrainConfig) -> list[str]:
    """Human-readable differences that make ``new`` unable to continue ``saved``."""
    out = []
    for f in dataclasses.fields(TrainConfig):
        if f.name in RESUMABLE_CHANGES:
            continue
        a, b = getattr(saved, f.name), getattr(new, f.name)
        if a != b:
            out.append(f"{f.name} {a!r} (checkpoint) vs {b!r} (requested)")
    return out


# train option -> where it goes: ("task", key) / ("model", key) / ("train", TrainConfig field)
OPTION_ROUTES = {
    "text_source": ("task", "source"),
    "tokenizer": ("task", "tokenizer"),
    "vocab_size": ("task", "vocab_size"),
    "context": ("task", "context"),
    "positions": ("model", "max_len"),
    "min_len": ("task", "min_len"),
    "max_len": ("task", "max_len"),
    "num_symbols": ("task", "num_symbols"),
    "d_model": ("model", "d_model"),
    "heads": ("model", "heads"),
    "d_ff": ("model", "d_ff"),
    "layers": ("model", "layers"),
    "hidden": ("model", "hidden"),
    "emb": ("model", "emb"),
    "cell": ("model", "cell"),
    "attention": ("model", "attention"),
    "window": ("model", "window"),
    "dropout": ("model", "dropout"),
    "steps": ("train", "steps"),
    "batch": ("train", "batch_size"),
    "lr": ("train", "lr"),
    "schedule": ("train", "schedule"),
    "warmup": ("train", "warmup"),
    "label_smoothing": ("train", "label_smoothing"),
    "clip": ("train", "clip"),
    "weight_decay": ("train", "weight_decay"),
    "eval_every": ("train", "eval_every"),
    "eval_size": ("train", "eval_size"),
    "decode": ("train", "decode"),
    "beam_size": ("train", "beam_size"),
    "ckpt_every": ("train", "ckpt_every"),
    "train_size": ("train", "train_size"),
    "seed": ("train", "seed"),
    "task": ("train", "task"),
    "model": ("train", "model"),
}


def model_options(model: str) -> set[str]:
    """The ``attnlab train`` options that set a parameter of ``model`` (those :data:`OPTION_ROUTES`
    sends to a key of the class's ``OPTIONS``)."""
    takes = model_class(model).OPTIONS or {}
    return {name for name, (where, key) in OPTION_ROUTES.items() if where == "model" and key in takes}


def config_from_options(opts: dict, given: set[str], base: TrainConfig | None = None) -> TrainConfig:
    """A :class:`TrainConfig` from ``attnlab train``'s options (``opts``: option name -> value; ``given``:
    the names the user set). Each option goes where :data:`OPTION_ROUTES` says: the task's
    parameters, the model's (only the ones :func:`model_options` gives for that model; setting
    another is an error) or a TrainConfig field. With ``base`` (resuming) only the given options
    override the checkpoint's values."""

    if base is None:
        if opts["task"] is None:
            raise ValueError("task= is required (e.g. task='reverse'), or text= for a GPT on text")
        model = opts["model"]
        fields = {"task": opts["task"], "model": model, "task_params": {}, "model_params": {}}
        for name, (where, key) in OPTION_ROUTES.items():
            value = opts[name]
            if where == "task" and value is not None:  # (a text run's --text, --context, ...)
                fields["task_params"][key] = value
            elif where == "model" and value is not None:
                if model not in MODEL_KINDS or name not in model_options(model):
                    if name in given:
                        raise ValueError(f"{name}= does not apply to model {model!r}")
                    continue
                fields["model_params"][key] = value
            elif where == "train":
                fields[key] = value
        return TrainConfig(**fields)
    fields = base.to_dict()
    for name, (where, key) in OPTION_ROUTES.items():
        if name not in given:
            continue
        if where == "task":
            fields["task_params"] = {**fields["task_params"], key: opts[name]}
        elif where == "model":
            fields["model_params"] = {**fields["model_params"], key: opts[name]}
        else:
            fields[key] = opts[name]
    return TrainConfig(**fields)
