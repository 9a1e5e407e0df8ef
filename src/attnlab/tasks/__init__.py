"""Built-in generated tasks (no downloads): ``reverse``, ``copy``, ``sort`` and ``dates``.

>>> task = get_task("reverse", min_len=3, max_len=5, num_symbols=10)
>>> ex = task.sample("train", 2, seed=0)
>>> all(e.tgt == e.src[::-1] for e in ex)
True
"""

from __future__ import annotations

from typing import Any

from attnlab import names
from attnlab.tasks.base import SPLITS, Example, Task, split_of
from attnlab.tasks.tokenizer import BOS, EOS, PAD, SEP, UNK, CharTokenizer

# name -> task class, as attnlab.names lists them (what --help shows without torch)
TASKS: dict[str, type[Task]] = {name: names.load(path) for name, path in names.TASKS.items()}


def get_task(name: str, **kwargs: Any) -> Task:
    """Build the task ``name`` with its parameters (e.g. ``min_len``, ``max_len``, ``num_symbols``).

    Unknown names or parameters raise ``ValueError`` naming the choices."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose from {sorted(TASKS)}")
    try:
        return TASKS[name](**kwargs)
    except TypeError as exc:
        raise ValueError(f"task {name!r}: {exc}") from None


__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "SEP",
    "SPLITS",
    "TASKS",
    "UNK",
    "CharTokenizer",
    "Example",
    "Task",
    "get_task",
    "split_of",
]
