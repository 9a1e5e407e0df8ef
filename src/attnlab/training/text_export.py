"""A GPT trained on text (``attnlab train --text``) written out as a Hugging Face GPT-2 checkpoint
(``attnlab export RUN_DIR OUT_DIR``): the run's latest checkpoint and its ``tokenizer.json``,
through :func:`attnlab.models.hf.export.export_gpt2`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnlab.decoding.text import decoder_of
from attnlab.models.hf.export import export_gpt2, gpt2_config
from attnlab.models.load import Loaded, load
from attnlab.training.text_data import read_meta


def is_text_run(source: Loaded | str | Path) -> bool:
    """Whether ``source`` (a loaded model or a folder) is a run of a GPT trained on text (its folder
    holds ``text.json`` beside ``latest.json``)."""
    if isinstance(source, Loaded):
        return source.origin == "run" and source.text is not None
    return (Path(source) / "text.json").is_file() and (Path(source) / "latest.json").is_file()


def load_text_run(directory: str | Path):
    """``(model in eval mode, tokenizer, text.json)`` of a text run, every file verified
    (:func:`attnlab.models.load`); a folder that is not a text run is a ``ValueError``."""
    read_meta(Path(directory))  # a text run's own checks, with its messages
    loaded = load(directory)
    model, tokenizer = decoder_of(loaded)
    return model, tokenizer, loaded.text


def export_text_run(run_dir: str | Path, out_dir: str | Path, *, overwrite: bool = False) -> dict[str, Any]:
    """Export the text run in ``run_dir`` to ``out_dir`` -> ``{"run", "out", "files": {name: bytes},
    "config": config.json}``. A folder that is not a text run, or a model GPT-2 cannot express
    (RoPE, RMSNorm, GLU, no biases, a window, linear or SSM attention, GQA), is a ``ValueError``
    naming it, before anything is written."""
    run = Path(run_dir)
    if not is_text_run(run):
        if (run / "latest.json").is_file():
            raise ValueError(f"{run} is not a text run: only a GPT trained on text has a tokenizer to export")
        raise ValueError(f"{run} is not an attnlab run folder (no latest.json)")
    model, tokenizer, _ = load_text_run(run)
    config = gpt2_config(model.config)
    written = export_gpt2(model, tokenizer, out_dir, overwrite=overwrite)
    return {
        "run": str(run),
        "out": str(out_dir),
        "files": {p.name: p.stat().st_size for p in written},
        "config": config,
    }
