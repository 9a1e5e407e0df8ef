"""Every "Dangerous Misconception" and "Mistakes people make" item of the course material,
refuted by computing it with attnlab.

Each :class:`Myth` carries the claim, where the course material raises it (named in words: the
Week 1 notes on attention, their plain-language version, the Week 19 course page), a one-paragraph
reason it is false, and ``demonstrate() -> (lines, evidence)``: the lines ``attnlab myths N``
prints and a dict of the numbers behind them (the tests assert those numbers).

The myths live by topic, each claim next to its demonstration (:mod:`.registry` says how to add
one): :mod:`.seq2seq`, :mod:`.scores`, :mod:`.architecture`, :mod:`.counting`,
:mod:`.long_context`. Demonstrations are small (widths of 4-16, a few tokens) except where the
notes' own numbers are the point (d_model 512). NumPy demonstrations use :mod:`attnlab.ref`;
parameter counts build real ``attnlab.nn`` modules (and :mod:`attnlab.audit`); the weight-sharing
myths read the real MiniLM checkpoint.
"""

from __future__ import annotations

from attnlab.lessons.myths import architecture, counting, long_context, scores, seq2seq  # noqa: F401  (register)
from attnlab.lessons.myths.registry import COURSE, NOTES, PLAIN, Myth, myth, ordered

MYTHS: list[Myth] = ordered()
TOPICS = ("seq2seq", "scores", "architecture", "counting", "long_context")


def get_myth(number) -> Myth:
    """The myth with this number; ``ValueError`` naming the valid range otherwise."""
    try:
        n = int(str(number).strip())
    except ValueError:
        n = None
    if n is None or not 1 <= n <= len(MYTHS):
        raise ValueError(
            f"unknown myth {number!r}: choose a number from 1 to {len(MYTHS)} "
            f"(run `attnlab myths` for the list)"
        )
    return MYTHS[n - 1]


__all__ = ["COURSE", "MYTHS", "NOTES", "PLAIN", "TOPICS", "Myth", "get_myth", "myth"]
