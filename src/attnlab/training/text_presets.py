"""Settings for ``attnlab train --text ... --preset NAME``: the options a preset sets (any option given
on the command line wins), and the same run from Python (:func:`text_config`, :func:`train_text`:
what experiments and the demo call). Both presets train a GPT on characters.

- ``quick``: small enough for ``make demo`` on a 2-core CPU (see docs/training.md for the measured
  time and held-out loss); its samples already have speakers and line breaks.
- ``nanogpt``: nanoGPT's documented CPU run of ``shakespeare_char`` (README, "I only have a
  MacBook"): 4 layers, 4 heads, width 128, context 64, batch 12, 2,000 steps, lr 1e-3 decaying to
  1e-4 over the run (our cosine ends at 10% of the peak too), 100 warm-up steps, weight decay 0.1,
  gradient clipping at 1.0, no dropout, 20 x 12 = 240 held-out windows per evaluation.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from attnlab.names import TEXT_PRESETS  # (the data: --help lists the names without torch)
from attnlab.training.config import OPTION_ROUTES, TEXT_TASK, TrainConfig, config_from_options
from attnlab.training.trainer import TrainResult, train


def complete_text_options(opts: dict[str, Any], given: set[str], base: TrainConfig | None = None) -> bool:
    """Complete ``attnlab train``'s options ``opts`` (option name -> value) and ``given`` (the names
    the caller set) for a text run, in place: ``text_source`` sets the task, a preset fills the
    options left out, the model defaults to gpt and its positions to the context. ``base``: the
    checkpoint a resumed run continues. Returns whether this is a text run; text options without a
    text (and a preset on a resume) are a ``ValueError``."""
    if base is not None and base.task != TEXT_TASK and "text_source" in given:
        raise ValueError(
            f"text_source= on a resumed run: this checkpoint trains on task {base.task!r}, and a task run "
            f"cannot switch to text (train a GPT on text in a new out_dir=)"
        )
    text_only = [n for n in ("tokenizer", "vocab_size", "context", "preset") if n in given]
    is_text = "text_source" in given or (base is not None and base.task == TEXT_TASK)
    if not is_text:
        if text_only:
            raise ValueError(f"{text_only[0]}= applies to a GPT on text (text_source=)")
        return False
    if "task" in given:
        raise ValueError("task= and text_source= choose what to train on: give one of them")
    if "text_source" in given and opts["text_source"] not in ("shakespeare", "-"):  # resumable from anywhere
        opts["text_source"] = str(Path(opts["text_source"]).expanduser().resolve())
    if base is not None:
        if "preset" in given:
            raise ValueError("preset= applies to a new run; a resumed run keeps its checkpoint's settings")
        return True
    opts["task"] = TEXT_TASK
    for name, value in TEXT_PRESETS.get(opts.get("preset"), {}).items():
        if name not in given:
            opts[name] = value
            given.add(name)
    if "model" not in given:
        opts["model"] = "gpt"
    if opts.get("positions") is None and opts["model"] == "gpt":
        opts["positions"] = opts.get("context") or 64
    return True


def text_config(preset: str | None = "quick", source: str = "shakespeare", **options: Any) -> TrainConfig:
    """The :class:`TrainConfig` that ``attnlab train --text SOURCE --preset PRESET`` builds, with
    ``options`` under ``attnlab train``'s option names (``steps=200``, ``d_model=64``, ``batch=8``,
    ``context=32``, ``tokenizer="bpe"``, ...; :data:`attnlab.training.config.OPTION_ROUTES`) in
    place of the command-line options. An unknown name or preset is a ``ValueError``."""
    if preset is not None and preset not in TEXT_PRESETS:
        raise ValueError(f"preset must be one of {list(TEXT_PRESETS)}, got {preset!r}")
    unknown = sorted(set(options) - set(OPTION_ROUTES) - {"text_source", "task"})
    if unknown:
        raise ValueError(f"unknown text-run option(s) {unknown}; see attnlab.training.config.OPTION_ROUTES")
    defaults = {
        f.name: f.default for f in dataclasses.fields(TrainConfig) if f.default is not dataclasses.MISSING
    }
    opts: dict[str, Any] = {
        name: defaults.get(key) if where == "train" else None for name, (where, key) in OPTION_ROUTES.items()
    }
    opts.update(options, text_source=source, preset=preset)
    given = set(options) | {"text_source"} | ({"preset"} if preset is not None else set())
    complete_text_options(opts, given)
    return config_from_options(opts, given)


def train_text(
    preset: str | None = "quick",
    out_dir: str | Path | None = None,
    *,
    source: str = "shakespeare",
    progress: bool = False,
    log=None,
    overwrite: bool = False,
    **options: Any,
) -> TrainResult:
    """Train a GPT on ``source`` (``"shakespeare"``, a UTF-8 file, ``"-"``) with ``preset`` and
    ``options`` (see :func:`text_config`) into the run folder ``out_dir`` (a temporary folder when
    None); what ``attnlab train --text`` runs. Returns the :class:`TrainResult` (``extra["text"]``:
    the run's ``text.json``)."""
    config = text_config(preset, source, **options)
    return train(config, out_dir, progress=progress, log=log, overwrite=overwrite)
