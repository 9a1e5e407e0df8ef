"""``dates``: human-readable dates in many formats -> ISO 8601 (``"2026-01-25"``).

Dates are drawn uniformly from 1950-01-01 .. 2049-12-31 and written in one of the formats below,
chosen uniformly. Two-digit years use the pivot ``yy < 50 -> 20yy, else 19yy`` (so the range
round-trips). Day-first numeric forms only (``25/01/26``), never the ambiguous US ``01/25/26``.
Month and weekday names are English and independent of the machine's locale.
"""

from __future__ import annotations

import datetime as dt
import string
from collections.abc import Callable
from typing import Any

import numpy as np

from attnlab.tasks.base import Example, Task
from attnlab.tasks.tokenizer import CharTokenizer

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
FIRST, LAST = dt.date(1950, 1, 1), dt.date(2049, 12, 31)


def ordinal(n: int) -> str:
    """1 -> '1st', 2 -> '2nd', 11 -> '11th', 23 -> '23rd'."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _mon(d: dt.date) -> str:
    return MONTHS[d.month - 1]


def _wd(d: dt.date) -> str:
    return WEEKDAYS[d.weekday()]


# name -> writer; every writer's output determines the date uniquely (tested)
FORMATS: dict[str, Callable[[dt.date], str]] = {
    "long-weekday": lambda d: f"{_wd(d)}, {d.day} {_mon(d)} {d.year}",  # Tuesday, 25 January 2026
    "dd/mm/yy": lambda d: f"{d.day:02d}/{d.month:02d}/{d.year % 100:02d}",  # 25/01/26
    "mon-ordinal": lambda d: f"{_mon(d)[:3].lower()} {ordinal(d.day)} {d.year}",  # jan 25th 2026
    "month-d-yyyy": lambda d: f"{_mon(d)} {d.day}, {d.year}",  # January 25, 2026
    "d-mon-yyyy": lambda d: f"{d.day} {_mon(d)[:3]} {d.year}",  # 25 Jan 2026
    "dd.mm.yyyy": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",  # 25.01.2026
    "dd-MON-yyyy": lambda d: f"{d.day:02d}-{_mon(d)[:3].upper()}-{d.year}",  # 25-JAN-2026
    "ordinal-of": lambda d: f"the {ordinal(d.day)} of {_mon(d)}, {d.year}",  # the 25th of January, 2026
    "wd-d-mon-yy": lambda d: f"{_wd(d)[:3]} {d.day} {_mon(d)[:3]} {d.year % 100:02d}",  # Sun 25 Jan 26
    "d-month-yyyy-lower": lambda d: f"{d.day} {_mon(d).lower()} {d.year}",  # 25 january 2026
    "yyyy/mm/dd": lambda d: f"{d.year}/{d.month:02d}/{d.day:02d}",  # 2026/01/25
    "d/m/yyyy": lambda d: f"{d.day}/{d.month}/{d.year}",  # 25/1/2026
}


def source_lengths(formats) -> set[int]:
    """Every source length the ``formats`` can produce. One leap year holds every (month, weekday,
    day) combination a length depends on; years are 4 digits (1950-2049) or 2, so one year is enough."""
    start = dt.date(2024, 1, 1)
    return {len(FORMATS[f](start + dt.timedelta(days=k))) for f in formats for k in range(366)}


SYMBOLS = string.ascii_letters + string.digits + " ,./-"


class Dates(Task):
    """dates: a date in one of 12 human formats -> ISO "YYYY-MM-DD" ("jan 25th 2026" -> "2026-01-25")."""

    name = "dates"

    def __init__(
        self, min_len: int | None = None, max_len: int | None = None, formats: tuple[str, ...] | None = None
    ):
        unknown = sorted(set(formats or ()) - set(FORMATS))
        if unknown:
            raise ValueError(f"formats has unknown format(s) {unknown}; known: {sorted(FORMATS)}")
        for name, v in (("min_len", min_len), ("max_len", max_len)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
                raise ValueError(f"{name} must be a positive integer or None, got {v!r}")
        if min_len is not None and max_len is not None and min_len > max_len:
            raise ValueError(f"min_len={min_len} is larger than max_len={max_len}")
        self.min_len, self.max_len = min_len, max_len
        self.formats = tuple(formats) if formats else tuple(FORMATS)
        lengths = source_lengths(self.formats)
        lo, hi = min_len or 0, max_len or max(lengths)
        if not any(lo <= n <= hi for n in lengths):
            raise ValueError(
                f"task dates has no source of length {lo}..{hi}: its {len(self.formats)} formats "
                f"give lengths {min(lengths)}..{max(lengths)}"
            )
        self.tokenizer = CharTokenizer(SYMBOLS)

    def params(self) -> dict[str, Any]:
        return {"min_len": self.min_len, "max_len": self.max_len, "formats": list(self.formats)}

    def max_target_len(self, src: str) -> int:
        return 10  # YYYY-MM-DD

    def _draw(self, rng: np.random.Generator) -> Example:
        span = LAST.toordinal() - FIRST.toordinal()
        while True:
            d = dt.date.fromordinal(FIRST.toordinal() + int(rng.integers(0, span + 1)))
            src = FORMATS[self.formats[int(rng.integers(0, len(self.formats)))]](d)
            if (self.min_len is None or len(src) >= self.min_len) and (
                self.max_len is None or len(src) <= self.max_len
            ):
                return Example(src, d.isoformat())
