"""The concept pages (one idea each, ``docs/concepts`` in the repository) as HTML pages.

The Markdown pages ship inside the package (``attnlab/concepts/pages``), so an installed attnlab
can build them: :func:`write_pages` writes ``index.html`` (the pages' table of contents) and one
``NN-name.html`` per page into a folder, with every formula as MathML (drawn by the browser, no
script or network), images embedded, and links between pages pointing at the HTML files. Links to files of the
repository that are not pages (source files, other docs) are shown as text naming the file.
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib.resources import files
from pathlib import Path

from attnlab._io import atomic_write_bytes
from attnlab.concepts.markdown import escape, title, to_html

FOLDER = "concepts"  # the pages' folder next to the page that links to them
_PAGE = re.compile(r"^(\d\d-[a-z0-9-]+)\.md$")
_STYLE = (
    "body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1d1d1f}"
    "h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:1.8rem}nav.top{font-size:.9rem;color:#556}"
    "nav.top a{margin-right:1rem}pre{background:#f5f6f8;border:1px solid #e2e4e8;border-radius:4px;"
    "padding:.7rem;overflow-x:auto;font-size:.85rem;line-height:1.35}"
    "code{background:#f3f3f3;padding:0 .15rem}pre code{background:none;padding:0}"
    "pre code.language-output{color:#17492b}math[display=block]{margin:1rem 0;font-size:1.1em}"
    "table{border-collapse:collapse;font-size:.9rem}td,th{border:1px solid #ddd;padding:.25rem .5rem;"
    "vertical-align:top}th{background:#f3f6fc}.repo-path{border-bottom:1px dotted #889}img{max-width:100%}"
)


def source() -> Path:
    """The folder of the Markdown pages inside the installed package."""
    return Path(str(files("attnlab.concepts") / "pages"))


def page_names() -> list[str]:
    """The pages' file names in order (``01-seq2seq-bottleneck.md`` ...), the index excluded."""
    return sorted(p.name for p in source().iterdir() if _PAGE.match(p.name))


def html_name(md_name: str) -> str:
    """``05-scaled-dot-product.md`` -> ``05-scaled-dot-product.html``; ``README.md`` -> ``index.html``."""
    if md_name == "README.md":
        return "index.html"
    match = _PAGE.match(md_name)
    if match is None:
        raise ValueError(f"{md_name!r} is not a concept page (NN-name.md or README.md)")
    return match.group(1) + ".html"


def href(md_name: str, folder: str = FOLDER) -> str:
    """The relative link from a page beside ``folder`` to the HTML of concept page ``md_name``."""
    return f"{folder}/{html_name(md_name)}"


def page_title(md_name: str) -> str:
    """The page's heading as plain text (``Scaled dot-product attention and why √d_k``)."""
    return title((source() / md_name).read_text(encoding="utf-8"))


def _link(target: str) -> str | None:
    """Where a page's link goes among the written pages (``None``: a repository file, shown as text)."""
    if target.startswith(("http://", "https://", "#")):
        return target
    name, _, anchor = target.partition("#")
    if "/" in name or not (name == "README.md" or _PAGE.match(name)):
        return None
    return html_name(name) + (f"#{anchor}" if anchor else "")


def _image(src: str) -> str:
    """A page's image (``../img/NAME.png``, shipped beside the pages) as a ``data:`` URI."""
    name = src.removeprefix("../img/")
    path = source().parent / "img" / name
    if "/" in name or not name.endswith(".png") or not path.is_file():
        raise ValueError(f"a concept page shows {src!r}: images must be ../img/NAME.png files of docs/img")
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(_STYLE.encode("utf-8")).digest()).decode("ascii")
    return (
        f"default-src 'none'; img-src data:; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )


def render_page(md_name: str, back: tuple[str, str] | None = None) -> str:
    """One page as a self-contained HTML document; ``back=(href, text)`` links the page that links here
    (relative to the pages' folder, e.g. ``("../index.html", "the attnlab demo report")``)."""
    names = page_names()
    text = (source() / md_name).read_text(encoding="utf-8")
    nav = [] if back is None else [f'<a href="{escape(back[0])}">\u2190 {escape(back[1])}</a>']
    if md_name != "README.md":
        nav.append('<a href="index.html">all concept pages</a>')
        at = names.index(md_name)
        for word, other in (("previous", at - 1), ("next", at + 1)):
            if 0 <= other < len(names):
                name = names[other]
                nav.append(f'<a href="{html_name(name)}">{word}: {escape(page_title(name))}</a>')
    heading = title(text) or md_name
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{escape(_csp())}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>attnlab concepts: {escape(heading)}</title><style>{_STYLE}</style></head>"
        f'<body><nav class="top">{"".join(nav)}</nav>\n{to_html(text, _link, _image)}</body></html>\n'
    )


def write_pages(out_dir: str | Path, back: tuple[str, str] | None = None) -> dict[str, Path]:
    """Write ``index.html`` and every page's HTML into ``out_dir``; returns ``{md name: html path}``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for name in ["README.md", *page_names()]:
        path = out / html_name(name)
        atomic_write_bytes(path, render_page(name, back).encode("utf-8"))
        written[name] = path
    return written


__all__ = ["FOLDER", "href", "html_name", "page_names", "page_title", "render_page", "source", "write_pages"]
