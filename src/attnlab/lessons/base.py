"""The :class:`Lesson` record: one executed code block of the notes (Concept -> Code -> Output ->
Interpretation), run through attnlab next to the notes' original NumPy/PyTorch calls."""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

CHECK = "attnlab check: "  # prefix of the extra lines printed after the notes' own output


@dataclass(frozen=True)
class Lesson:
    """One lesson.

    Attributes:
        number: ``"01"`` .. ``"05"`` (section 5.1 .. 5.5 of the Week 1 notes), or ``"w19-N"`` for
            the Week 19 course page's code blocks (``class Block``, the einsum form of attention).
        title: the code block's name in the notes.
        concept: the notes' one-line Concept.
        interpretation: the notes' Interpretation (plus, where needed, how attnlab maps onto it).
        func: the computation; its source is the Code shown to the reader, so the two cannot disagree.
        code: (derived) the source of ``func``, exactly what :meth:`run` executes.
    """

    number: str
    title: str
    concept: str
    interpretation: str
    func: Callable[[], list[str]] = field(repr=False, compare=False)
    code: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        week1 = len(self.number) == 2 and self.number.isascii() and self.number.isdigit()
        if not (week1 or re.fullmatch(r"w19-[1-9]", self.number)):
            raise ValueError(f"number must be two digits like '01' or 'w19-N', got {self.number!r}")
        object.__setattr__(self, "code", textwrap.dedent(inspect.getsource(self.func)).rstrip())

    @property
    def name(self) -> str:
        """What the reader calls it: ``"Week 1 code block 5"``, ``"Week 19 code block 1"`` (a code
        block of the Week 19 course page; not a Week 19 lesson of ``attnlab study``)."""
        if self.number.startswith("w19-"):
            return f"Week 19 code block {self.number[4:]}"
        return f"Week 1 code block {int(self.number)}"

    def run(self) -> list[str]:
        """Execute the lesson. Returns the Output lines: first the lines printed in the notes (the same
        text, except floating-point discrepancy figures, which stay below 1e-6), then extra lines
        starting with ``"attnlab check: "``."""
        return list(self.func())
