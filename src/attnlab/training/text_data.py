"""A text run's data: the corpus tokenized once into memory-mapped files in the run folder, the
seeded random windows training draws from them, and the held-out loss in nats per token and bits
per character.

Files written beside the checkpoints (:data:`FILES`)::

    DIR/tokenizer.json    the tokenizer (Hugging Face format; char or byte-level BPE)
    DIR/train.bin         training token ids, flat uint16/uint32 (attnlab.tasks.token_stream)
    DIR/val.bin           held-out token ids
    DIR/val-chars.bin     uint16: how many characters of the held-out text each val token completes
    DIR/text.json         source, split, tokenizer, counts and the sha256 of each file above

The text is read and tokenized piece by piece, never whole (a corpus larger than memory streams
through): into a staging folder first (:func:`stage_corpus`), so that a text that is empty, binary,
not UTF-8 or shorter than a context is refused before the run folder is touched, then moved into the
run folder (:func:`install_corpus`).

The batch at step ``s`` is ``batch_size`` windows whose starts are drawn by a generator seeded with
``(seed, s)``: a function of the step only, so a resumed run draws exactly the windows an
uninterrupted one would. Under DDP rank ``r`` of ``W`` takes rows ``r, r+W, ...``.

Held-out loss: ``n`` windows of ``context`` tokens, evenly spaced over ``val.bin`` (the same windows
at every evaluation, not overlapping when the text is long enough). With ``L`` the summed
cross-entropy (nats) over their predicted tokens and ``C`` the characters those tokens cover,
``val_loss = L / tokens`` and ``val_bpc = L / ln 2 / C`` (bits per character, comparable across
tokenizers: a BPE token covers about 2.3 characters of Shakespeare).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from attnlab._io import atomic_write_json, file_sha256
from attnlab.tasks.text_source import TextSource, open_source
from attnlab.tasks.text_tokenizer import (
    TEXT_TOKENIZERS,
    bpe_tokenizer,
    char_tokenizer,
    char_vocabulary,
    encode_chars,
)
from attnlab.tasks.token_stream import TokenStream, TokenWriter
from attnlab.training.config import TEXT_TASK
from attnlab.training.rundir import TEXT_FILES

FILES = TEXT_FILES  # the names rundir knows as a run folder's own (cleared by --overwrite)
TOKENIZER, TRAIN, VAL, VAL_CHARS, META = FILES
FORMAT = 1
EVAL_BATCH = 32  # windows per forward pass when measuring the held-out loss


def text_params(params: dict[str, Any]) -> dict[str, Any]:
    """A text run's ``task_params`` checked and completed: ``source``, ``tokenizer`` (char | bpe),
    ``vocab_size`` (bpe only; default 1024), ``context`` (tokens per window; default 64)."""
    unknown = sorted(set(params) - {"source", "tokenizer", "vocab_size", "context"})
    if unknown:
        raise ValueError(f"a text run has no option(s) {unknown}")
    out = {"tokenizer": "char", "vocab_size": None, "context": 64, **params}
    if not isinstance(out.get("source"), str) or not out["source"]:
        raise ValueError("a text run needs a source: source=shakespeare, a file, or - for stdin")
    if out["tokenizer"] not in TEXT_TOKENIZERS:
        raise ValueError(f"tokenizer= must be one of {list(TEXT_TOKENIZERS)}, got {out['tokenizer']!r}")
    if out["tokenizer"] == "char" and out["vocab_size"] is not None:
        raise ValueError("vocab_size= applies to tokenizer=bpe (a char vocabulary is the text's characters)")
    if out["tokenizer"] == "bpe" and out["vocab_size"] is None:
        out["vocab_size"] = 1024
    return out


def _encode(tokenizer, vocab: dict[str, int] | None, piece: str) -> tuple[np.ndarray, np.ndarray]:
    """``(ids [n], chars [n])`` of one piece of text: ids, and how many characters each token
    completes (a byte-level token that ends inside a character completes none; the one that ends
    it, one)."""
    if vocab is not None:  # character-level: a table lookup, one character per token
        ids = encode_chars(piece, vocab)
        return ids, np.ones_like(ids)
    enc = tokenizer.encode(piece)
    ends = np.array([e for _, e in enc.offsets], dtype=np.int64)  # [n] character end offsets
    if ends.size and ends.max() != len(piece):
        raise ValueError("the tokenizer's offsets do not cover the text")  # pragma: no cover
    return np.asarray(enc.ids, dtype=np.int64), np.diff(np.maximum.accumulate(ends), prepend=0)


def _tokenizer(source: TextSource, p: dict[str, Any]):
    """``(tokenizer, {char: id} or None)``: char, the characters of the whole text (as nanoGPT
    does); bpe, learnt from the training text only, read piece by piece."""
    if p["tokenizer"] == "char":
        tokenizer = char_tokenizer("".join(source.alphabet))
        return tokenizer, char_vocabulary(tokenizer)
    return bpe_tokenizer(source.train_pieces(), p["vocab_size"]), None


def stage_corpus(params: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Read ``params["source"]`` piece by piece (:func:`attnlab.tasks.text_source.open_source`; never
    whole), build the tokenizer and write the token files of :data:`FILES` (all but ``text.json``)
    into ``folder``, a staging folder that :func:`install_corpus` moves into the run folder. Returns
    the metadata for ``text.json``. Raises ``ValueError`` for a text that is empty, binary, not
    UTF-8, or whose training or held-out part holds fewer than ``context + 1`` tokens."""
    p, folder = text_params(params), Path(folder)
    source = open_source(p["source"], spool=folder)
    tokenizer, vocab = _tokenizer(source, p)
    vocab_size = tokenizer.get_vocab_size()
    with (
        TokenWriter(folder / TRAIN, vocab_size) as train,
        TokenWriter(folder / VAL, vocab_size) as val,
        TokenWriter(folder / VAL_CHARS, 2**16) as val_chars,
    ):
        for split, piece in source.parts():
            ids, chars = _encode(tokenizer, vocab, piece)
            (train if split == "train" else val).add(ids)
            if split == "val":
                val_chars.add(chars)  # a token covering more than 65,535 characters is refused here
    if source.path is not None and source.path.parent == folder:  # standard input's copy: done with
        source.path.unlink()
    for name, n in (("training", train.count), ("held-out", val.count)):
        if n < p["context"] + 1:
            raise ValueError(
                f"source={p['source']}: the {name} text is {n:,} tokens, shorter than one "
                f"context of {p['context']} + 1 (use a longer text or a smaller context=)"
            )
    tokenizer.save(str(folder / TOKENIZER))
    return {
        "format": FORMAT,
        "params": p,
        "source": source.source,
        "holdout": source.holdout,
        "vocab_size": vocab_size,
        "train_tokens": train.count,
        "val_tokens": val.count,
        "train_chars": source.train_chars,
        "val_chars": source.val_chars,
        "files": {name: file_sha256(folder / name) for name in (TOKENIZER, TRAIN, VAL, VAL_CHARS)},
    }


def install_corpus(staged: Path, out: Path, meta: dict[str, Any]) -> None:
    """Move the token files :func:`stage_corpus` wrote in ``staged`` into the run folder ``out`` (a
    rename on one file system, a copy across two) and write ``text.json`` last."""
    for name in (TOKENIZER, TRAIN, VAL, VAL_CHARS):
        shutil.move(str(Path(staged) / name), str(Path(out) / name))
    atomic_write_json(Path(out) / META, meta)


def read_meta(out: Path) -> dict[str, Any]:
    """``text.json`` of a text run folder, every file checked against its sha256 (``ValueError``)."""
    path = Path(out) / META
    try:
        meta = json.loads(path.read_text())
        files = meta["files"]
    except FileNotFoundError:
        raise ValueError(f"{out} is not a text run (no {META})") from None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise ValueError(f"{path} is corrupt") from None
    for name in (TOKENIZER, TRAIN, VAL, VAL_CHARS):
        f = Path(out) / name
        if not f.is_file() or file_sha256(f) != files.get(name):
            raise ValueError(f"{f} is missing or corrupt (sha256 mismatch with {META})")
    return meta


def window_starts(n_tokens: int, context: int, n: int) -> np.ndarray:
    """``min(n, (n_tokens - 1) // context)`` window starts ``[n']`` evenly spaced over a stream of
    ``n_tokens`` (at least one): each window reads ``context + 1`` tokens."""
    n = max(1, min(n, (n_tokens - 1) // context))
    return np.linspace(0, n_tokens - context - 1, n).round().astype(np.int64)


class TextData:
    """The token files of a text run folder, the seeded training windows and the held-out loss.

    Args:
        folder: the run folder holding :data:`FILES`.
        meta: its ``text.json`` (:func:`read_meta`).
        batch_size: global batch ``B``; seed: the run's seed; eval_windows: held-out windows.
    """

    ignore_index = -100  # every position of a window is a real token: nothing is ignored

    def __init__(self, folder: Path, meta: dict[str, Any], batch_size: int, seed: int, eval_windows: int):
        self.meta, self.batch_size, self.seed = meta, batch_size, seed
        self.context = int(meta["params"]["context"])
        self.vocab_size = int(meta["vocab_size"])
        self.train = TokenStream(Path(folder) / TRAIN, self.vocab_size)
        self.val = TokenStream(Path(folder) / VAL, self.vocab_size)
        self.val_chars = TokenStream(Path(folder) / VAL_CHARS, 2**16)
        self.starts = window_starts(len(self.val), self.context, eval_windows)  # [n]

    def batch(self, step: int, rank: int = 0, world: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's rows of the windows of ``step``: ``(x [B/W, C], y [B/W, C])``."""
        rng = np.random.default_rng([self.seed, step, 0x7E47])
        x, y = self.train.windows(self.batch_size, self.context, rng)  # [B, C] each
        return x[rank::world], y[rank::world]

    @torch.no_grad()
    def evaluate(self, model) -> dict[str, float]:
        """``{"val_loss", "val_bpc", "val_tokens", "val_chars"}`` over the held-out windows (the
        model in eval mode meanwhile: no dropout)."""
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        nats, tokens, chars = 0.0, 0, 0
        try:
            for lo in range(0, len(self.starts), EVAL_BATCH):
                starts = self.starts[lo : lo + EVAL_BATCH]
                rows = np.stack([self.val.ids[s : s + self.context + 1] for s in starts]).astype(np.int64)
                block = torch.from_numpy(rows).to(device)  # [b, C + 1]
                logits = model(block[:, :-1])  # [b, C, V]
                nats += float(
                    F.cross_entropy(logits.flatten(0, 1).float(), block[:, 1:].flatten(), reduction="sum")
                )
                tokens += block[:, 1:].numel()
                chars += int(
                    sum(
                        self.val_chars.ids[s + 1 : s + self.context + 1].astype(np.int64).sum()
                        for s in starts
                    )
                )
        finally:
            model.train(was_training)
        return {
            "val_loss": nats / tokens,
            "val_bpc": nats / math.log(2) / max(chars, 1),
            "val_tokens": tokens,
            "val_chars": chars,
        }

    def spec(self) -> dict[str, Any]:
        """What a checkpoint records as its task: the text run's parameters and source."""
        return {"name": TEXT_TASK, "params": self.meta["params"], "source": self.meta["source"]}

    def line(self, step: int, record: dict[str, Any]) -> str:
        """The progress line of an evaluation."""
        return (
            f"step {step}: loss {record['loss']:.4f}  val loss {record['val_loss']:.4f}  "
            f"({record['val_bpc']:.3f} bits/char, {record['tokens_per_s']:.0f} tokens/s)"
        )
