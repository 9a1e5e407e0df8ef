"""docs/training.md runs: each python block prints exactly its output block."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "training.md"
PAIR = re.compile(r"```python\n(.*?)```\n\n```output\n(.*?)```", re.S)


def test_training_page_examples_print_what_the_page_says():
    text = PAGE.read_text()
    pairs = PAIR.findall(text)
    assert len(pairs) == text.count("```python") >= 2
    namespace: dict = {"__name__": "docs_training"}
    for i, (code, expected) in enumerate(pairs, 1):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"training.md block {i}", "exec"), namespace)
        assert out.getvalue() == expected, f"block {i}"
