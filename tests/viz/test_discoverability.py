"""What a newcomer sees at the prompt: ``dir(attnlab.viz)`` lists the public names."""

from __future__ import annotations

import attnlab.viz


def test_dir_lists_the_public_names():
    names = dir(attnlab.viz)
    assert set(attnlab.viz.__all__) <= set(names)
    assert {"Explorer", "heatmap", "explore", "draw_figures"} <= set(names)
