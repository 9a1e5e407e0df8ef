"""docs/reference.md runs: each python block's stdout equals the output block after it, and every
function the page lists exists in attnlab.ref."""

from __future__ import annotations

import re
from pathlib import Path

from attnlab import ref

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"


def test_reference_page_examples_print_what_the_page_shows(doc_examples):
    page = doc_examples(PAGE)
    assert len(page.pairs) == page.python_blocks >= 4
    page.assert_each_prints_its_output()


def test_reference_page_lists_every_public_function():
    text = PAGE.read_text()
    first_cells = re.findall(r"^\| (.+?) \| ", text, re.M)[2:]  # skip the header and its rule
    listed = {name for cell in first_cells for name in re.findall(r"`(\w+)", cell)}
    assert listed <= set(ref.__all__), listed - set(ref.__all__)
    assert set(ref.__all__) <= listed, set(ref.__all__) - listed
