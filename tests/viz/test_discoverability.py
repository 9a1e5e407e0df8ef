"""What a newcomer sees at the prompt: ``dir(attnlab.viz)`` and ``repr(Explorer)``."""

from __future__ import annotations

import numpy as np

import attnlab.viz


def test_dir_lists_the_public_names():
    names = dir(attnlab.viz)
    assert set(attnlab.viz.__all__) <= set(names)
    assert {"Explorer", "heatmap", "explore", "draw_figures"} <= set(names)


def test_explorer_repr_says_what_the_page_shows():
    from attnlab.viz.explorer import AttentionView, Explorer

    w = np.full((2, 3, 4, 4), 0.25)  # [L, h, T_q, T_k], rows sum to one
    view = AttentionView("encoder self-attention", "self", tuple("abcd"), tuple("abcd"), w)
    e = Explorer([view], model_label="tiny", sentence="a b c d")
    text = repr(e)
    assert text.startswith("Explorer(model='tiny', sentence='a b c d'")
    assert "encoder self-attention: 2 layers x 3 heads, 4 x 4 tokens" in text
    assert f"{len(e.html):,} chars of HTML" in text and "<html" not in text
