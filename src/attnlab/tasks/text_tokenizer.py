"""Tokenizers for free text, both saved as a Hugging Face ``tokenizer.json`` (read back with
:func:`attnlab.tasks.tokenize.from_file` or ``tokenizers.Tokenizer.from_file``):

- ``char``: one id per character, ids in code-point order (a ``BPE`` model with no merges, so the
  ``tokenizers`` library reads it; decoding concatenates). A character outside the vocabulary is an
  error (:func:`unknown_characters`), never silently dropped.
- ``bpe``: byte-level BPE (GPT-2's scheme: bytes shown as printable characters, merges learnt
  from the training text) with ``vocab_size`` ids; any text encodes, nothing is unknown.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from attnlab.names import TEXT_TOKENIZERS as TEXT_TOKENIZERS

MIN_BPE_VOCAB = 257  # the 256 byte symbols and at least one merge


def char_tokenizer(text: str):
    """A character-level ``tokenizers.Tokenizer`` over the distinct characters of ``text``."""
    from tokenizers import Tokenizer, decoders, models

    chars = sorted(set(text))
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(chars)}, merges=[]))
    tok.decoder = decoders.Fuse()  # concatenate (the default decoder joins with spaces)
    return tok


def bpe_tokenizer(pieces: Iterable[str], vocab_size: int):
    """A byte-level BPE ``tokenizers.Tokenizer`` of ``vocab_size`` ids learnt from ``pieces``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < MIN_BPE_VOCAB:
        raise ValueError(
            f"vocab_size= must be at least {MIN_BPE_VOCAB} for byte-level BPE (256 bytes + merges), "
            f"got {vocab_size}"
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(pieces, trainer=trainer)
    return tok


def char_vocabulary(tokenizer) -> dict[str, int] | None:
    """``{character: id}`` of a character-level tokenizer (every token one character, no merges),
    else None."""
    import json

    model = json.loads(tokenizer.to_str())["model"]
    vocab = model.get("vocab") or {}
    if model.get("type") != "BPE" or model.get("merges") or any(len(t) != 1 for t in vocab):
        return None
    return dict(vocab)


def unknown_characters(text: str, vocab: dict[str, int]) -> list[str]:
    """The distinct characters of ``text`` that ``vocab`` lacks, in order of first appearance."""
    return list(dict.fromkeys(ch for ch in text if ch not in vocab))


def describe_characters(chars: list[str], most: int = 8) -> str:
    """``'é' (U+00E9), '\\t' (U+0009)`` for an error message."""
    shown = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in chars[:most])
    return shown + (f" and {len(chars) - most} more" if len(chars) > most else "")


def encode_chars(text: str, vocab: dict[str, int]) -> np.ndarray:
    """``text`` -> ids ``[len(text)]`` int64 through ``vocab`` (fast: one table lookup per code point);
    the same ids as the character tokenizer's ``encode``. Unknown characters raise ``ValueError``."""
    points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)  # [N] code points
    table = np.full(max(map(ord, vocab), default=0) + 1, -1, dtype=np.int64)
    for ch, i in vocab.items():
        table[ord(ch)] = i
    ids = np.where(points < table.shape[0], table[np.minimum(points, table.shape[0] - 1)], -1)  # [N]
    if (ids < 0).any():
        raise ValueError(
            f"characters outside the vocabulary: {describe_characters(unknown_characters(text, vocab))}"
        )
    return ids
