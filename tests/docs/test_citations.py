"""Every sentence the docs, the README or the package quote from a course document is in that
document. The three documents (``tests/data/course``, or ``ATTNLAB_SEEDS``): the Week 1 notes on
attention, the plain-language notes and the Week 19 course page.

What counts as a quotation (the convention the pages follow):

- text in double quotes ("..." or “...”) of five words or more with a document's name after it
  in the rest of its sentence (as in ``"..." (the Week 19 course page).``) or, failing that, the
  last one named before it in its sentence, within 80 characters (other quotations left out);
- in a blockquote without quotation marks, the text before ``— the <document>``;
- an experiment's ``CLAIM``: attributed to the first document its ``SOURCE`` names, or, without a
  ``SOURCE``, each part of it to the document named in the parenthesis that follows the part.

A quotation matches when, with markup, quotation marks, dashes and whitespace normalised and case
ignored, each part of it between ellipses (…) occurs in the named document.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEEDS = Path(os.environ.get("ATTNLAB_SEEDS", ROOT / "tests" / "data" / "course"))
FILES = {
    "the Week 1 notes": "week01-notes.txt",
    "the plain-language notes": "plain-language-notes.txt",
    "the Week 19 course page": "week19-course-page.txt",
}
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# a document's name as the pages write it; "the notes" alone is the Week 1 notes
NAME = re.compile(
    r"plain-language notes|notes in plain language|plain-language|Week 1 notes|"
    r"Week 19 course page|Week 19 page|course page|the notes",
    re.IGNORECASE,
)
QUOTE = re.compile(r'"([^"]+)"|“([^”]+)”')
DASH_SOURCE = re.compile(r"—\s*(the [^.;()—]*?(?:notes|course page))(?:\s*\([^)]*\))?\s*[;,.]?")
PAREN_SOURCE = re.compile(r"\((the [^()]*?(?:notes|course page)[^()]*)\)\s*[;,.]?")


def document(name: str) -> str:
    """The key of :data:`FILES` that a written name refers to."""
    low = name.lower()
    if "plain" in low:
        return "the plain-language notes"
    if "19" in low or "course page" in low:
        return "the Week 19 course page"
    return "the Week 1 notes"


def normalise(text: str) -> str:
    """Compatibility-normalised, curly quotes and dashes made plain, Markdown emphasis and code
    marks and LaTeX's inline delimiters dropped, whitespace runs as one space, lower case."""
    text = unicodedata.normalize("NFKC", text)
    for a, b in (("’", "'"), ("‘", "'"), ("“", '"'), ("”", '"'), ("–", "-"), ("—", "-"), ("->", "→")):
        text = text.replace(a, b)
    text = re.sub(r"[*`_]|\\[()\[\]]", "", text)  # Markdown marks, LaTeX's \( \) \[ \]
    return re.sub(r"\s+", " ", text).strip().lower()


def found_in(quote: str, seed: str) -> bool:
    """Every part of ``quote`` between ellipses occurs in ``seed`` (both normalised)."""
    parts = [p.strip(" .,;:") for p in re.split(r"…|\.\.\.", normalise(quote))]
    return all(p in seed for p in parts if p)


def markdown_quotes(text: str) -> list[tuple[str, str]]:
    """``(quotation, document)`` pairs of a Markdown page (the module doc's convention)."""
    out = []
    for para in re.split(r"\n\s*\n", text):
        quoted = para.lstrip().startswith(">")
        para = re.sub(r"^\s*>\s?", "", para, flags=re.MULTILINE)
        marks = list(QUOTE.finditer(para))
        if quoted and not marks:
            start = 0
            for m in DASH_SOURCE.finditer(para):
                out.append((para[start : m.start()].strip(), document(m.group(1))))
                start = m.end()
            continue
        for i, m in enumerate(marks):
            quote = m.group(1) or m.group(2)
            if len(quote.split()) < 5 or re.search(r"Week \d|notes", quote):
                continue  # a term, or a title that names a document
            end = marks[i + 1].start() if i + 1 < len(marks) else len(para)
            after = para[m.end() : end][:160]
            after = after[: re.search(r"[.!?](?:\s|$)|$", after).start()]  # to the sentence's end
            name = NAME.search(after)
            if name is None:
                before = QUOTE.sub('""', para[: m.start()])  # the other quotations left out
                before = re.split(r"[.!?]\s", before)[-1][-80:]  # its own sentence, nearby
                names = list(NAME.finditer(before))
                name = names[-1] if names else None
            if name is not None:
                out.append((quote, document(name.group(0))))
    return out


def claim_quotes(claim: str, source: str | None) -> list[tuple[str, str]]:
    """An experiment's ``CLAIM`` as ``(quotation, document)`` pairs (the module doc's convention)."""
    if source is not None:
        return [(claim, document(NAME.search(source).group(0)))]
    out, start = [], 0
    for m in PAREN_SOURCE.finditer(claim):
        out.append((claim[start : m.start()].strip(), document(m.group(1))))
        start = m.end()
    return out


def _seeds() -> dict[str, str]:
    return {name: normalise((SEEDS / f).read_text(encoding="utf-8")) for name, f in FILES.items()}


def _experiment_claims() -> list[tuple[str, str, str]]:
    import attnlab.experiments as pkg

    out = []
    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"attnlab.experiments.{info.name}")
        claim = getattr(module, "CLAIM", None)
        if isinstance(claim, str):
            for quote, doc in claim_quotes(claim, getattr(module, "SOURCE", None)):
                out.append((info.name, quote, doc))
    return out


def test_the_convention_reads_each_form():
    page = (
        'It says "one two three four five" (the Week 19 course page).\n\n'
        "> Six seven eight nine ten. — the Week 1 notes (section 2); eleven twelve. — the "
        "plain-language notes\n\n"
        'The notes: "a b c d e", and "x" is short.'
    )
    assert markdown_quotes(page) == [
        ("one two three four five", "the Week 19 course page"),
        ("Six seven eight nine ten.", "the Week 1 notes"),
        ("eleven twelve.", "the plain-language notes"),
        ("a b c d e", "the Week 1 notes"),
    ]
    assert claim_quotes("A b. (the Week 1 notes, s. 1); c d (the Week 19 course page).", None) == [
        ("A b.", "the Week 1 notes"),
        ("c d", "the Week 19 course page"),
    ]
    seeds = {"s": normalise("The sum is over *values*,\n not keys. And more.")}
    assert found_in("the sum is over values … and more", seeds["s"])
    assert not found_in("the sum is over keys", seeds["s"])


def test_every_quotation_in_the_docs_is_in_the_document_named():
    seeds = _seeds()
    checked, wrong = 0, []
    for page in PAGES:
        for quote, doc in markdown_quotes(page.read_text(encoding="utf-8")):
            checked += 1
            if not found_in(quote, seeds[doc]):
                elsewhere = [d for d, s in seeds.items() if found_in(quote, s)]
                wrong.append(f"{page.relative_to(ROOT)}: {quote[:70]!r} is not in {doc} (in: {elsewhere})")
    assert checked >= 15  # the convention still finds the pages' quotations
    assert wrong == []


def test_every_experiment_claim_is_in_the_document_named():
    seeds = _seeds()
    claims = _experiment_claims()
    assert len(claims) >= 9
    wrong = [
        f"{name}: {quote[:70]!r} not in {doc}"
        for name, quote, doc in claims
        if not found_in(quote, seeds[doc])
    ]
    assert wrong == []


def test_the_cost_estimates_are_credited_to_the_course_page():
    """4n²d and 16nd² are the Week 19 course page's (the Week 1 notes have neither)."""
    seeds = _seeds()
    assert "4 n2d" in seeds["the Week 19 course page"]
    assert all("4 n2d" not in s and "4n^2" not in s for d, s in seeds.items() if "19" not in d)
    texts = [*PAGES, *sorted((ROOT / "src" / "attnlab").rglob("*.py"))]
    wrong = [
        f"{p.relative_to(ROOT)}: {m.group(0)!r}"
        for p in texts
        for m in re.finditer(r"notes'?,?[^.;\n]{0,40}?(?:4n²d|16nd²)", p.read_text(encoding="utf-8"))
    ]
    assert wrong == []
