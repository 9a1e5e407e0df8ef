"""docs/reference.md runs: each python block's stdout equals the output block after it, and every
function the page lists exists in attnlab.ref."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from attnlab import ref

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"
BLOCK = re.compile(r"```python\n(.*?)```\n\n```output\n(.*?)```", re.S)


def test_reference_page_examples_print_what_the_page_shows():
    text = PAGE.read_text()
    pairs = BLOCK.findall(text)
    assert len(pairs) == text.count("```python") >= 4
    namespace: dict = {"__name__": "docs_reference"}
    for i, (code, expected) in enumerate(pairs, 1):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"reference.md[block {i}]", "exec"), namespace)
        assert out.getvalue() == expected, f"block {i} printed {out.getvalue()!r}"


def test_reference_page_lists_every_public_function():
    text = PAGE.read_text()
    first_cells = re.findall(r"^\| (.+?) \| ", text, re.M)[2:]  # skip the header and its rule
    listed = {name for cell in first_cells for name in re.findall(r"`(\w+)", cell)}
    assert listed <= set(ref.__all__), listed - set(ref.__all__)
    assert set(ref.__all__) <= listed, set(ref.__all__) - listed
