"""attnlab.lessons: the five executed code blocks of the Week 1 notes (section 5), and the Week 19
course page's two code blocks, run through attnlab.

``LESSONS["01"] .. LESSONS["05"]`` are :class:`Lesson` records; ``LESSONS[n].run()`` returns the
Output lines (the notes' lines, then ``"attnlab check: "`` lines). ``WEEK19_LESSONS["w19-1"]`` (the
page's ``class Block``) and ``["w19-2"]`` (its einsum form of attention) print what the page's code
gives, which the page does not show. ``attnlab lesson N`` prints any of them.
The sibling modules ``myths`` and ``quiz`` hold the notes' misconceptions and check-yourself questions.
"""

from __future__ import annotations

from attnlab.lessons import (
    lesson01_attention,
    lesson02_variance,
    lesson03_multihead,
    lesson04_parameters,
    lesson05_additive,
    lesson19_block,
    lesson19_einsum,
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

# the Week 19 course page's code blocks (not the seven Week 19 lessons of `attnlab study`)
WEEK19_LESSONS: dict[str, Lesson] = {m.LESSON.number: m.LESSON for m in (lesson19_block, lesson19_einsum)}
ALL_LESSONS: dict[str, Lesson] = {**LESSONS, **WEEK19_LESSONS}


def get_lesson(number: str | int) -> Lesson:
    """``"1"``, ``"01"`` or ``1`` -> the Week 1 code block, ``"w19-1"`` -> the Week 19 course page's
    first; ``ValueError`` naming the valid numbers otherwise."""
    key = str(number).strip().lower()
    if key.isascii() and key.isdigit():
        key = f"{int(key):02d}"
    if key not in ALL_LESSONS:
        raise ValueError(
            f"unknown Week 1 code block {str(number)!r}; choose one of {', '.join(LESSONS)} "
            f"or a Week 19 code block {', '.join(WEEK19_LESSONS)} (the Week 19 lessons are 'attnlab study')"
        )
    return ALL_LESSONS[key]


__all__ = ["ALL_LESSONS", "CHECK", "LESSONS", "WEEK19_LESSONS", "Lesson", "get_lesson"]
