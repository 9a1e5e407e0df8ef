"""Shared fixtures: a seeded NumPy generator (the reference computes in float64 by default) and the
runner of a markdown page's python examples."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import numpy as np
import pytest

# Every figure saved during the tests is checked: a legend box covering a plotted point is an error
# (attnlab.viz.legends.save_figure). Progress is written as plain lines, as in any non-terminal.
os.environ["ATTNLAB_CHECK_FIGURES"] = "1"
os.environ.setdefault("ATTNLAB_PROGRESS", "plain")


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh, seeded generator per test, so every test is reproducible on its own."""
    return np.random.default_rng(1234)


PYTHON_EXAMPLE = re.compile(r"```python\n(.*?)```\n\n```output\n(.*?)```", re.S)


class DocExamples:
    """The python examples of a markdown page: each ```python block followed by the ```output block
    that running it must print, exactly."""

    def __init__(self, page: Path):
        self.page = page
        self.text = page.read_text()
        self.pairs: list[tuple[str, str]] = PYTHON_EXAMPLE.findall(self.text)  # [(code, expected stdout)]
        self.python_blocks = self.text.count("```python")  # with or without an output block

    def assert_each_prints_its_output(self) -> None:
        """Run the blocks in order in one namespace; each one's stdout must equal its output block."""
        namespace: dict = {"__name__": "docs_" + self.page.stem.replace("-", "_")}
        for i, (code, expected) in enumerate(self.pairs, 1):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"{self.page.name}[block {i}]", "exec"), namespace)
            assert out.getvalue() == expected, f"{self.page.name} block {i} printed something else"


@pytest.fixture
def doc_examples() -> type[DocExamples]:
    """``doc_examples(page)`` reads a markdown page's python examples (test modules cannot import
    from tests/ under --import-mode=importlib, so the helper comes as a fixture)."""
    return DocExamples


@pytest.fixture(autouse=True)
def _study_data_dir(tmp_path_factory, monkeypatch):
    """Every test (and the commands it runs, subprocesses included) keeps its study database in a
    temporary folder: the quiz and practice commands record into ``$ATTNLAB_DATA_DIR``, never the
    user's real data folder."""
    monkeypatch.setenv("ATTNLAB_DATA_DIR", str(tmp_path_factory.mktemp("attnlab-data")))
