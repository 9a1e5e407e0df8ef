"""The concept pages as HTML: shipped in the package, every formula MathML, every link resolving."""

from __future__ import annotations

import html
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from attnlab import concepts
from attnlab.concepts.markdown import mathml, title, to_html

DOCS = Path(__file__).resolve().parents[2] / "docs" / "concepts"
CODE = re.compile(r"```.*?```", re.S)


def _formulas(text: str) -> int:
    """How many formulas a Markdown page holds: $$ blocks and $...$ spans outside code."""
    text = re.sub(r"`[^`\n]*`", "", CODE.sub("", text))
    display = len(re.findall(r"^\$\$$.+?^\$\$$", text, re.S | re.M))
    text = re.sub(r"^\$\$$.+?^\$\$$", "", text, flags=re.S | re.M)
    return display + len(re.findall(r"\$[^$\s][^$]*?\$", text))  # a formula may span a line break


def test_the_package_holds_every_page_of_docs_concepts():
    shipped = concepts.page_names()
    assert shipped == sorted(p.name for p in DOCS.glob("[0-9][0-9]-*.md")) and len(shipped) == 16
    for name in [*shipped, "README.md"]:
        assert (concepts.source() / name).read_bytes() == (DOCS / name).read_bytes()


@pytest.mark.slow
def test_a_built_wheel_carries_the_pages(tmp_path):
    """What `pip install attnlab` gets: the wheel holds each Markdown page and each picture it shows,
    byte for byte."""
    root = DOCS.parents[1]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path),
         str(root)],
        check=True, cwd=tmp_path, capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("attnlab-*.whl")
    with zipfile.ZipFile(wheel) as z:
        for page in [*DOCS.glob("[0-9][0-9]-*.md"), DOCS / "README.md"]:
            assert z.read(f"attnlab/concepts/pages/{page.name}") == page.read_bytes(), page.name
            for img in re.findall(r"!\[[^]]*\]\(\.\./img/([^)]+)\)", page.read_text(encoding="utf-8")):
                assert z.read(f"attnlab/concepts/img/{img}") == (DOCS.parent / "img" / img).read_bytes()


@pytest.mark.parametrize("name", sorted(p.name for p in DOCS.glob("[0-9][0-9]-*.md")))
def test_every_formula_becomes_one_math_element(name):
    text = (DOCS / name).read_text(encoding="utf-8")
    page = concepts.render_page(name)
    n = _formulas(text)
    assert n >= 2 and page.count("<math ") == n, (n, page.count("<math "))
    assert (
        page.count('<math xmlns="http://www.w3.org/1998/Math/MathML" display="block"')
        == text.count("$$") // 2
    )
    visible = re.sub(r"<math .*?</math>", "", page, flags=re.S)
    assert "$$" not in visible and "<merror" not in page
    assert not re.search(
        r"\\(frac|sqrt|operatorname|mathrm|top|lfloor)\b", re.sub(r"<pre>.*?</pre>", "", page, flags=re.S)
    )


def test_formulas_the_converter_leaves_half_done_are_fixed_or_refused():
    floor = mathml(r"\Big\lfloor \frac{i}{g} \Big\rfloor", display=False)
    assert "\u230a" in floor and "\u230b" in floor and "\\" not in floor
    with pytest.raises(ValueError, match="keeps the LaTeX command"):
        mathml(r"\nosuchcommand x", display=False)
    assert title("# Scaled dot-product and why $\\sqrt{d_k}$") == "Scaled dot-product and why \u221ad_k"


def test_dollars_in_code_stay_text_and_inline_math_needs_a_closing_dollar():
    out = to_html("cost `$5` and $x^2$ and 3 $ left\n\n```python\nprint('$a$')\n```\n")
    assert out.count("<math ") == 1 and "<code>$5</code>" in out and "print('$a$')" in out
    assert "3 $ left" in out


def test_written_pages_link_only_to_each_other(tmp_path):
    written = concepts.write_pages(tmp_path, back=("../index.html", "the report"))
    (tmp_path.parent / "index.html").write_text("report")
    assert sorted(p.name for p in written.values()) == sorted(
        ["index.html"] + [concepts.html_name(n) for n in concepts.page_names()]
    )
    index = written["README.md"].read_text(encoding="utf-8")
    for name in concepts.page_names():  # the index links every page, as its Markdown table does
        assert f'href="{concepts.html_name(name)}"' in index
    for path in written.values():
        page = path.read_text(encoding="utf-8")
        for href in re.findall(r'href="([^"]*)"', page):
            if href.startswith(("http://", "https://")):
                continue
            target = href.split("#")[0]
            assert target and (tmp_path / target).is_file(), (path.name, href)
        assert not re.search(r'href="[^"]*\.md', page) and "<script" not in page
        assert "default-src 'none'" in html.unescape(page)
    # a repository file that is not a page is named, not linked
    page = written["05-scaled-dot-product.md"].read_text(encoding="utf-8")
    assert '<span class="repo-path" title="in the repository: ../../src/attnlab/ref/attention.py">' in page


def test_an_unknown_page_name_is_refused():
    with pytest.raises(ValueError, match="not a concept page"):
        concepts.html_name("../../etc/passwd")
