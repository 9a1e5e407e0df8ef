"""docs/practice.md runs: each python block (an attnlab session, in-process) prints its output block."""

from __future__ import annotations

import os
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "practice.md"


def test_practice_page_shows_what_attnlab_prints(doc_examples):
    page = doc_examples(PAGE)
    assert len(page.pairs) == page.python_blocks >= 5
    cwd = os.getcwd()
    try:
        page.assert_each_prints_its_output()
    finally:
        os.chdir(cwd)  # the page works in a temporary folder
