"""docs/language-model.md runs: its python block prints exactly its output block."""

from __future__ import annotations

from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "language-model.md"


def test_language_model_page_example_prints_what_the_page_says(doc_examples):
    page = doc_examples(PAGE)
    assert len(page.pairs) == page.python_blocks == 1
    page.assert_each_prints_its_output()
