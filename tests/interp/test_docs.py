"""docs/heads.md: every python example prints its output block exactly."""

from pathlib import Path

import pytest


def test_heads_page_examples(doc_examples):
    page = doc_examples(Path(__file__).parents[2] / "docs" / "heads.md")
    assert len(page.pairs) == page.python_blocks == 3
    page.assert_each_prints_its_output()


@pytest.mark.isa  # its printed bounds and exact symmetry were once right on AVX-512 only
def test_analyses_page_examples(doc_examples):
    page = doc_examples(Path(__file__).parents[2] / "docs" / "analyses.md")
    assert len(page.pairs) == page.python_blocks == 3
    page.assert_each_prints_its_output()
