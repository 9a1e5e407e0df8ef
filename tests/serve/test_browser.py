"""The served page in a real headless Chromium: type a sentence, click a token, read the weights
drawn, switch a head off, and compare what the page shows with the library called directly on the
same text; hostile strings are shown as text and run nothing."""

from __future__ import annotations

import pytest
import torch

from attnlab.decoding import greedy
from attnlab.interp import ablate_heads, explain_similarity, score_heads
from attnlab.nn.hooks import capture

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SENTENCE = "A learner types a sentence and clicks a token to see where it attends."
PROMPT = "the cat sat on the mat . the dog ran and the cat"


class Page:
    """The page of the live server, recording every request, dialog and script error."""

    def __init__(self, browser, url: str):
        self.url = url
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready=true]", timeout=60000)
        self.wait("attention")

    def wait(self, view: str) -> None:
        self.page.wait_for_selector(f"#v-{view}[data-state=done]", timeout=60000)

    def run(self, text: str, model: int | None = None) -> None:
        if model is not None and self.page.eval_on_selector("#model-select", "e => e.value") != str(model):
            self.page.select_option("#model-select", str(model))
        self.page.fill("#text", text)
        self.page.click("#run")
        self.wait("attention")

    def edges(self) -> dict:
        return {
            (e["head"], e["key"]): e["weight"] for e in self.page.evaluate("window.attnServe.drawnEdges()")
        }

    def clean(self) -> None:
        """Nothing fetched from anywhere but this server, no dialog, no script error."""
        assert all(u.startswith(self.url) for u in self.requests), self.requests
        assert self.dialogs == [] and self.errors == []


@pytest.fixture
def page(browser, live):
    p = Page(browser, live.url)
    yield p
    p.page.close()


def _weights(loaded, text):
    """The library's own weights ``[L, h, T, T]`` (hook points), independent of the server."""
    ids = torch.tensor([loaded.tokenizer.encode(text)])
    prefix = "blocks" if loaded.kind == "gpt" else "layers"
    run = loaded.model if loaded.kind == "gpt" else loaded.model.encode
    with torch.inference_mode(), capture(loaded.model, [f"{prefix}.*.self_attn.weights"]) as cache:
        run(ids)
    return ids, torch.stack([cache[f"{prefix}.{i}.self_attn.weights"][0] for i in range(len(cache))])


def test_type_a_sentence_click_a_token_and_read_the_weights(page, minilm):
    page.run(SENTENCE, model=0)
    ids, w = _weights(minilm, SENTENCE)
    shown = page.page.eval_on_selector_all("button.tok", "bs => bs.map(b => b.textContent)")
    assert shown == minilm.tokenizer.tokens(ids[0].tolist())
    q = shown.index("clicks")
    page.page.select_option("#layer-select", "2")
    page.page.select_option("#head-select", "-1")
    page.page.click(f"button.tok[data-index='{q}']")
    want = {
        (h, j): float(w[2, h, q, j]) for h in range(12) for j in range(len(shown)) if w[2, h, q, j] >= 0.01
    }
    got = page.edges()
    assert got.keys() == want.keys() and len(want) > 12
    assert max(abs(got[k] - want[k]) for k in want) < 1e-7  # float32 both sides: the same numbers
    page.page.select_option("#head-select", "5")
    assert {h for h, _ in page.edges()} == {5}
    row = [page.page.evaluate(f"window.attnServe.weight(2, 5, {q}, {j})") for j in range(len(shown))]
    assert row == pytest.approx(w[2, 5, q].tolist(), abs=1e-7) and sum(row) == pytest.approx(1, abs=1e-5)
    # the heatmap's tooltip names the exact weight of the cell under the mouse
    left, top, cell = (
        float(page.page.get_attribute("#heatmap", f"data-{k}")) for k in ("left", "top", "cell")
    )
    page.page.hover("#heatmap", position={"x": left + 3.5 * cell, "y": top + (q + 0.5) * cell})
    assert page.page.get_attribute("#tooltip", "data-key") == "3"
    assert float(page.page.get_attribute("#tooltip", "data-weight")) == pytest.approx(
        float(w[2, 5, q, 3]), abs=1e-7
    )
    # the detector grid shows the library's scores
    scores = score_heads([x[None] for x in w], ids)["previous"]
    cells = page.page.eval_on_selector_all("#head-grid td", "tds => tds.map(t => t.textContent)")
    assert cells == [f"{v:.2f}" for v in scores.flatten().tolist()]
    # the audit card and the similarity split of a second sentence
    page.wait("audit")
    assert "total 22,713,216" in page.page.text_content("#params-total")
    assert "one encoder layer" in page.page.text_content("#v-audit .explain")
    other = "A student clicks a word to see its attention."
    page.page.fill("#text-b", other)
    page.page.click("#compare")
    page.wait("similarity")
    cosine = explain_similarity(minilm.model, minilm.tokenizer.backend, SENTENCE, other).cosine
    assert page.page.text_content("#cosine").startswith(f"cosine {cosine:.4f} = the sum of the")
    timings = page.page.evaluate("window.attnServe.timings()")
    assert timings["first"] > 0 and timings["last"]["server"] > 0 and timings["last"]["render"] >= 0
    page.clean()


def test_a_decoder_shows_its_causal_mask_next_tokens_lens_and_generation(page, gpt):
    page.run(PROMPT, model=1)
    for view in ("next", "lens", "audit"):
        page.wait(view)
    ids, w = _weights(gpt, PROMPT)
    t = ids.shape[1]
    got = torch.tensor(page.page.evaluate("window.attnServe.weights()"))  # every weight the page holds
    assert torch.equal(got.reshape(2, 4, t, t), w.float())
    assert float(torch.triu(got.reshape(2, 4, t, t), 1).abs().max()) == 0.0
    assert "causal mask" in page.page.text_content("#heatmap-title")
    audit = page.page.text_content("#v-audit .explain")  # the text follows the model chosen
    assert "one decoder layer" in audit and "encoder layer" not in audit.split("notes")[0]
    page.page.click("button.tok[data-index='2']")
    assert {j for _, j in page.edges()} <= {0, 1, 2}
    with torch.inference_mode():
        top = gpt.model(ids)[0].argmax(-1).tolist()  # [T]: the most likely next token at each position
    firsts = page.page.eval_on_selector_all(
        "#next-table tr[data-position] td:nth-child(3)", "tds => tds.map(t => t.textContent)"
    )
    assert [f.split(" ")[0] for f in firsts] == gpt.tokenizer.tokens(top)
    last = page.page.eval_on_selector_all(
        "#lens-table tr:last-child td", "tds => tds.map(t => t.textContent)"
    )
    assert last == gpt.tokenizer.tokens(top)  # the lens's last row is the output
    page.page.fill("#gen-n", "12")
    page.page.click("#generate")
    page.wait("generate")
    shown = page.page.evaluate("JSON.parse(document.getElementById('gen-greedy').dataset.ids)")
    assert shown == greedy(gpt.model, ids, 12, eos_id=-1)[0].tolist()
    page.clean()


def test_switching_a_head_off_shows_the_change_the_library_computes(page, gpt, minilm):
    page.run(PROMPT, model=1)
    page.page.click("#ablate-grid button[data-head='1.2']")
    page.wait("ablate")
    assert page.page.evaluate("window.attnServe.state().off") == ["1.2"]
    ids = torch.tensor([gpt.tokenizer.encode(PROMPT)])
    with torch.inference_mode():
        before = gpt.model(ids)[0].log_softmax(-1)
        with ablate_heads(gpt.model, [(1, 2)]):
            after = gpt.model(ids)[0].log_softmax(-1)
    kl = (before.exp() * (before - after)).sum(-1)
    shown = page.page.eval_on_selector_all(
        "#ablate-table tr[data-kl]", "rs => rs.map(r => Number(r.dataset.kl))"
    )
    assert shown == pytest.approx(kl.tolist(), abs=1e-6) and max(shown) > 0
    loss_after = float(torch.nn.functional.nll_loss(after[:-1], ids[0, 1:]))
    assert f"\u2192 {loss_after:.3f}" in page.page.text_content("#ablate-summary")
    page.page.click("#ablate-grid button[data-head='1.2']")  # on again: no change at all
    page.wait("ablate")
    assert page.page.eval_on_selector_all(
        "#ablate-table tr[data-kl]", "rs => rs.map(r => Number(r.dataset.kl))"
    ) == [0] * len(shown)
    # an encoder: the sentence vector with and without the head
    page.run(SENTENCE, model=0)
    page.page.click("#ablate-grid button[data-head='0.3']")
    page.wait("ablate")
    ids = torch.tensor([minilm.tokenizer.encode(SENTENCE)])
    with torch.inference_mode():
        a = minilm.model.encode(ids)[0].mean(0)
        with ablate_heads(minilm.model, [(0, 3)]):
            b = minilm.model.encode(ids)[0].mean(0)
    cosine = float(torch.nn.functional.cosine_similarity(a, b, dim=0))
    assert f"{cosine:.4f}" in page.page.text_content("#ablate-summary")
    page.clean()


def test_hostile_strings_are_shown_as_text_and_run_nothing(page, gpt, hostile_texts):
    for text in hostile_texts:
        page.run(text, model=1)
        words = page.page.eval_on_selector_all("button.tok", "bs => bs.map(b => b.textContent)")
        assert words == text.split()  # one token per word, markup and all
        page.wait("next")
        page.page.click("#generate")
        page.wait("generate")
        assert page.page.text_content("#gen-greedy .prompt") == text
        generated = page.page.text_content("#gen-sample .new")
        ids = page.page.evaluate("JSON.parse(document.getElementById('gen-sample').dataset.ids)")
        assert generated == gpt.tokenizer.decode(ids)  # markup included, as text
        page.page.click("button.tok[data-index='0']")
        page.page.hover("#lens-table td")
    page.run("<script>alert(1)</script> \u2603 <img src=x onerror=alert(1)>", model=0)
    assert "\u2603" in page.page.text_content("#unknown")
    page.page.wait_for_timeout(300)  # give a would-be onerror handler its chance
    assert page.page.evaluate("document.querySelectorAll('img, iframe, object, embed').length") == 0
    assert page.page.evaluate("document.scripts.length") == 3  # draw.js, app.js, the model list (data)
    page.clean()
