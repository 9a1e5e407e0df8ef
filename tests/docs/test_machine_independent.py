"""Every page's printed output is the same on every CPU: the suite runs on Intel (AMX) and AMD
(Zen 5) machines, whose BLAS kernels add in different orders. An output block may print a bound
("< 2e-05") or a rounded figure, never the digits of a rounding error or a count of NaNs and
infinities that depends on summation order."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
OUTPUT = re.compile(r"```output\n(.*?)```", re.S)
# a mantissa with digits and an exponent of -5 or below: 4.8e-06, 9.5e-07 (not a round bound like 1e-12)
ROUNDING_DIGITS = re.compile(r"(?<![<≤\w.])(\d\.\d+e-(?:0?[5-9]|[1-9]\d))")
NAN_COUNT = re.compile(r"\b\d+ (?:nan|-?inf)\b")


def _outputs(page: Path) -> list[tuple[int, str]]:
    return [(i, m.group(1)) for i, m in enumerate(OUTPUT.finditer(page.read_text()), 1)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_output_blocks_print_no_rounding_digits(page):
    for i, block in _outputs(page):
        for line in block.splitlines():
            found = [
                m for m in ROUNDING_DIGITS.findall(line) if not re.search(r"[<≤]\s*" + re.escape(m), line)
            ]
            assert not found, f"{page.name} output block {i} prints rounding error digits {found}: {line!r}"
            assert not NAN_COUNT.search(line), f"{page.name} output block {i} counts NaN/inf: {line!r}"


def test_the_rule_catches_what_broke_on_amd():
    """The two lines that differed between an Intel and an AMD machine are both caught."""
    assert ROUNDING_DIGITS.findall("| mistral | 1 | 4.8e-06 | 2.1e-07 |") == ["4.8e-06", "2.1e-07"]
    assert NAN_COUNT.search("(261 of 512 entries are non-finite: 133 inf, 128 -inf)")
    assert not ROUNDING_DIGITS.findall("max |ref - torch| < 1e-12: True | < 2e-05 | lr 6.987712e-04")
