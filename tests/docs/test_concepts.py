"""The concept pages run: every python block is executed and its stdout must equal the page's
output block exactly; every function, link and command a page names must exist."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from attnlab.cli import COMMANDS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "concepts"
PAGES = sorted(DOCS.glob("[0-9][0-9]-*.md"))
CONCEPTS = [
    "seq2seq",
    "bahdanau",
    "luong",
    "self-attention",
    "scaled-dot-product",
    "masks",
    "multi-head",
    "gqa",
    "feed-forward",
    "norms",
    "positions",
    "parameter-counting",
    "flashattention",
    "kv-cache",
    "decoding",
    "beyond-quadratic",
]


def test_one_page_per_concept_and_an_index():
    names = " ".join(p.name for p in PAGES)
    assert len(PAGES) == 16 and all(c in names for c in CONCEPTS)
    index = (DOCS / "README.md").read_text()
    assert all(f"]({p.name})" in index for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_examples_print_what_the_page_says(page, doc_examples):
    examples = doc_examples(page)
    assert examples.pairs, f"{page.name} has no example"
    assert len(examples.pairs) == examples.python_blocks, (
        f"{page.name}: every python block needs an output block"
    )
    examples.assert_each_prints_its_output()


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
