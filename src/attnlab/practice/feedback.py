"""What ``attnlab practice check`` prints about failed checks: each likely mistake stated once.

One mistake (no ``1/sqrt(d_k)``, an inverted mask) usually fails several checks. The grader names
it on every check it explains (:class:`attnlab.practice.grade.Result`: ``mistake`` and a message
``"likely mistake: <explanation> (<what is off>)"``); here each failed check keeps only what is off
and a reference (``likely mistake 1, below``), and :meth:`Ledger.summary` states each mistake once,
numbered in the order it first appeared, with the checks it explains.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from attnlab.practice.mistakes import MISTAKES

_EXPLAIN = {m.key: m.explanation for m in MISTAKES}


@dataclass
class LikelyMistake:
    """One known mistake of this run: its ``number`` (order of first appearance), ``key``,
    ``explanation`` and the ``checks`` it explains (``(id, title)`` pairs, in order)."""

    number: int
    key: str
    explanation: str
    checks: list[tuple[str, str]] = field(default_factory=list)


def _what_is_off(message: str, explanation: str) -> str:
    """The grader's message without the mistake's explanation: ``differs from ... by up to 0.3``."""
    prefix = f"likely mistake: {explanation} ("
    if message.startswith(prefix) and message.endswith(")"):
        return message[len(prefix) : -1]
    return message


class Ledger:
    """The likely mistakes of one grading run, filled check by check (:meth:`lines` of each result
    as it is decided, then :meth:`summary`)."""

    def __init__(self) -> None:
        self.found: dict[str, LikelyMistake] = {}

    def lines(self, result) -> list[str]:
        """What to print for one check: ``pass``/``FAIL`` and its title, and under a failure what is
        off, with the number of the likely mistake it points to."""
        out = [f"  {'pass' if result.passed else 'FAIL'}  {result.title}"]
        if result.passed or not result.message:
            return out
        explanation = _EXPLAIN.get(result.mistake)
        if explanation is None:  # no known mistake matches: the grader's message as it is
            return [*out, f"        {result.message}"]
        mistake = self.found.setdefault(
            result.mistake, LikelyMistake(len(self.found) + 1, result.mistake, explanation)
        )
        mistake.checks.append((result.id, result.title))
        off = _what_is_off(result.message, explanation)
        return [*out, f"        {off} (likely mistake {mistake.number}, below)"]

    def summary(self) -> list[str]:
        """Each likely mistake once, with the failed checks it explains (nothing when none)."""
        out = []
        for m in self.found.values():
            n = len(m.checks)
            out.append(f"likely mistake {m.number} ({m.key}): {m.explanation}")
            out.append(f"  explains {n} failed check{'s' if n > 1 else ''}:")
            out += [f"    - {title}" for _, title in m.checks]
        return out

    def to_json(self) -> list[dict]:
        """``[{"number", "key", "explanation", "checks": [ids]}]``."""
        return [
            {
                "number": m.number,
                "key": m.key,
                "explanation": m.explanation,
                "checks": [i for i, _ in m.checks],
            }
            for m in self.found.values()
        ]
