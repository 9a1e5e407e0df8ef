"""The trained text GPT that the language-model experiments (``decoding``, ``induction --text``,
``faithfulness``) study, and the held-out text they read.

The model is trained once and reused: ``--run DIR`` names a text run folder (written by
``attnlab train --text``); a folder that holds no run yet gets the preset trained into it first, so
the next experiment given the same ``--run`` starts at once. Without ``--run`` the run folder is
``OUT/model``, likewise reused when it already holds a finished run.

Held-out pieces start where a speech starts (right after a blank line, as ``HAMLET:`` does in a
play), evenly spaced over the held-out token file ``val.bin``: the same pieces every time for the
same run, and text the model has never trained on.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnlab.experiments.baselines import ngram_losses
from attnlab.models.load import load
from attnlab.tasks.token_stream import TokenStream
from attnlab.training.checkpoint import checkpoint_dir, verify
from attnlab.training.text_data import TRAIN, VAL, read_meta
from attnlab.training.text_presets import TEXT_PRESETS, train_text

SEARCH = 4096  # tokens looked through after an evenly spaced point for the next speech start


@dataclasses.dataclass
class TextModel:
    """A text run loaded for study: ``model`` (a GPT in eval mode), its ``tokenizer``
    (:class:`attnlab.tasks.tokenize.Tokenizer`), ``meta`` (the
    run's ``text.json``), ``folder``, ``val`` (the held-out ids ``[N]``, memory-mapped),
    ``val_loss`` (its last held-out loss, nats per token) and ``seconds`` its training loop took
    (from the run's history, also when it was trained before and is reused)."""

    model: Any
    tokenizer: Any
    meta: dict
    folder: Path
    val: np.ndarray
    val_loss: float | None
    seconds: float
    _ends: tuple | None = dataclasses.field(default=None, repr=False)

    @property
    def context(self) -> int:
        """The model's positions (``max_len``): the longest sequence it reads."""
        return int(self.model.config.max_len)

    def decode(self, ids) -> str:
        """Token ids (a list, array or 1-D tensor) -> text."""
        return self.tokenizer.decode([int(i) for i in ids])

    def describe(self) -> dict[str, Any]:
        """What the experiments print and write about the model."""
        c = self.model.config
        return {
            "run": str(self.folder),
            "source": self.meta["source"],
            "holdout": self.meta["holdout"],
            "tokenizer": self.meta["params"]["tokenizer"],
            "vocab_size": int(c.vocab_size),
            "layers": int(c.num_layers),
            "heads": int(c.num_heads),
            "d_model": int(c.d_model),
            "context": self.context,
            "params": sum(p.numel() for p in self.model.parameters()),
            "val_loss": None if self.val_loss is None else round(self.val_loss, 4),
            "trained_seconds": round(self.seconds, 1),
        }

    def baselines(self) -> dict[str, float]:
        """The n-gram tables' held-out losses (nats per token; add-one smoothing, counted on the run's
        ``train.bin``, scored on :attr:`val`: :func:`attnlab.experiments.baselines.ngram_losses`)."""
        train = TokenStream(self.folder / TRAIN, int(self.meta["vocab_size"])).ids
        return ngram_losses(train, self.val, int(self.model.config.vocab_size))

    def label(self) -> str:
        """One line: ``GPT 2 x 4 heads, width 128, char (80 ids), held-out loss 2.06``."""
        d = self.describe()
        loss = "" if d["val_loss"] is None else f", held-out loss {d['val_loss']:.2f} nats/token"
        return (
            f"GPT {d['layers']} layers x {d['heads']} heads, width {d['d_model']}, context {d['context']}, "
            f"{d['tokenizer']} tokens ({d['vocab_size']} ids){loss}"
        )

    def speech_starts(self, n: int, length: int) -> list[int]:
        """Up to ``n`` increasing offsets into :attr:`val`, each right after a blank line and followed
        by at least ``length`` tokens: the first such offset after each of ``n`` evenly spaced points
        (fewer when speeches are fewer; a ``ValueError`` when there is none)."""
        only_nl, ends_nl, ends_blank = self._line_ends()
        last = len(self.val) - length
        if last <= 2:
            raise ValueError(f"the held-out text has {len(self.val)} tokens, fewer than {length + 2}")
        found: list[int] = []
        for point in np.linspace(2, max(2, last - SEARCH), n).astype(np.int64):
            lo, hi = int(point), min(int(point) + SEARCH, last + 1)
            ids = np.asarray(self.val[lo - 2 : hi], dtype=np.int64)  # [hi - lo + 2]: from offset lo - 2
            # offset lo + j starts a speech when the text before it ends with a blank line
            blank = ends_blank[ids[1:-1]] | (only_nl[ids[1:-1]] & ends_nl[ids[:-2]])  # [hi - lo]
            hits = lo + np.flatnonzero(blank)
            hits = hits[hits > found[-1]] if found else hits
            if hits.size:
                found.append(int(hits[0]))
        if not found:
            raise ValueError("the held-out text has no blank line to start a piece at")
        return found

    def _line_ends(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Three ``[V]`` bool tables over the vocabulary: token v's text is a line break, ends with
        one, ends with two (a byte-level BPE token may hold several)."""
        if self._ends is None:
            texts = [self.tokenizer.decode([v]) for v in range(int(self.model.config.vocab_size))]
            self._ends = (
                np.array([t == "\n" for t in texts]),
                np.array([t.endswith("\n") for t in texts]),
                np.array([t.endswith("\n\n") for t in texts]),
            )
        return self._ends

    def pieces(self, starts: list[int], length: int) -> torch.Tensor:
        """The held-out ids ``[len(starts), length]`` from each start."""
        rows = [np.asarray(self.val[s : s + length], dtype=np.int64) for s in starts]
        return torch.from_numpy(np.stack(rows))


def text_model(
    run: str | Path | None,
    out: str | Path,
    preset: str,
    *,
    progress: bool = False,
    log=print,
) -> TextModel:
    """The text run to study: ``run`` (trained there with ``preset`` when it holds no run yet) or
    ``out/model`` (likewise). A ``run`` folder that holds something else is a ``ValueError``."""
    if preset not in TEXT_PRESETS:
        raise ValueError(f"preset must be one of {list(TEXT_PRESETS)}, got {preset!r}")
    folder = Path(out) / "model" if run is None else Path(run)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"run={folder} is not a folder")
    seconds = 0.0  # spent here, when the history has no clock
    if (folder / "text.json").is_file() and (folder / "latest.json").is_file():  # a text run
        log(f"using the text run in {folder} (trained before)")
    elif folder.is_dir() and (folder / "latest.json").is_file():
        raise ValueError(f"run={folder} holds a run that is not a GPT trained on text (no text.json)")
    else:
        log(f"training the {preset!r} preset on Shakespeare into {folder} (once; reused afterwards)")
        t0 = time.perf_counter()
        train_text(preset, folder, progress=progress)
        seconds = time.perf_counter() - t0
    meta = read_meta(folder)  # every token file checked against its sha256 (nothing is written)
    loaded = load(folder)  # the newest verified checkpoint, read where it is
    model, tokenizer = loaded.model, loaded.tokenizer
    history = verify(checkpoint_dir(folder)).get("history") or []
    losses = [r["val_loss"] for r in history if "val_loss" in r]
    val = TokenStream(folder / VAL, int(meta["vocab_size"])).ids
    seconds = training_seconds(history) or seconds  # the run's own record, also when it is reused
    return TextModel(model, tokenizer, meta, folder, val, losses[-1] if losses else None, seconds)


def training_seconds(history: list[dict]) -> float:
    """The seconds a run's training loop took, from its evaluations' ``elapsed_s`` (each counted from
    the start of its session: a resumed run's clock starts again, so each session's last reading is
    added). 0.0 when the history records none."""
    total, last = 0.0, 0.0
    for record in history:
        elapsed = record.get("elapsed_s")
        if not isinstance(elapsed, (int, float)):
            continue
        if elapsed < last:  # a new session began (the run was resumed)
            total += last
        last = float(elapsed)
    return total + last
