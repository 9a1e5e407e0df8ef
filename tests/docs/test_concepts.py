"""The concept pages run: every python block is executed and its stdout must equal the page's
output block exactly; every function, link and command a page names must exist."""

from __future__ import annotations

import contextlib
import importlib
import io
import re
from pathlib import Path

import pytest

from attnlab.cli import COMMANDS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "concepts"
PAGES = sorted(DOCS.glob("[0-9][0-9]-*.md"))
PAIR = re.compile(r"```python\n(.*?)```\n\n```output\n(.*?)```", re.S)
CONCEPTS = ["seq2seq", "bahdanau", "luong", "self-attention", "scaled-dot-product", "masks",
            "multi-head", "gqa", "feed-forward", "norms", "positions", "parameter-counting",
            "flashattention", "kv-cache", "decoding"]


def test_one_page_per_concept_and_an_index():
    names = " ".join(p.name for p in PAGES)
    assert len(PAGES) == 15 and all(c in names for c in CONCEPTS)
    index = (DOCS / "README.md").read_text()
    assert all(f"]({p.name})" in index for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_examples_print_what_the_page_says(page):
    text = page.read_text()
    pairs = PAIR.findall(text)
    assert pairs, f"{page.name} has no example"
    assert len(pairs) == text.count("```python"), f"{page.name}: every python block needs an output block"
    namespace: dict = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    for i, (code, expected) in enumerate(pairs, 1):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"{page.name}[block {i}]", "exec"), namespace)
        assert out.getvalue() == expected, f"{page.name} block {i} printed something else"


def _resolve(dotted: str) -> None:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return
    raise ImportError(dotted)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_has_equation_and_links_that_resolve(page):
    text = page.read_text()
    assert text.count("$$") >= 2, f"{page.name} shows no display equation"
    assert "**Implemented by:**" in text
    names = set(re.findall(r"`(attnlab(?:\.\w+)+)`", text))
    assert names, f"{page.name} names no attnlab function"
    for name in names:
        _resolve(name)  # raises if a page names something that does not exist
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not target.startswith("http"):
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"
    commands = set(re.findall(r"`attnlab (\w+)", text))
    assert commands, f"{page.name} names no CLI command"
    assert commands <= set(COMMANDS), commands - set(COMMANDS)
