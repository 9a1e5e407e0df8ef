"""Explorer head badges: the detector scores above 0.4 of each head, in the page's data."""

from __future__ import annotations

import numpy as np

from attnlab.interp.badges import badges
from attnlab.viz.explorer import AttentionView


def test_badges_name_the_hand_built_heads():
    t = 6
    prev = np.zeros((t, t))
    prev[0, 0] = 1.0
    prev[np.arange(1, t), np.arange(t - 1)] = 1.0  # previous-token head: 5/6 of its attention
    first = np.zeros((t, t))
    first[:, 0] = 1.0  # sink head
    uniform = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
    w = np.stack([np.stack([prev, first, uniform])])  # [1, 3, T, T]
    tokens = ["<bos>", "a", "b", "c", "a", "b"]
    assert badges(w, tokens) == [["prev 0.83", "first 1.00", "first 0.41 · current 0.41"]]
    view = AttentionView("decoder causal self-attention", "causal", tokens, tokens, w)
    assert view.to_json()["badges"] == [["prev 0.83", "first 1.00", "first 0.41 · current 0.41"]]
    cross = AttentionView("cross", "cross", tokens, tokens, w)
    assert cross.to_json()["badges"] == [["", "", ""]]
    step = AttentionView("step", "self", tokens[-1:], tokens, w[:, :, -1:])  # one query, six keys
    assert step.to_json()["badges"] == [["", "", ""]]


def test_the_page_script_reads_the_badges():
    from importlib.resources import files

    script = (files("attnlab.viz") / "explorer" / "explorer.js").read_text()
    assert "v.badges" in script and "badged" in script
