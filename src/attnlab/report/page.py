"""One self-contained HTML report: every section in the notes' order Concept -> Code -> Output ->
Interpretation, images inlined as base64 ``data:`` URIs, no scripts, no external URLs — readable
offline by opening the file. A section may link the concept pages it draws on (written beside the
report by :func:`attnlab.concepts.write_pages`)."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from attnlab import concepts

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #1d1d1f; line-height: 1.45; }
h1 { font-size: 1.7em; margin-bottom: 0.2em; }
h2 { border-bottom: 2px solid #dde; padding-bottom: 0.2em; margin-top: 2.2em; }
h3 { font-size: 0.95em; text-transform: uppercase; letter-spacing: 0.05em; color: #556;
     margin: 1.2em 0 0.3em; }
pre { background: #f5f6f8; border: 1px solid #e2e4e8; border-radius: 4px; padding: 0.7em; overflow-x: auto;
      font-size: 0.82em; line-height: 1.35; }
pre.output { background: #f7fbf7; border-color: #d5e8d5; }
.concept { background: #f3f6fc; border-left: 4px solid #5b7bd5; padding: 0.5em 0.8em; }
.interpretation { background: #fcf8ef; border-left: 4px solid #d5a75b; padding: 0.5em 0.8em; }
.missing { color: #a33; }
img { max-width: 100%; border: 1px solid #eee; }
nav ol { list-style: none; padding: 0; columns: 2 24em; column-gap: 2.5em; }
nav li { display: flex; gap: 0.4em; break-inside: avoid; margin: 0.15em 0; }
nav li .n { flex: none; min-width: 1.6em; text-align: right; color: #667; }
pre.wrap { white-space: pre-wrap; overflow-wrap: anywhere; }
.meta { color: #667; font-size: 0.9em; }
.table-wrap { overflow-x: auto; margin: 0.6em 0; }
table { border-collapse: collapse; font-size: 0.85em; }
td, th { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f6fc; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.read { font-size: 0.9em; }
"""


def data_uri(png: str | Path) -> str:
    """``data:image/png;base64,...`` of a PNG file (so the report needs no other files)."""
    return "data:image/png;base64," + base64.b64encode(Path(png).read_bytes()).decode("ascii")


def img(png: str | Path, alt: str) -> str:
    return f'<img src="{data_uri(png)}" alt="{html.escape(alt, quote=True)}">'


def pre(text: str, cls: str = "") -> str:
    """``<pre>`` of escaped ``text``; ``cls`` its classes: ``output`` (a result), ``wrap`` (long lines
    wrap at the box's edge instead of scrolling: prose, not a table whose columns must stay aligned)."""
    klass = f' class="{cls}"' if cls else ""
    return f"<pre{klass}>{html.escape(text)}</pre>"


# a number, maybe with its thousands commas, sign, percent and a note in parentheses: "0.41 (1.3)"
_NUMBER = re.compile(r"^[-+−]?[\d,]*\.?\d+%?( \(.*\))?$")


def table(header: list[str], rows: list[list[str]], html_cells: bool = False) -> str:
    """An HTML table in a box that scrolls sideways when wide; a column whose every cell is a number
    is right-aligned (``class="num"``), text is left-aligned. Cells are escaped text, or trusted
    HTML when ``html_cells`` (built with :func:`link`)."""
    numeric = [bool(rows) and all(_NUMBER.match(str(r[i]).strip()) for r in rows) for i in range(len(header))]
    cls = [' class="num"' if n else "" for n in numeric]
    cell = (lambda c: str(c)) if html_cells else (lambda c: html.escape(str(c)))
    head = "".join(f"<th{k}>{html.escape(h)}</th>" for h, k in zip(header, cls))
    body = "".join("<tr>" + "".join(f"<td{k}>{cell(c)}</td>" for c, k in zip(r, cls)) + "</tr>" for r in rows)
    return f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def link(href: str, text: str) -> str:
    """``<a href="href">text</a>``, both escaped."""
    return f'<a href="{html.escape(href, quote=True)}">{html.escape(text)}</a>'


def concept_links(names: tuple[str, ...] | list[str]) -> str:
    """Links to the rendered concept pages ``names`` (``05-scaled-dot-product.md`` ...), titled."""
    return ", ".join(link(concepts.href(n), concepts.page_title(n)) for n in names)


@dataclass
class Section:
    """One report section. ``output_html`` is trusted HTML built with :func:`pre`, :func:`img`,
    :func:`table`; every other field is plain text and is escaped. ``error`` replaces the body with
    a note when the section could not be built. ``concepts`` names the concept pages (``NN-name.md``)
    the section links at its end."""

    key: str
    title: str
    concept: str = ""
    code: str = ""
    output_html: str = ""
    interpretation: str = ""
    error: str = ""
    seconds: float = 0.0
    extra_html: str = field(default="")
    concepts: tuple[str, ...] = ()

    def to_html(self) -> str:
        parts = [f'<section id="{html.escape(self.key, quote=True)}">', f"<h2>{html.escape(self.title)}</h2>"]
        if self.error:
            parts.append(f'<p class="missing">This section could not be built: {html.escape(self.error)}</p>')
            return "\n".join(parts + ["</section>"])
        if self.concept:
            parts += ["<h3>Concept</h3>", f'<div class="concept">{_paragraphs(self.concept)}</div>']
        if self.code:
            parts += ["<h3>Code</h3>", pre(self.code)]
        if self.output_html:
            parts += ["<h3>Output</h3>", self.output_html]
        if self.interpretation:
            parts += [
                "<h3>Interpretation</h3>",
                f'<div class="interpretation">{_paragraphs(self.interpretation)}</div>',
            ]
        if self.extra_html:
            parts.append(self.extra_html)
        if self.concepts:
            parts.append(f'<p class="read">Concept pages: {concept_links(self.concepts)}</p>')
        parts.append(f'<p class="meta">built in {self.seconds:.1f} s</p>')
        return "\n".join(parts + ["</section>"])


def _paragraphs(text: str) -> str:
    return "".join(f"<p>{html.escape(p.strip())}</p>" for p in text.strip().split("\n\n") if p.strip())


def render(title: str, intro: str, sections: list[Section], footer: str = "", top_html: str = "") -> str:
    """The whole page as one HTML string; ``top_html`` (trusted) goes under the introduction."""
    # the numbers are text in their own box, inside the column (a list marker sits outside it, in the
    # gap, over the other column's text); one column when the window is narrower than two of 24em
    nav = "".join(
        f'<li><span class="n">{i}.</span>'
        f'<a href="#{html.escape(s.key, quote=True)}">{html.escape(s.title)}</a></li>'
        for i, s in enumerate(sections, 1)
    )
    body = "\n".join(s.to_html() for s in sections)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<title>{html.escape(title)}</title>
<style>{CSS}</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
<p class="meta">{html.escape(intro)}</p>
{top_html}
<nav><ol>{nav}</ol></nav>
{body}
<hr><p class="meta">{html.escape(footer)}</p>
</body>
</html>
"""
