"""The names the command line offers as choices, where the registry that owns them imports torch or
matplotlib: tasks, trainable model kinds, RNN cells and scores, schedules, decoders, tokenizers,
number formats, file formats, the text presets. ``attnlab <command> --help`` lists them from here
without importing torch; the owning module imports its names from here (``attnlab.tasks.TASKS``
is built from :data:`TASKS`, ``attnlab.models.rnn.CELLS is CELLS``), so each list is written once.

Registries whose own module is light (:mod:`attnlab.nn.config`, :mod:`attnlab.audit.presets`,
:mod:`attnlab.devices`) stay where they are.
"""

from __future__ import annotations

import importlib
from typing import Any

from attnlab.nn.config import ATTENTION_KINDS

# task name -> "module:class" of the task (attnlab.tasks.TASKS holds the classes)
TASKS = {
    "reverse": "attnlab.tasks.symbols:Reverse",
    "copy": "attnlab.tasks.symbols:Copy",
    "sort": "attnlab.tasks.symbols:Sort",
    "dates": "attnlab.tasks.dates:Dates",
}
SPLITS = ("train", "validation", "test")  # attnlab.tasks.base
TEXT_TASK = "text"  # the task of a GPT trained on text (attnlab.training.text_data)
TEXT_TOKENIZERS = ("char", "bpe")  # attnlab.tasks.text_tokenizer

# the model kinds attnlab train builds: the families of attnlab.models.registry that name their
# training OPTIONS (the registry refuses to load if its classes say otherwise)
TRAINABLE = ("seq2seq-rnn", "attention-rnn", "transformer", "gpt")
# the model kinds the audits describe: the families of attnlab.models.registry that say how an
# audit's ModelSpec sizes them (from_audit; the registry refuses to load if its classes say otherwise)
AUDITED = ("transformer", "gpt", "bert")
CELLS = ("gru", "lstm")  # attnlab.models.rnn
RNN_ATTENTIONS = ("bahdanau", "luong-dot", "luong-general", "luong-concat")  # attnlab.models.rnn
DECODERS = ("greedy", "beam")  # attnlab.training.config
SCHEDULES = ("cosine", "noam", "constant")  # attnlab.training.schedule
MODEL_DTYPES = ("float32", "bfloat16", "int8")  # attnlab.models.precision
GENERATE_DTYPES = ("float32", "bfloat16")  # attnlab.decoding.text: the decode engine's matrix products

STREAM_FORMATS = ("lines", "jsonl")  # attnlab.embedding.stream: embed --output's formats
# attnlab.embedding.stream: sentences per part. MiniLM float32 on 2 busy cores (37 sentences/s): one
# part every ~14 s, all an interrupt can lose. 512 runs as fast as 4,096 (sorting by length inside a
# part still fills the batches: 54 s against 54 s for 2,000 lines); 256 ran 14% slower (62 s).
CHUNK_SIZE = 512
FIGURE_FORMATS = ("png", "svg")  # attnlab.viz.figures
CONVENTIONS = ("attnlab", "tl")  # attnlab.interp.detectors: induction key before the query, or j <= i
POINTS = ("resid_pre", "resid_mid", "resid_post")  # attnlab.interp.patching
TRAINED_POSITIONS = ("none", "sinusoidal", "learned", "rope", "alibi")  # attnlab.experiments.extrapolation

# attnlab train --text --preset NAME: the options each preset sets (attnlab.training.text_presets)
TEXT_PRESETS: dict[str, dict[str, Any]] = {
    "quick": {
        "model": "gpt",
        "tokenizer": "char",
        "layers": 2,
        "heads": 4,
        "d_model": 128,
        "context": 64,
        "batch": 16,
        "steps": 500,
        "lr": 3e-3,
        "warmup": 50,
        "weight_decay": 0.1,
        "dropout": 0.0,
        "eval_every": 250,
        "eval_size": 64,
    },
    "nanogpt": {
        "model": "gpt",
        "tokenizer": "char",
        "layers": 4,
        "heads": 4,
        "d_model": 128,
        "context": 64,
        "batch": 12,
        "steps": 2000,
        "lr": 1e-3,
        "warmup": 100,
        "weight_decay": 0.1,
        "clip": 1.0,
        "dropout": 0.0,
        "eval_every": 250,
        "eval_size": 240,
    },
}


def attention_choices() -> tuple[str, ...]:
    """What ``attnlab train --attention`` takes: the attention-rnn scores, then the gpt block kinds."""
    return RNN_ATTENTIONS + tuple(k for k in ATTENTION_KINDS if k not in RNN_ATTENTIONS)


def load(path: str) -> Any:
    """The object ``"module:name"`` names (a task class of :data:`TASKS`), imported now."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)
