"""attnlab.lessons: the five executed code blocks of the Week 1 notes (section 5), run through attnlab.

``LESSONS["01"] .. LESSONS["05"]`` are :class:`Lesson` records; ``LESSONS[n].run()`` returns the
Output lines (the notes' lines, then ``"attnlab check: "`` lines). ``attnlab lesson N`` prints them.
The sibling modules ``myths`` and ``quiz`` hold the notes' misconceptions and check-yourself questions.
"""

from __future__ import annotations

from attnlab.lessons import (
    lesson01_attention,
    lesson02_variance,
    lesson03_multihead,
    lesson04_parameters,
    lesson05_additive,
)
from attnlab.lessons.base import CHECK, Lesson

LESSONS: dict[str, Lesson] = {
    m.LESSON.number: m.LESSON
    for m in (
        lesson01_attention,
        lesson02_variance,
        lesson03_multihead,
        lesson04_parameters,
        lesson05_additive,
    )
}


def get_lesson(number: str | int) -> Lesson:
    """``"1"``, ``"01"`` or ``1`` -> the lesson; ``ValueError`` naming the valid numbers otherwise."""
    key = str(number).strip()
    if key.isascii() and key.isdigit():
        key = f"{int(key):02d}"
    if key not in LESSONS:
        raise ValueError(
            f"unknown Week 1 code block {str(number)!r}; choose one of {', '.join(LESSONS)} "
            "(the Week 19 lessons are 'attnlab study')"
        )
    return LESSONS[key]


__all__ = ["CHECK", "LESSONS", "Lesson", "get_lesson"]
