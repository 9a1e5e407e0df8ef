"""The explorer page in a real headless Chromium: what is drawn equals what the model computed."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.viz.explorer import AttentionView, opening_focus, render_html

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TOKENS = "The animal didn't cross the street because it was too tired .".split()
SENTENCE = " ".join(TOKENS)
HOSTILE = "it was </script><img src=x onerror=alert(1)> & \u2028 done"


def _write(tmp_path, views, name="page.html", sentence=SENTENCE, min_weight=0.01):
    path = tmp_path / name
    path.write_text(
        render_html(
            views, model_label="two torch MultiheadAttention layers", sentence=sentence, min_weight=min_weight
        ),
        encoding="utf-8",
    )
    return path


def test_clicking_a_token_draws_exactly_the_computed_edges(tmp_path, open_page, helpers):
    w = helpers.mha_weights(len(TOKENS), len(TOKENS), layers=2, heads=4)
    view = AttentionView("encoder self-attention", "self", TOKENS, TOKENS, w)
    page = open_page(_write(tmp_path, [view]))
    # the page opens on something: the token and head attnlab chose, with that head's edges drawn
    focus = opening_focus([view])
    assert page.page.evaluate("window.attnExplorer.state()") == focus
    opened = helpers.expected_edges(w, focus["layer"], focus["query"], [focus["head"]], 0.01)
    assert helpers.drawn(page.edges()).keys() == opened.keys() and len(opened) >= 1
    assert page.page.is_hidden("#back-line")  # no page to go back to
    page.page.select_option("#head-select", "-1")
    page.page.select_option("#layer-select", "0")
    it = TOKENS.index("it")
    page.page.click(f"button.tok[data-index='{it}']")
    got = helpers.drawn(page.edges())
    want = helpers.expected_edges(w, 0, it, range(4), 0.01)
    assert set(got) == set(want) and len(want) > 4
    assert max(abs(got[e] - want[e]) for e in want) < 1e-7  # float32 round trip, exact
    assert page.page.get_attribute("#lines", "data-count") == str(len(want))
    assert page.page.get_attribute(f"button.tok[data-index='{it}']", "aria-selected") == "true"
    # the per-head summary names each head's heaviest key
    tops = page.page.eval_on_selector_all("#top-keys li", "els => els.map(e => Number(e.dataset.top))")
    assert tops == [int(np.argmax(w[0, h, it])) for h in range(4)]
    assert page.page.text_content("#top-keys li").startswith(f"head 0.0: {TOKENS[tops[0]]} ")  # layer.head
    # every row the model computed sums to one; the page holds the same numbers
    row = [page.page.evaluate(f"window.attnExplorer.weight(0, 2, {it}, {j})") for j in range(len(TOKENS))]
    np.testing.assert_allclose(row, w[0, 2, it], atol=1e-7)
    assert abs(sum(row) - 1) < 1e-5
    assert page.requests == [page.url] and page.dialogs == [] and page.errors == []


def test_layer_and_head_controls_change_the_view(tmp_path, open_page, helpers):
    w = helpers.mha_weights(len(TOKENS), len(TOKENS), layers=2, heads=4, seed=1)
    view = AttentionView(
        "encoder self-attention", "self", TOKENS, TOKENS, w, layer_names=("layers.0", "layers.1")
    )
    page = open_page(_write(tmp_path, [view]))
    q = 1
    page.page.select_option("#head-select", "-1")  # the page opened on one head; show all of them
    page.page.click(f"button.tok[data-index='{q}']")
    page.page.select_option("#layer-select", "1")
    assert page.page.evaluate("window.attnExplorer.state()")["layer"] == 1
    assert helpers.drawn(page.edges()).keys() == helpers.expected_edges(w, 1, q, range(4), 0.01).keys()
    assert page.page.text_content("#layer-name") == "layers.1"  # a layer is named by its module path
    page.page.select_option("#head-select", "2")
    got = helpers.drawn(page.edges())
    assert {h for h, _ in got} == {2}
    assert got.keys() == helpers.expected_edges(w, 1, q, [2], 0.01).keys()
    assert page.page.get_attribute("#heatmap", "data-head") == "2"
    assert "(layers.1, head 1.2;" in page.page.text_content("#heatmap-title")
    assert page.page.text_content("#head-name") == "1.2"
    # hover the heatmap cell (query 1, key 4): the tooltip shows that exact weight
    left, top, cell = (
        float(page.page.get_attribute("#heatmap", f"data-{k}")) for k in ("left", "top", "cell")
    )
    page.page.hover("#heatmap", position={"x": left + 4.5 * cell, "y": top + 1.5 * cell})
    assert page.page.get_attribute("#tooltip", "data-query") == "1"
    assert page.page.get_attribute("#tooltip", "data-key") == "4"
    assert float(page.page.get_attribute("#tooltip", "data-weight")) == pytest.approx(w[1, 2, 1, 4], abs=1e-7)
    assert page.page.text_content("#tooltip").startswith(f"{TOKENS[1]} \u2192 {TOKENS[4]}: ")
    # the model view: one small map per layer x head; a click enlarges head 0.3
    assert page.page.locator("#model-view canvas.thumb").count() == 2 * 4
    thumb = "#model-view canvas[data-layer='0'][data-head='3']"
    assert page.page.get_attribute(thumb, "title").startswith("head 0.3 (layers.0)")
    page.page.click(thumb)
    assert page.page.evaluate("window.attnExplorer.state()") == {"view": 0, "layer": 0, "head": 3, "query": q}
    assert page.page.get_attribute("#heatmap", "data-layer") == "0"
    assert helpers.drawn(page.edges()).keys() == helpers.expected_edges(w, 0, q, [3], 0.01).keys()


def test_cross_and_causal_views(tmp_path, open_page, helpers):
    src = list("2026-01-25")
    tgt = ["<bos>"] + list("25 Jan")
    cross = helpers.mha_weights(len(tgt), len(src), layers=1, heads=2, seed=2)
    causal = helpers.mha_weights(len(tgt), len(tgt), layers=1, heads=2, causal=True, seed=3)
    views = [
        AttentionView("encoder-decoder cross-attention", "cross", tgt, src, cross),
        AttentionView("decoder causal self-attention", "causal", tgt, tgt, causal),
    ]
    page = open_page(_write(tmp_path, views, sentence="2026-01-25", min_weight=0.0))
    assert page.page.text_content("#view-name") == "encoder-decoder cross-attention"
    assert "cross-attention" in page.page.text_content("#explain")
    page.page.select_option("#head-select", "-1")
    page.page.click("button.tok[data-index='3']")
    assert helpers.drawn(page.edges()).keys() == helpers.expected_edges(cross, 0, 3, range(2), 0.0).keys()
    assert len(page.edges()) == 2 * len(src)  # softmax weights are positive: every key gets a line
    page.page.select_option("#view-select", "1")
    assert page.page.text_content("#view-name") == "decoder causal self-attention"
    assert page.page.locator("button.tok").count() == len(tgt)
    page.page.click("button.tok[data-index='3']")
    # causal: token 3 reaches only tokens 0..3 (later keys carry weight exactly 0, below any threshold)
    keys = {j for _, j in helpers.drawn(page.edges())}
    assert keys <= {0, 1, 2, 3} and 3 in keys
    assert page.errors == [] and page.requests == [page.url]


def test_hostile_sentence_runs_nothing_and_shows_its_text(tmp_path, open_page, helpers):
    tokens = HOSTILE.split(" ")
    w = helpers.mha_weights(len(tokens), len(tokens), layers=1, heads=2, seed=4)
    path = _write(
        tmp_path, [AttentionView("encoder self-attention", "self", tokens, tokens, w)], sentence=HOSTILE
    )
    page = open_page(path)
    page.page.click("button.tok[data-index='2']")
    page.page.wait_for_timeout(300)  # give a would-be onerror handler its chance
    assert page.dialogs == []
    assert page.page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.page.text_content("#sentence") == HOSTILE
    assert page.page.text_content("button.tok[data-index='2']") == "</script><img"
    assert page.page.evaluate("document.scripts.length") == 2  # the JSON data and our one script
    # the CSP hashes match: our script ran (the page is ready) and nothing was refused
    assert not [m for m in page.console if "Content Security Policy" in m]
    assert page.requests == [page.url]


def test_512_tokens_stay_canvas_rendered(tmp_path, open_page, helpers):
    t = 512
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(2, 4, t, t)) * 3
    w = np.exp(logits - logits.max(-1, keepdims=True))
    w = (w / w.sum(-1, keepdims=True)).astype(np.float32)  # [2, 4, 512, 512], rows sum to 1
    tokens = [f"w{i}" for i in range(t)]
    page = open_page(
        _write(
            tmp_path,
            [AttentionView("encoder self-attention", "self", tokens, tokens, w)],
            sentence=" ".join(tokens),
        )
    )
    # one button per token and a few hundred other nodes; never a node per weight (2 M of them)
    assert page.page.evaluate("document.getElementsByTagName('*').length") < 2 * t + 300
    page.page.select_option("#head-select", "-1")  # opened on one head: show all
    page.page.click("button.tok[data-index='300']")
    got = helpers.drawn(page.edges())
    want = helpers.expected_edges(w, 0, 300, range(4), 0.01)
    assert got.keys() == want.keys() and len(want) > 20
    page.page.select_option("#head-select", "1")
    assert helpers.drawn(page.edges()).keys() == helpers.expected_edges(w, 0, 300, [1], 0.01).keys()
    assert page.errors == [] and page.requests == [page.url]
    helpers.artifacts.mkdir(exist_ok=True)
    page.page.screenshot(path=str(helpers.artifacts / "explorer-512.png"))


def test_float16_storage_decodes_exactly_in_the_page(tmp_path, open_page, helpers, monkeypatch):
    from attnlab.interp import attention_views

    monkeypatch.setattr(attention_views, "FLOAT32_LIMIT", 16)  # force the big-input format on a small page
    w = helpers.mha_weights(5, 7, layers=1, heads=2, seed=6)
    view = AttentionView("cross-attention", "cross", list("abcde"), list("ABCDEFG"), w)
    page = open_page(_write(tmp_path, [view]))
    got = np.array(
        page.page.evaluate(
            "[...Array(2).keys()].map(h => [...Array(5).keys()].map(i => [...Array(7).keys()]"
            ".map(j => window.attnExplorer.weight(0, h, i, j))))"
        )
    )
    np.testing.assert_array_equal(got, w[0].astype(np.float16).astype(np.float64))
    assert np.max(np.abs(got - w[0])) < 5e-4


def test_page_opens_on_the_given_focus_and_links_back(tmp_path, open_page, helpers):
    w = helpers.mha_weights(len(TOKENS), len(TOKENS), layers=2, heads=4, seed=7)
    view = AttentionView("encoder self-attention", "self", TOKENS, TOKENS, w)
    focus = opening_focus([view], "it", "animal")
    i, j = TOKENS.index("it"), TOKENS.index("animal")
    assert w[focus["layer"], focus["head"], i, j] == w[:, :, i, j].max()
    path = tmp_path / "focus.html"
    html = render_html(
        [view], model_label="m", sentence=SENTENCE, focus=focus, back=("index.html", "back to the report")
    )
    path.write_text(html, encoding="utf-8")
    page = open_page(path)
    assert page.page.evaluate("window.attnExplorer.state()") == focus
    assert page.page.get_attribute(f"button.tok[data-index='{i}']", "aria-selected") == "true"
    assert page.page.get_attribute("#back-link", "href") == "index.html"
    assert page.page.text_content("#back-link") == "back to the report"
    assert page.errors == [] and page.requests == [page.url]


def test_orange_outlines_have_a_visible_legend_and_links_show(tmp_path, open_page, helpers):
    t = len(TOKENS)
    w = helpers.mha_weights(t, t, layers=1, heads=4, seed=3)
    w[0, 1] = np.eye(t, k=-1)  # head 2 attends to the previous token: a detector names it
    w[0, 1, 0, 0] = 1.0
    view = AttentionView("encoder self-attention", "self", TOKENS, TOKENS, w)
    name, score = view.badges()[0][1].split()[:2]
    assert name == "prev" and float(score) > 0.9  # 11 of its 12 rows look one token back
    links = [("concepts/07-multi-head-attention.html", "concept page: multi-head attention")]
    path = tmp_path / "badged.html"
    path.write_text(render_html([view], model_label="m", sentence=SENTENCE, links=links), encoding="utf-8")
    page = open_page(path)
    outlined = page.page.eval_on_selector_all("#model-view canvas.badged", "els => els.length")
    assert outlined == sum(bool(b) for row in view.badges() for b in row) >= 1
    legend = page.page.locator("#badge-legend")
    assert legend.is_visible() and "orange outline" in legend.text_content()
    box = page.page.locator("#badge-legend .swatch-badged").bounding_box()
    assert box["width"] > 0 and box["height"] > 0
    outline = "e => getComputedStyle(e).outlineColor"
    colour = page.page.eval_on_selector("#badge-legend .swatch-badged", outline)
    thumb = page.page.eval_on_selector("#model-view canvas.badged", outline)
    assert colour == thumb == "rgb(217, 119, 6)"  # the swatch is the outline's colour
    assert page.page.get_attribute("#links-line a", "href") == links[0][0]
    assert page.page.text_content("#links-line a") == links[0][1]
    # no outlined head, no legend
    plain = AttentionView("cross", "cross", ["a", "b"], ["x", "y", "z"], np.full((1, 2, 2, 3), 1 / 3))
    path2 = tmp_path / "plain.html"
    path2.write_text(render_html([plain], model_label="m"), encoding="utf-8")
    page2 = open_page(path2)
    assert page2.page.eval_on_selector_all("#model-view canvas.badged", "els => els.length") == 0
    assert page2.page.is_hidden("#badge-legend") and page2.page.is_hidden("#links-line")
