"""docs/engine.md runs: each python block prints exactly its output block."""

from __future__ import annotations

from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "engine.md"


def test_engine_page_examples_print_what_the_page_says(doc_examples):
    page = doc_examples(PAGE)
    assert len(page.pairs) == page.python_blocks >= 6
    page.assert_each_prints_its_output()
