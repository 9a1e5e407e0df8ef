"""docs/pretrained.md, from "Decoder checkpoints" on: each python block prints its output block
(the checkpoints are built by transformers inside the page; the per-layer table is computed)."""

from __future__ import annotations

from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[3] / "docs" / "pretrained.md"


@pytest.mark.slow
def test_decoder_sections_print_what_the_page_says(doc_examples):
    page = doc_examples(PAGE)
    start = page.text.index("## Decoder checkpoints")
    page.pairs = [pair for pair in page.pairs if page.text.index(pair[0]) > start]
    assert len(page.pairs) == 3
    page.assert_each_prints_its_output()
