"""The concept pages in a real headless Chromium: the mathematics is laid out, not left as LaTeX."""

from __future__ import annotations

import pytest

from attnlab import concepts

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# per math element: its box, and for each fraction the boxes of its numerator and denominator
MEASURE = """() => [...document.querySelectorAll('math')].map(m => {
  const r = m.getBoundingClientRect();
  const fracs = [...m.querySelectorAll('mfrac')].map(f => {
    const [num, den] = [...f.children].map(c => c.getBoundingClientRect());
    return {numBottom: num.bottom, denTop: den.top};
  });
  return {w: r.width, h: r.height, display: m.getAttribute('display'), fracs};
})"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("concepts")
    return concepts.write_pages(folder)


@pytest.mark.parametrize("name", concepts.page_names())
def test_every_formula_is_drawn_as_mathematics(browser, pages, name):
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    url = pages[name].resolve().as_uri()
    page.goto(url)
    boxes = page.evaluate(MEASURE)
    text = page.inner_text("body")
    images = page.evaluate("[...document.images].map(i => i.naturalWidth)")
    page.close()
    assert boxes and all(b["w"] > 0 and b["h"] > 0 for b in boxes), boxes
    assert "$$" not in text and "\\frac" not in text and "\\sqrt" not in text
    fracs = [f for b in boxes for f in b["fracs"]]
    # a fraction is drawn as one: its numerator stands above its denominator
    assert all(f["numBottom"] <= f["denTop"] + 0.5 for f in fracs), fracs
    display = [b for b in boxes if b["display"] == "block"]
    assert display and all(b["h"] >= 12 for b in display)
    assert all(w > 100 for w in images), images  # pictures are embedded and decode
    assert requests == [url] + [r for r in requests[1:] if r.startswith("data:image/png")]
    assert not [r for r in requests if not r.startswith(("file:", "data:"))]  # no network at all


def test_the_index_links_reach_each_page(browser, pages):
    page = browser.new_page()
    page.goto(pages["README.md"].resolve().as_uri())
    with page.expect_navigation():
        page.click("a[href='05-scaled-dot-product.html']")
    assert page.url.endswith("/05-scaled-dot-product.html")
    assert page.evaluate("document.querySelectorAll('math').length") >= 4
    with page.expect_navigation():
        page.click("text=all concept pages")
    assert page.url.endswith("/index.html")
    page.close()
