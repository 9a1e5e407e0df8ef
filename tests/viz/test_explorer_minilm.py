"""The explorer for the real MiniLM in a real headless Chromium: drawn edges equal transformers' weights."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.browser
@pytest.mark.slow
def test_minilm_page_matches_the_model(tmp_path, open_page, helpers, minilm_oracle):
    from click.testing import CliRunner

    from attnlab.cli import cli

    sentence = "The animal didn't cross the street because it was too tired."
    path = tmp_path / "minilm.html"
    result = CliRunner().invoke(cli, ["explore", sentence, "--out", str(path)])
    assert result.exit_code == 0, result.output
    assert "encoder self-attention [6, 12, 16, 16]" in result.output
    page = open_page(path, viewport=(1400, 1000))
    tokens, oracle = minilm_oracle(sentence)  # transformers' BertModel: [L, h, T, T]
    assert page.page.locator("button.tok").count() == len(tokens)
    assert [page.page.text_content(f"button.tok[data-index='{i}']") for i in range(len(tokens))] == tokens
    page.page.select_option("#head-select", "-1")  # opened on one head: show all
    it = tokens.index("it")
    page.page.click(f"button.tok[data-index='{it}']")
    for layer in (0, 5):
        page.page.select_option("#layer-select", str(layer))
        got = helpers.drawn(page.edges())
        want = helpers.expected_edges(oracle, layer, it, range(12), 0.01)
        border = {e for e in set(got) ^ set(want) if abs(oracle[layer][e[0], it, e[1]] - 0.01) > 1e-5}
        assert not border, f"layer {layer}: edges differ from the oracle: {sorted(border)[:5]}"
        common = set(got) & set(want)
        assert max(abs(got[e] - want[e]) for e in common) < 1e-4
    assert page.page.text_content("#model-name").startswith("MiniLM")
    assert page.page.locator("#model-view canvas.thumb").count() == 6 * 12
    assert page.requests == [page.url] and page.errors == []
    helpers.artifacts.mkdir(exist_ok=True)
    page.page.screenshot(path=str(helpers.artifacts / "explorer-minilm.png"), full_page=False)
    assert (helpers.artifacts / "explorer-minilm.png").stat().st_size > 10_000


@pytest.mark.slow
def test_minilm_shows_every_token_up_to_512_and_refuses_more():
    from attnlab.viz.explorer import attention_views

    # 36 copies of a 14-token sentence: 506 tokens, past embed()'s 256-token cut but within 512 positions
    (view,), _ = attention_views(
        " ".join(["The animal didn't cross the street because it was too tired."] * 36)
    )
    assert view.weights.shape == (6, 12, 506, 506)
    assert view.layer_names == tuple(f"layers.{i}" for i in range(6))
    np.testing.assert_allclose(view.weights.sum(-1), 1.0, atol=1e-4)
    with pytest.raises(ValueError, match="has 512 positions"):
        attention_views("word " * 600)


def test_explore_json_says_what_it_wrote(tmp_path):
    import json

    from click.testing import CliRunner

    from attnlab.cli import cli

    out = tmp_path / "x.html"
    r = CliRunner().invoke(cli, ["explore", "a cat sat", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["out"] == str(out) and data["bytes"] == out.stat().st_size
    (view,) = data["views"]
    assert view["shape"] == [6, 12, 5, 5] and view["queries"] == ["[CLS]", "a", "cat", "sat", "[SEP]"]
