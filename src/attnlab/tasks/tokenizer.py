"""A character/symbol tokenizer with the special ids every attnlab model assumes.

Ids: ``PAD=0``, ``BOS=1``, ``EOS=2``, ``UNK=3``, ``SEP=4`` (SEP joins source and target when a
decoder-only GPT learns a sequence-to-sequence task), then one id per symbol in the order given.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from attnlab.tasks.tokenize import Tokenizer

PAD, BOS, EOS, UNK, SEP = 0, 1, 2, 3, 4
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>", "<sep>")


class CharTokenizer(Tokenizer):
    """Maps single-character symbols to ids and back (the :class:`~attnlab.tasks.tokenize.Tokenizer`
    interface: ``encode`` warns naming any character outside the alphabet, which becomes ``UNK``).

    Args:
        symbols: the alphabet, one character each, no repeats (e.g. ``"abcdefghij"``).
    """

    pad_id, bos_id, eos_id, unk_id, sep_id = PAD, BOS, EOS, UNK, SEP  # type: ignore[assignment]

    def __init__(self, symbols: Sequence[str]):
        symbols = list(symbols)
        bad = [s for s in symbols if not isinstance(s, str) or len(s) != 1]
        if bad:
            raise ValueError(f"symbols must be single characters, got {bad[:5]}")
        if len(set(symbols)) != len(symbols):
            raise ValueError("symbols contains repeated characters")
        self.symbols = tuple(symbols)
        self._to_id = {s: i + len(SPECIALS) for i, s in enumerate(self.symbols)}
        self._to_tok = list(SPECIALS) + list(self.symbols)

    @property
    def vocab_size(self) -> int:
        """Number of ids: the 5 specials plus one per symbol."""
        return len(self._to_tok)

    def _encode(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """One id per character (``UNK`` outside the alphabet), each standing for its own character."""
        return [self._to_id.get(ch, UNK) for ch in text], [(i, i + 1) for i in range(len(text))]

    def check_text(self, text: str, task: str = "task") -> str:
        """``text`` unchanged if every character is in the alphabet, else a ``ValueError`` naming the
        characters and the alphabet (commands refuse such input rather than map it to ``<unk>``)."""
        unknown = sorted(set(text) - set(self.symbols))
        if unknown:
            raise ValueError(
                f"text has characters outside the {task!r} alphabet {''.join(self.symbols)!r}: {unknown}"
            )
        return text

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``: stops at the first ``EOS``, skips ``PAD``/``BOS``/``SEP``, ``UNK`` -> '?'."""
        out = []
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if i in (PAD, BOS, SEP):
                continue
            out.append(self._to_tok[i] if len(SPECIALS) <= i < self.vocab_size else "?")
        return "".join(out)

    def token(self, i: int) -> str:
        """Display string of one id (specials as ``<eos>`` etc.)."""
        return self._to_tok[i] if 0 <= i < self.vocab_size else "<unk>"

    def to_dict(self) -> dict:
        return {"symbols": "".join(self.symbols)}
