"""docs/training.md runs: each python block prints exactly its output block."""

from __future__ import annotations

from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "training.md"


def test_training_page_examples_print_what_the_page_says(doc_examples):
    page = doc_examples(PAGE)
    assert len(page.pairs) == page.python_blocks >= 2
    page.assert_each_prints_its_output()
