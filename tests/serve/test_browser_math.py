"""The math panel in a real headless Chromium: click a token, read the weights drawn (equal to the
math view's JSON), the MathML formulas drawn, each toggle showing what the library computed; and the
page's rough edges: a text too long for the model marks the old results stale and offers the cut, a
character model's spaces and newlines are visible, the error banner goes once a request succeeds,
the sticky header is opaque."""

from __future__ import annotations

import pytest
import torch

from attnlab.models import GPT, GPTConfig, load
from attnlab.serve import views
from attnlab.tasks.text_tokenizer import char_tokenizer

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PROMPT = "the cat sat on the mat . the dog ran and the cat"


@pytest.fixture(scope="module")
def char_live(tmp_path_factory):
    """A server with a character-level GPT alone (random weights, 96 positions; its characters
    include the space and the newline)."""
    from attnlab.serve import server
    from attnlab.serve.app import create_app

    torch.manual_seed(0)
    tok = char_tokenizer("abcdefghijklmnopqrstuvwxyz .,\n")
    out = tmp_path_factory.mktemp("char-gpt-nl")
    config = GPTConfig(
        vocab_size=tok.get_vocab_size(), d_model=32, num_heads=4, num_layers=2, d_ff=64, max_len=96
    )
    GPT(config).eval().save(out)
    tok.save(str(out / "tokenizer.json"))
    sock = server.bind("127.0.0.1", 0)
    hosts = server.hosts_for("127.0.0.1", sock.getsockname()[1])
    with server.background(create_app([("char-gpt", load(out))], hosts), sock) as url:
        yield url


def _open(browser, url: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]", timeout=60000)
    page.wait_for_selector("#v-attention[data-state=done]", timeout=60000)
    return page, errors


def _run(page, text: str, model: str | None = None) -> None:
    if model is not None and page.eval_on_selector("#model-select", "e => e.value") != model:
        page.select_option("#model-select", model)
    page.fill("#text", text)
    page.click("#run")
    page.wait_for_selector("#v-attention[data-state=done]", timeout=60000)


def _click(page, index: int) -> None:
    page.click(f"button.tok[data-index='{index}']")
    page.wait_for_selector("#v-math[data-state=done]", timeout=60000)


def _rows(page, attr: str) -> list[float]:
    return page.eval_on_selector_all(
        f"#math-weights tr[data-{attr}]", f"rs => rs.map(r => Number(r.dataset.{attr}))"
    )


def test_click_a_token_and_read_the_equation_drawn(browser, live, gpt):
    page, errors = _open(browser, live.url)
    _run(page, PROMPT, model="1")
    page.select_option("#layer-select", "1")
    page.select_option("#head-select", "2")
    _click(page, 5)
    want = views.answer("math", gpt, {"text": PROMPT, "layer": 1, "head": 2, "position": 5})
    assert page.get_attribute("#math-title", "data-head") == "1.2"
    assert _rows(page, "weight") == want["weights"]  # every key's weight, exactly the JSON's
    drawn = [page.evaluate(f"window.attnServe.weight(1, 2, 5, {j})") for j in range(len(want["weights"]))]
    assert drawn == want["weights"]  # = the attention view's row
    top = page.eval_on_selector_all("#math-top tr[data-key]", "rs => rs.map(r => Number(r.dataset.key))")
    assert top == [r["key"] for r in want["top"]]
    # each step's formula is MathML, drawn with a size, and names its concept page
    boxes = page.eval_on_selector_all(
        ".step .mathml",
        "ms => ms.map(m => [m.querySelector('math') !== null, m.textContent.trim().length, "
        "m.getBoundingClientRect().height])",
    )
    assert len(boxes) >= 6 and all(has and chars > 2 and height > 8 for has, chars, height in boxes)
    links = page.eval_on_selector_all(".step .concepts a", "as => as.map(a => a.getAttribute('href'))")
    assert links and all(h.startswith("/concepts/") for h in links)
    assert page.evaluate("document.scripts.length") == 3  # MathML brings no script
    assert errors == []
    page.close()


def test_each_toggle_shows_what_the_library_computed(browser, live, gpt):
    page, errors = _open(browser, live.url)
    _run(page, PROMPT, model="1")
    page.select_option("#layer-select", "0")
    page.select_option("#head-select", "1")
    _click(page, 4)
    want = views.answer("math", gpt, {"text": PROMPT, "layer": 0, "head": 1, "position": 4})
    assert _rows(page, "alt") == []
    page.check("#math-unscaled")
    assert _rows(page, "alt") == want["unscaled"]["weights"]
    summary = page.text_content("#math-unscaled-summary")
    u = want["unscaled"]
    assert f"Entropy {u['entropy'][0]:.3f} \u2192 {u['entropy'][1]:.3f}" in summary
    assert f"({u['d_k']} = " not in summary and f"d_k = {u['d_k']})" in summary
    page.uncheck("#math-unscaled")
    page.check("#math-unmasked")
    assert _rows(page, "alt") == want["unmasked"]["weights"]
    share = want["unmasked"]["future_share"]
    assert share > 0 and f"{100 * share:.1f}%" in page.text_content("#math-unmasked-summary")
    future = page.eval_on_selector_all("#math-weights tr.future", "rs => rs.map(r => Number(r.dataset.key))")
    assert future == list(range(5, len(want["weights"])))
    # the temperature slider picks the library's distribution at that temperature
    for stop in (0, 6):
        page.eval_on_selector(
            "#math-temperature", f"e => {{ e.value = '{stop}'; e.dispatchEvent(new Event('input')); }}"
        )
        at = want["temperature"][stop]
        assert float(page.get_attribute("#math-next", "data-temperature")) == at["temperature"]
        shown = page.eval_on_selector_all("#math-next tr[data-p]", "rs => rs.map(r => Number(r.dataset.p))")
        assert shown == [t["p"] for t in at["top"]]
    assert errors == []
    page.close()


def test_rough_edges_stale_results_cut_whitespace_banner_header(browser, char_live):
    page, errors = _open(browser, char_live)
    _run(page, "ab c\nd")
    tokens = page.eval_on_selector_all("button.tok", "bs => bs.map(b => b.textContent)")
    assert tokens == ["a", "b", "\u2423", "c", "\u23ce", "d"]  # a space and a newline, visible
    page.wait_for_selector("#v-next[data-state=done]")
    cells = page.eval_on_selector_all(
        "#next-table tr[data-position] td:nth-child(2)", "ts => ts.map(t => t.textContent)"
    )
    assert cells == tokens
    assert all(
        not t.startswith(" ")
        for t in page.eval_on_selector_all(
            "#next-table tr[data-position] td:nth-child(3)", "ts => ts.map(t => t.textContent)"
        )
    )
    # a text longer than the model's 96 positions: the old results are marked stale, the cut offered
    page.fill("#text", "abcd " * 30)
    page.click("#run")
    page.wait_for_selector("#cut-offer:not([hidden])")
    assert "more than 96 tokens" in page.text_content("#error")
    for view in ("tokens", "attention", "next"):
        assert page.get_attribute(f"#v-{view}", "data-state") == "stale"
    page.click("#cut")
    page.wait_for_selector("#v-attention[data-state=done]")
    assert len(page.input_value("#text")) == 96 and page.is_hidden("#error") and page.is_hidden("#cut-offer")
    assert page.eval_on_selector_all("button.tok", "bs => bs.length") == 96
    # an error banner goes once a later request succeeds
    page.fill("#gen-seed", str(2**31))  # a seed past the server's bound (the form sets none): a 400
    page.click("#generate")
    page.wait_for_selector("#error:not([hidden])")
    _click(page, 3)
    assert page.is_hidden("#error")
    # the sticky header is opaque over what scrolls under it
    page.mouse.wheel(0, 1500)
    colour = page.eval_on_selector("header", "h => getComputedStyle(h).backgroundColor")
    assert colour == "rgb(250, 251, 252)"
    assert errors == []
    page.close()
