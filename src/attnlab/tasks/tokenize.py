"""One tokenizer interface for every model attnlab loads: task alphabets, character and byte-level
BPE text runs, and Hugging Face ``tokenizer.json`` files (GPT-2, Llama, BERT, MiniLM).

Every tokenizer answers the same calls:

- ``encode(text) -> list[int]`` and ``decode(ids) -> str``;
- ``tok(texts) -> {"input_ids": [B, T], "attention_mask": [B, T]}``: a batch, right-padded with
  ``pad_id`` (the call people know from ``transformers``);
- ``tokens(ids) -> list[str]``: each id as display text; ``offsets(text) -> [(start, end), ...]``:
  the characters of ``text`` each id stands for;
- ``unknown(text) -> list[str]``: the characters the tokenizer cannot represent. ``encode`` maps
  them to ``<unk>`` (or, for a vocabulary without one, drops them) and warns once, naming every
  such character; with ``strict=True`` it refuses them with a ``ValueError`` instead.

:func:`wrap` turns a ``tokenizers.Tokenizer`` into one; :class:`~attnlab.tasks.CharTokenizer`
(the task alphabets) subclasses :class:`Tokenizer` directly.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from attnlab._io import read_json
from attnlab.tasks.text_tokenizer import char_vocabulary, describe_characters, unknown_characters


class UnknownCharacterWarning(UserWarning):
    """Text held characters the tokenizer maps to ``<unk>`` or drops."""


class Tokenizer:
    """The interface (see the module doc). Subclasses implement ``_encode``, ``decode``, ``token``
    and ``vocab_size``, and set ``pad_id``, ``unk_id`` (None: no unknown token) and ``eos_id``
    (None: no end-of-sequence token declared)."""

    pad_id: int = 0
    unk_id: int | None = None
    eos_id: int | None = None  # the end-of-sequence token it declares (None: none)
    refuses_unknown: bool = False  # a vocabulary that would drop characters refuses them instead

    # --------------------------------------------------------------------------- what subclasses give
    def _encode(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """``(ids, offsets)``: offsets ``(start, end)`` of the characters each id stands for."""
        raise NotImplementedError

    def decode(self, ids: Iterable[int]) -> str:
        raise NotImplementedError

    def token(self, i: int) -> str:
        """Display text of one id."""
        raise NotImplementedError

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    # --------------------------------------------------------------------------- the shared calls
    def encode(self, text: str, *, strict: bool | None = None) -> list[int]:
        """``text`` -> ids. Characters the tokenizer cannot represent: one ``UnknownCharacterWarning``
        naming each of them; with ``strict=True`` a ``ValueError`` instead. ``strict=None`` (the
        default) is the tokenizer's own choice: a character vocabulary refuses (``refuses_unknown``);
        ``strict=False`` warns even there (a caller that shows what was dropped)."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        ids, offsets = self._encode(text)
        unk, dropped = self._lost(text, ids, offsets)
        if unk or dropped:
            if strict or (strict is None and self.refuses_unknown):
                raise ValueError(describe_unknown(unk + dropped))
            said = [f"{describe_unknown(unk)}; encoded as {self.token(self.unk_id)}"] if unk else []
            said += [f"{describe_unknown(dropped)}; encoded as nothing (dropped)"] if dropped else []
            warnings.warn("; ".join(said), UnknownCharacterWarning, stacklevel=2)
        return ids

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` character offsets into ``text`` of each id ``encode`` gives (special tokens
        that stand for no text have ``(0, 0)``)."""
        return self._encode(text)[1]

    def tokens(self, ids: Iterable[int]) -> list[str]:
        """Each id as display text."""
        return [self.token(int(i)) for i in ids]

    def unknown(self, text: str) -> list[str]:
        """The distinct characters of ``text`` the tokenizer cannot represent, in order of appearance;
        where one unknown token stands for several characters (WordPiece turns a whole word into
        ``[UNK]`` when one piece of it is missing), that word, as one item."""
        ids, offsets = self._encode(text)
        return self._unknown(text, ids, offsets)

    def _unknown(self, text: str, ids: list[int], offsets: list[tuple[int, int]]) -> list[str]:
        unk, dropped = self._lost(text, ids, offsets)
        return list(dict.fromkeys(unk + dropped))

    def _lost(self, text: str, ids: list[int], offsets: list[tuple[int, int]]) -> tuple[list[str], list[str]]:
        """``(unk, dropped)``: what became the unknown token (characters, or words WordPiece could not
        spell, whole) and the characters no id stands for (a normaliser removed them: a combining
        accent, a zero-width space), each distinct, in order of appearance."""
        covered = [False] * len(text)
        unk: list[str] = []
        for i, (start, end) in zip(ids, offsets):
            for p in range(start, min(end, len(text))):
                covered[p] = True
            if self.unk_id is not None and i == self.unk_id:
                span = text[start:end].strip()
                unk.extend([span] if len(span) > 1 else span)  # a word WordPiece could not spell, whole
        # a character no id covers was dropped (whitespace is dropped by design in many vocabularies)
        dropped = [ch for ch, c in zip(text, covered) if not c and not ch.isspace()]
        unk = list(dict.fromkeys(unk))
        return unk, [ch for ch in dict.fromkeys(dropped) if ch not in unk]

    def __call__(
        self, texts: str | Sequence[str], *, strict: bool | None = None, max_length: int | None = None
    ) -> dict[str, torch.Tensor]:
        """A batch: ``{"input_ids": [B, T] long, "attention_mask": [B, T] long}``, right-padded with
        ``pad_id`` to the longest; with ``max_length`` longer texts are refused (never cut silently)."""
        if isinstance(texts, str):
            texts = [texts]
        rows = [self.encode(t, strict=strict) for t in texts]
        if not rows:
            raise ValueError("texts is empty: nothing to tokenize")
        T = max(len(r) for r in rows)
        if max_length is not None and T > max_length:
            n = sum(len(r) > max_length for r in rows)
            raise ValueError(f"{n} text(s) have more than max_length={max_length} tokens (longest {T})")
        ids = torch.full((len(rows), T), self.pad_id, dtype=torch.long)  # [B, T]
        mask = torch.zeros((len(rows), T), dtype=torch.long)  # [B, T]
        for b, r in enumerate(rows):
            ids[b, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[b, : len(r)] = 1
        return {"input_ids": ids, "attention_mask": mask}


def describe_unknown(missing: list[str]) -> str:
    """What a tokenizer could not represent, for a warning: the characters with their code points,
    then the words that became one unknown token whole (``missing``: :meth:`Tokenizer.unknown`)."""
    chars = [m for m in missing if len(m) == 1]
    words = [m for m in missing if len(m) > 1]
    said = [f"characters the tokenizer cannot represent: {describe_characters(chars)}"] if chars else []
    if words:
        shown = ", ".join(repr(w) for w in words[:8]) + (
            f" and {len(words) - 8} more" if len(words) > 8 else ""
        )
        said.append(f"words the tokenizer cannot spell from its pieces: {shown}")
    return "; ".join(said)


def check_reads_something(tok: Tokenizer, text: str, what: str = "the text") -> None:
    """A ``ValueError`` when ``text`` holds characters but ``tok`` reads none of them (each dropped by
    its normaliser: combining accents, zero-width spaces, ...): its ids would be special tokens only."""
    if text.strip() and not any(end > start for start, end in tok.offsets(text)):
        raise ValueError(
            f"{what} holds nothing the tokenizer reads: it drops every character "
            f"({describe_unknown(tok.unknown(text))})"
        )


class HFTokenizer(Tokenizer):
    """A ``tokenizers.Tokenizer`` (a ``tokenizer.json``) behind the interface; ``.backend`` is it."""

    def __init__(self, backend, *, add_special_tokens: bool = True):
        import json

        self.backend = backend
        self.add_special_tokens = add_special_tokens
        model = json.loads(backend.to_str()).get("model", {})
        unk = model.get("unk_token")
        self.unk_id = backend.token_to_id(unk) if isinstance(unk, str) else None
        pad = backend.padding
        pad_id = pad["pad_id"] if pad else None
        for name in ("[PAD]", "<pad>", "<|endoftext|>", "</s>"):
            if pad_id is None:
                pad_id = backend.token_to_id(name)
        self.pad_id = pad_id if pad_id is not None else 0
        # a character vocabulary (attnlab's char text runs) drops what it lacks, and the library's
        # offsets then slip; its offsets and unknowns are read from the vocabulary instead
        self._chars = char_vocabulary(backend)
        self.refuses_unknown = self._chars is not None  # dropping a character is never right

    def _encode(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        enc = self.backend.encode(text, add_special_tokens=self.add_special_tokens)
        if self._chars is None:
            return list(enc.ids), [tuple(o) for o in enc.offsets]
        kept = [p for p, ch in enumerate(text) if ch in self._chars]  # one id per known character
        return list(enc.ids), [(p, p + 1) for p in kept]

    def _lost(self, text: str, ids: list[int], offsets: list[tuple[int, int]]) -> tuple[list[str], list[str]]:
        if self._chars is None:
            return super()._lost(self._read(text, ids, offsets), ids, offsets)
        return [], unknown_characters(text, self._chars)  # whitespace too: every character is a token

    def _read(self, text: str, ids: list[int], offsets: list[tuple[int, int]]) -> str:
        """``text`` as far as a truncating backend read it: cut at the end of the last id's characters
        (truncation from the left: what it cut blanked to spaces, so the offsets still hold), so the
        characters it cut are not taken for characters it dropped. Not truncated (fewer ids than its
        ``max_length``): ``text`` as it is."""
        cut = self.backend.truncation
        spans = [(start, end) for start, end in offsets if end > start]  # special tokens stand for no text
        if cut is None or len(ids) < cut["max_length"] or not spans:
            return text
        if cut.get("direction") == "left":
            start = min(s for s, _ in spans)
            return " " * start + text[start:]
        return text[: max(e for _, e in spans)]

    def decode(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> str:
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def token(self, i: int) -> str:
        text = self.backend.decode([i], skip_special_tokens=False)
        return text if text else (self.backend.id_to_token(i) or f"<{i}>")

    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)


def wrap(tokenizer) -> Tokenizer:
    """``tokenizer`` behind the interface: an attnlab :class:`Tokenizer` as it is, a
    ``tokenizers.Tokenizer`` as :class:`HFTokenizer`."""
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    from tokenizers import Tokenizer as Backend

    if isinstance(tokenizer, Backend):
        return HFTokenizer(tokenizer)
    raise ValueError(f"not a tokenizer attnlab knows: {type(tokenizer).__name__}")


def from_file(
    path: str | Path, *, vocab_size: int | None = None, add_special_tokens: bool = True
) -> HFTokenizer:
    """A ``tokenizer.json`` (no padding, no truncation) behind the interface. With ``vocab_size``
    (the model's), a tokenizer that can produce an id >= ``vocab_size`` is a ``ValueError``: it
    belongs to another checkpoint."""
    from tokenizers import Tokenizer as Backend

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer file {path}")
    try:
        backend = Backend.from_file(str(path))
    except Exception as exc:  # tokenizers raises its own exception type
        raise ValueError(f"{path} is not a readable tokenizer.json: {str(exc).splitlines()[0]}") from None
    backend.no_padding()
    backend.no_truncation()
    if vocab_size is not None:
        size = max(backend.get_vocab(with_added_tokens=True).values(), default=-1) + 1
        if size > vocab_size:
            raise ValueError(
                f"{path} has token ids up to {size - 1} but the model's vocab_size is {vocab_size}: "
                "the tokenizer does not belong to this checkpoint"
            )
    tokenizer = HFTokenizer(backend, add_special_tokens=add_special_tokens)
    tokenizer.eos_id = declared_eos(path.parent / "tokenizer_config.json", backend)
    return tokenizer


def declared_eos(config: Path, backend) -> int | None:
    """The id of the ``eos_token`` that ``config`` (a Hugging Face ``tokenizer_config.json``, if there
    is one) declares: a token's text or ``{"content": text}``; None when it declares none or
    ``backend`` lacks that token."""
    if not config.is_file():
        return None
    eos = read_json(config, kind=dict).get("eos_token")
    eos = eos.get("content") if isinstance(eos, dict) else eos
    if eos is not None and not isinstance(eos, str):
        raise ValueError(f"{config}: eos_token must be a token's text, got {eos!r:.60}")
    return None if eos is None else backend.token_to_id(eos)
