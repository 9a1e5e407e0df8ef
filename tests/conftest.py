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


# a real headless Chromium (Debian's) driven by Playwright, for every browser test
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _unavailable(reason: str):
    # in CI a missing browser is a failure, never a silent skip
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so the browser tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"{CHROMIUM} is missing; install Debian's chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright (python) is not installed")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def tiny():
    """A small random BERT (1 layer, d_model 16) with MiniLM's real tokenizer: fast, same pipeline
    as MiniLM (the streaming embedding tests)."""
    import torch

    from attnlab.models import BertConfig, BertEncoder
    from attnlab.models.pretrained import load_tokenizer, pretrained_path

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_seq_length=256)
    return BertEncoder(config).eval(), load_tokenizer(pretrained_path("minilm"), 256)


@pytest.fixture(scope="module")
def tiny_checkpoint(tiny, tmp_path_factory):
    """The tiny model saved as a Hugging Face checkpoint directory, for `attnlab embed --model DIR`."""
    import json

    from safetensors.torch import save_file

    from attnlab.models.hf.bert import hf_names
    from attnlab.models.pretrained import pretrained_path

    model, _ = tiny
    path = tmp_path_factory.mktemp("tiny-bert")
    c = model.config
    names = hf_names(c)
    state = {names[k]: v.contiguous() for k, v in model.state_dict().items() if k in names}
    save_file(state, str(path / "model.safetensors"))
    hf = {
        "model_type": "bert",
        "vocab_size": c.vocab_size,
        "hidden_size": c.d_model,
        "num_attention_heads": c.num_heads,
        "num_hidden_layers": c.num_layers,
        "intermediate_size": c.d_ff,
    }
    (path / "config.json").write_text(json.dumps(hf))
    (path / "sentence_bert_config.json").write_text('{"max_seq_length": 256}')
    (path / "tokenizer.json").write_bytes((pretrained_path("minilm") / "tokenizer.json").read_bytes())
    return path


def _echo_play(speeches: int = 600, seed: int = 0) -> str:
    """A play-like text whose every speech says its line twice (``JULIET:\\nqo zeb, qo zeb.``): speakers,
    line breaks, blank lines between speeches, and something in the context worth copying."""
    rng = np.random.default_rng(seed)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    out = []
    for _ in range(speeches):
        words = ["".join(rng.choice(letters, size=rng.integers(2, 6))) for _ in range(rng.integers(2, 4))]
        line = " ".join(words)
        out.append(f"{rng.choice(['ROMEO', 'JULIET', 'NURSE', 'FRIAR'])}:\n{line}, {line}.\n")
    return "\n".join(out)


@pytest.fixture(scope="session")
def text_run(tmp_path_factory) -> Path:
    """A tiny GPT trained on a play-like text (2 layers x 2 heads, width 32, context 64, 400 steps;
    about 5 s): the run folder the language-model experiments, the head scan and the logit lens read."""
    from attnlab.training.text_presets import train_text

    folder = tmp_path_factory.mktemp("text-run")
    (folder / "play.txt").write_text(_echo_play(), encoding="utf-8")
    sizes = {"layers": 2, "heads": 2, "d_model": 32, "context": 64, "batch": 16, "warmup": 20}
    train_text(
        "quick",
        folder / "run",
        source=str(folder / "play.txt"),
        steps=400,
        eval_every=400,
        eval_size=16,
        **sizes,
    )
    return folder / "run"
